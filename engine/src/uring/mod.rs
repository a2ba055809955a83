//! The io_uring loop for plain closed-loop requests (kept-alive or a new connection each):
//! the generator's hot path, in the drivers layer. On loopback most of a generator's CPU is
//! the kernel's TCP work, which no client can avoid; what it can avoid is the system call per
//! send, per receive and per wait that an epoll loop pays. Here each slot's send and the
//! receive behind it go to the kernel linked, and one `io_uring_enter` hands over every slot's
//! next request and collects every answer that came in. Answers are parsed by the same `Inbox`
//! as the epoll clients, and attempts are entered in the same `Ledger`.
//!
//! - `slot`: one slot's state machine, pure: reports in, next operations out (unit-tested);
//! - `driver`: the ring-facing loop that submits what the slots return;
//! - `tag`: an operation's `user_data` (slot, connection, kind);
//! - `bufring`: the provided buffers of multishot receives;
//! - `notice`: the kernel's receive stamps on single receives (latency-bound plans);
//! - `wait_target`: how many completions a wait asks for.

use std::io;

use io_uring::IoUring;

mod bufring;
mod driver;
mod notice;
mod slot;
mod tag;
mod wait_target;

pub use driver::Driver;

/// A ring for one worker: single issuer, and task work deferred to our own waits so
/// completions are reaped in batches on this thread.
pub fn new_ring(slots: usize) -> io::Result<IoUring> {
    let entries = (slots * 4).next_power_of_two().clamp(64, 32_768) as u32;
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
}
