//! Behaviours stage: a WebSocket whose frames the attack writes itself (the `ws-*` attacks).
//! The upgrade is the `websocket` behaviour's; every frame is masked as RFC 6455 §5.3 asks
//! of a client, its header formatted by tungstenite. The server's frames are read and
//! dropped, but for its pongs, counted (`pongs`), and its close frame, which ends the
//! connection as its TCP close does (`closed`): the server defending itself is the outcome
//! measured. The engine answers nothing: the attack is all it writes.

use std::io::Cursor;
use std::time::Instant;

use tungstenite::protocol::frame::coding::{Control, OpCode};
use tungstenite::protocol::frame::FrameHeader;

use super::schedule::Schedule;
use super::websocket::{upgrade, Masks};
use super::Attempt;
use crate::client::Client;
use crate::inbox::Answer;
use crate::stats::{ErrorKind, Event};

/// Opens a connection and asks for the upgrade (`head`: `websocket::upgrade_head`): the
/// connection's masks once upgraded; `None` when the server answered another status, which
/// is recorded as the attempt's answer.
pub(super) async fn open(
    c: &mut Client,
    head: &[u8],
    attempt: Attempt,
) -> Result<Option<Masks>, ErrorKind> {
    let (status, sent, masks) = upgrade(c, head).await?;
    if status == 101 {
        return Ok(Some(masks));
    }
    let answer = Answer {
        status,
        close: true,
        first_byte: Instant::now(),
    };
    c.record_answer(attempt.intended, sent, &answer);
    c.close();
    Ok(None)
}

/// A client frame's header announcing `len` payload bytes, masked with `mask`.
pub(super) fn header(opcode: OpCode, is_final: bool, len: u64, mask: [u8; 4]) -> Vec<u8> {
    let header = FrameHeader {
        is_final,
        opcode,
        mask: Some(mask),
        ..FrameHeader::default()
    };
    let mut out = Vec::with_capacity(header.len(len));
    // Writing to a Vec cannot fail.
    let _ = header.format(len, &mut out);
    out
}

/// Appends `payload` masked with `mask`, as bytes `offset..` of its frame's payload.
pub(super) fn mask_onto(out: &mut Vec<u8>, payload: &[u8], mask: [u8; 4], offset: u64) {
    let at = offset as usize;
    out.extend(
        payload
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[(at + i) % 4]),
    );
}

/// A whole client frame: its header and its masked payload.
pub(super) fn frame(opcode: OpCode, is_final: bool, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = header(opcode, is_final, payload.len() as u64, mask);
    mask_onto(&mut out, payload, mask, 0);
    out
}

/// Writes units `0..total` (endless with `None`) at `per_s` (`Schedule`), `units(from, to)`
/// making the bytes of units `from..to` and `wrote(n)` counting them once written, then
/// holds the connection; the server's frames are read meanwhile. Ends only when the server
/// ends the connection (the run's end drops it).
pub(super) async fn paced(
    c: &mut Client,
    per_s: f64,
    total: Option<u64>,
    mut units: impl FnMut(u64, u64) -> Vec<u8>,
    wrote: impl Fn(&Client, u64),
) -> Result<(), ErrorKind> {
    let mut reader = Reader::default();
    let mut schedule = Schedule::new(per_s, total);
    while !schedule.done() {
        let due = schedule.take_due();
        if !due.is_empty() {
            c.send(&units(due.start, due.end)).await?;
            wrote(c, due.end - due.start);
        }
        reader.listen(c, Some(schedule.next_at())).await?;
    }
    reader.listen(c, None).await
}

/// Holds the connection, reading the server's frames, until the server ends it.
pub(super) async fn hold(c: &mut Client) -> Result<(), ErrorKind> {
    Reader::default().listen(c, None).await
}

/// Where reading the server's frames stands: the bytes of a frame's payload still to skip.
#[derive(Default)]
struct Reader {
    skipping: u64,
}

impl Reader {
    /// Reads the server's frames until `until` (`None`: until the server ends the
    /// connection, its close frame or its TCP close: `closed`).
    async fn listen(&mut self, c: &mut Client, until: Option<Instant>) -> Result<(), ErrorKind> {
        loop {
            self.take_frames(c)?;
            let read = match until {
                Some(at) => match tokio::time::timeout_at(at.into(), c.fill()).await {
                    Err(_) => return Ok(()),
                    Ok(read) => read,
                },
                None => c.fill().await,
            };
            if read? == 0 {
                return Err(ErrorKind::Closed);
            }
        }
    }

    /// Takes every frame read so far: a pong is counted, a close ends the connection,
    /// every payload is skipped.
    fn take_frames(&mut self, c: &mut Client) -> Result<(), ErrorKind> {
        loop {
            let skipped = self.skipping.min(c.unread().len() as u64);
            c.consume(skipped as usize);
            self.skipping -= skipped;
            if self.skipping > 0 {
                return Ok(());
            }
            let mut cursor = Cursor::new(c.unread());
            let (header, len) = match FrameHeader::parse(&mut cursor) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => return Ok(()),
                Err(_) => return Err(ErrorKind::Parse),
            };
            let used = cursor.position() as usize;
            c.consume(used);
            match header.opcode {
                OpCode::Control(Control::Close) => return Err(ErrorKind::Closed),
                OpCode::Control(Control::Pong) => c.ledger().counters().add(Event::Pongs, 1),
                _ => {}
            }
            self.skipping = len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tungstenite::protocol::frame::coding::Data;

    #[test]
    fn a_frame_is_masked_from_its_offset_and_its_header_announces_any_length() {
        let mask = [1, 2, 3, 4];
        let whole = frame(OpCode::Data(Data::Text), false, b"abcdef", mask);
        assert_eq!(&whole[..6], &[0x01, 0x80 | 6, 1, 2, 3, 4]);
        let mut tail = Vec::new();
        mask_onto(&mut tail, b"ef", mask, 4);
        assert_eq!(&whole[10..], &tail[..]);
        let huge = header(OpCode::Data(Data::Text), true, 1 << 30, mask);
        assert_eq!(
            huge,
            [0x81, 0x80 | 127, 0, 0, 0, 0, 0x40, 0, 0, 0, 1, 2, 3, 4]
        );
    }
}
