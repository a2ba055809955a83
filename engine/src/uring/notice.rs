//! The reading delay (`notice_us`) of a latency-bound plan on single receives: the first
//! receive of each answer is a `recvmsg` with room for the kernel's receive stamp, so the loop
//! can tell how long the answer waited before it was read, as the epoll loop does for the same
//! plans. Kept-alive connections with a multishot receive are stamped by `crate::stamps`
//! instead. One stamped receive per slot is in flight at most: the one linked behind a send.

use std::time::Duration;

use super::slot::Spare;
use crate::stamps::stamp_in;

/// One slot's `recvmsg`: its header and vector (the kernel copies both when the receive is
/// submitted) and the control buffer the kernel writes the stamp into when it completes.
struct Stamped {
    msghdr: libc::msghdr,
    iov: libc::iovec,
    /// Room for one cmsghdr and a timespec, 8-byte aligned as control messages need.
    control: [u64; 8],
    /// A stamped receive of this slot is in flight.
    out: bool,
}

/// The stamped receives of a driver's slots. The vector is never resized, so each control
/// buffer stays where the kernel was told it is.
pub struct Notice {
    slots: Vec<Stamped>,
}

impl Notice {
    pub fn new(slots: usize) -> Notice {
        let stamped = || {
            Stamped {
                // SAFETY: zeroed msghdr and iovec are valid (null pointers, zero lengths).
                msghdr: unsafe { std::mem::zeroed() },
                iov: libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                },
                control: [0; 8],
                out: false,
            }
        };
        Notice {
            slots: (0..slots).map(|_| stamped()).collect(),
        }
    }

    /// The `msghdr` of slot `index`'s next stamped receive into `spare`. The control buffer
    /// is zeroed first: the kernel does not say how much of it a `recvmsg` of the ring wrote,
    /// and a zero length ends the parse.
    pub fn prepare(&mut self, index: usize, spare: Spare) -> *mut libc::msghdr {
        let s = &mut self.slots[index];
        s.control = [0; 8];
        s.iov = libc::iovec {
            iov_base: spare.ptr.cast(),
            iov_len: spare.len as usize,
        };
        s.msghdr.msg_iov = &mut s.iov;
        s.msghdr.msg_iovlen = 1;
        s.msghdr.msg_control = s.control.as_mut_ptr().cast();
        s.msghdr.msg_controllen = std::mem::size_of_val(&s.control);
        s.out = true;
        &mut s.msghdr
    }

    /// A receive of slot `index` completed: the stamp its bytes carried if it was the stamped
    /// one (time since the epoch), else `None`.
    pub fn take(&mut self, index: usize) -> Option<Duration> {
        let s = &mut self.slots[index];
        if !std::mem::take(&mut s.out) {
            return None;
        }
        // SAFETY: reading the plain array's own bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                s.control.as_ptr().cast::<u8>(),
                std::mem::size_of_val(&s.control),
            )
        };
        stamp_in(bytes)
    }
}
