//! An operation's tag in the ring (its `user_data`): which slot it belongs to, which of the
//! slot's connections (a generation), and what kind of operation it is. A completion carries
//! the tag back, and the driver reads it to route the completion to the slot's state machine.

/// The kinds of operation a slot has in the ring.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Connect = 0,
    Send = 1,
    Recv = 2,
    Close = 3,
}

/// An operation's tag: its slot, the slot's connection (generation) and its kind.
pub fn user_data(slot: usize, generation: u32, op: Op) -> u64 {
    (u64::from(generation) << 32) | ((slot as u64) << 2) | op as u64
}

/// The slot, generation and kind a tag names.
pub fn decode(user_data: u64) -> (usize, u32, Op) {
    let op = match user_data & 3 {
        0 => Op::Connect,
        1 => Op::Send,
        2 => Op::Recv,
        _ => Op::Close,
    };
    (
        ((user_data & 0xffff_ffff) >> 2) as usize,
        (user_data >> 32) as u32,
        op,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_reads_back_as_its_slot_generation_and_kind() {
        let ops = [Op::Connect, Op::Send, Op::Recv, Op::Close];
        for (slot, generation) in [(0, 0), (1, 1), (32_767, u32::MAX), ((1 << 30) - 1, 7)] {
            for op in ops {
                assert_eq!(
                    decode(user_data(slot, generation, op)),
                    (slot, generation, op)
                );
            }
        }
    }
}
