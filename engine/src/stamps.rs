//! Receive timestamps on a sample of kept-alive connections. The kernel stamps each segment as
//! it arrives (`SO_TIMESTAMPNS`, wall clock) and a multishot `recvmsg` hands the stamp over
//! with the bytes, so the loop can tell how long an answer waited before it read it: the error
//! that batched waits add to a latency (`notice_us`). Only one connection in `SAMPLE_EVERY`
//! pays for the longer `recvmsg` path: a handful of connections already give thousands of
//! samples a second, and the fewer carry stamps the less the measurement costs.

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use io_uring::{opcode, squeue, types};
use socket2::Socket;

use crate::system::switch_on;

const SAMPLE_EVERY: usize = 64;

/// Whether slot `index` carries timestamps (slot 0 always does, so a run of one
/// connection is measured too).
pub fn sampled(index: usize) -> bool {
    index.is_multiple_of(SAMPLE_EVERY)
}

/// The `msghdr` the multishot receives are built from: room for one timestamp message.
pub struct Stamps {
    msghdr: Box<libc::msghdr>,
}

impl Default for Stamps {
    fn default() -> Stamps {
        // SAFETY: a zeroed msghdr is valid (null pointers, zero lengths).
        let mut msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: pure arithmetic on the size of a timespec.
        msghdr.msg_controllen = unsafe { libc::CMSG_SPACE(timespec_len()) } as usize;
        Stamps { msghdr }
    }
}

impl Stamps {
    /// Asks the kernel to stamp every segment the socket receives.
    pub fn enable(socket: &Socket) -> io::Result<()> {
        switch_on(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)
    }

    /// A multishot `recvmsg` on the connection, filling buffers of `group`.
    pub fn receive(&self, fd: types::Fixed, group: u16) -> squeue::Entry {
        // The kernel copies the msghdr when the receive is armed; the box outlives it anyway.
        opcode::RecvMsgMulti::new(fd, &*self.msghdr, group).build()
    }

    /// The bytes a completed buffer holds, and when the kernel received them (time since the
    /// epoch), if the buffer carries a stamp. `None` when the buffer is not a `recvmsg` result.
    pub fn unpack<'b>(&self, buffer: &'b [u8]) -> Option<(&'b [u8], Option<Duration>)> {
        let out = types::RecvMsgOut::parse(buffer, &self.msghdr).ok()?;
        // The parse borrows the buffer only through itself: find the payload in the buffer.
        let payload = out.payload_data();
        let start = payload.as_ptr() as usize - buffer.as_ptr() as usize;
        let payload = buffer.get(start..start + payload.len())?;
        Some((payload, stamp_in(out.control_data())))
    }
}

/// How long ago, by the wall clock, the kernel stamped `arrived` (zero if the clock went back).
pub fn waited_since(arrived: Duration) -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(arrived)
}

fn timespec_len() -> u32 {
    std::mem::size_of::<libc::timespec>() as u32
}

/// The `SCM_TIMESTAMPNS` stamp among the control messages, if there is one.
pub(crate) fn stamp_in(mut control: &[u8]) -> Option<Duration> {
    let header = std::mem::size_of::<libc::cmsghdr>();
    while control.len() >= header {
        // SAFETY: at least a header's bytes are there; read unaligned, as the buffer
        // promises no alignment.
        let cmsg: libc::cmsghdr = unsafe { std::ptr::read_unaligned(control.as_ptr().cast()) };
        let len = cmsg.cmsg_len;
        if len < header || len > control.len() {
            return None;
        }
        let data = &control[header..len];
        let is_stamp = cmsg.cmsg_level == libc::SOL_SOCKET
            && cmsg.cmsg_type == libc::SCM_TIMESTAMPNS
            && data.len() >= std::mem::size_of::<libc::timespec>();
        if is_stamp {
            // SAFETY: the length was checked just above.
            let ts: libc::timespec = unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) };
            return Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
        }
        // SAFETY: pure arithmetic on a length.
        let step = unsafe { libc::CMSG_SPACE((len - header) as u32) } as usize;
        control = control.get(step.max(len)..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        // SAFETY: a zeroed cmsghdr is valid; its fields are set below.
        let mut cmsg: libc::cmsghdr = unsafe { std::mem::zeroed() };
        cmsg.cmsg_len = std::mem::size_of::<libc::cmsghdr>() + data.len();
        cmsg.cmsg_level = level;
        cmsg.cmsg_type = kind;
        // SAFETY: reading the plain struct's own bytes.
        let head = unsafe {
            std::slice::from_raw_parts(
                (&cmsg as *const libc::cmsghdr).cast::<u8>(),
                std::mem::size_of::<libc::cmsghdr>(),
            )
        };
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(data);
        // SAFETY: pure arithmetic on a length.
        bytes.resize(unsafe { libc::CMSG_SPACE(data.len() as u32) } as usize, 0);
        bytes
    }

    fn timespec_bytes(sec: i64, nsec: i64) -> Vec<u8> {
        [sec.to_ne_bytes(), nsec.to_ne_bytes()].concat()
    }

    #[test]
    fn the_stamp_is_found_after_other_messages() {
        let mut control = message(libc::IPPROTO_IP, libc::IP_TOS, &[0, 0, 0, 0]);
        control.extend(message(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            &timespec_bytes(1_700_000_000, 250),
        ));
        assert_eq!(stamp_in(&control), Some(Duration::new(1_700_000_000, 250)));
    }

    #[test]
    fn no_stamp_or_a_broken_message_gives_none() {
        assert_eq!(stamp_in(&[]), None);
        let other = message(libc::SOL_SOCKET, libc::SCM_RIGHTS, &[1, 2, 3, 4]);
        assert_eq!(stamp_in(&other), None);
        let mut lying = message(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            &timespec_bytes(1, 2),
        );
        lying[0] = 0xff; // a length beyond the buffer
        assert_eq!(stamp_in(&lying), None);
        let short = message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &[0; 4]);
        assert_eq!(stamp_in(&short), None, "too short for a timespec");
    }

    #[test]
    fn a_stamp_from_the_future_waited_zero() {
        let future =
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(60);
        assert_eq!(waited_since(future), Duration::ZERO);
        assert!(waited_since(Duration::ZERO) > Duration::from_secs(1_000_000_000));
    }

    #[test]
    fn every_sixty_fourth_slot_is_sampled() {
        let sampled: Vec<usize> = (0..150).filter(|&i| sampled(i)).collect();
        assert_eq!(sampled, vec![0, 64, 128]);
    }
}
