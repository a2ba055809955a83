//! One slot's state machine: a closed-loop client that runs one attempt after another on its
//! connection (kept alive, or a new one each). It takes what the kernel reported as values (a
//! connect done or refused, a send that failed, bytes received, the peer's close, the tick's
//! clock) and answers with what to do next as a value (`Next`): the operations to submit, the
//! connection to shut down or close, the attempt's end to record. It holds no ring and makes
//! no system call, so every path is unit-tested without a kernel (`slot/tests.rs`); the driver
//! (`driver.rs`) submits what it returns. Nothing here allocates per completion: `Next` is a
//! plain value and the answer is parsed in the slot's own `Inbox`.

use std::time::{Duration, Instant};

use super::tag::Op;
use crate::inbox::{discard, Answer, Inbox, Progress};
use crate::ledger::STARVED_PAUSE;
use crate::stats::ErrorKind;

/// What the slots of one driver share: how their attempts go.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// Connections are kept for the next attempt unless the server closes them.
    pub keep_alive: bool,
    /// Requests are HEAD, so answers carry no body whatever their head says.
    pub head_request: bool,
    /// Each connection has one multishot receive standing on it (kept-alive connections with
    /// provided buffers), instead of a receive queued behind every send.
    pub multishot: bool,
    /// An attempt not answered within this long fails as a timeout.
    pub timeout: Duration,
    /// An answer that says the server closes counts only once it has (sequential pacing):
    /// the next connection must not overlap this one's tear-down.
    pub await_close: bool,
}

/// Where a receive may write: the free room of the slot's inbox. It stays valid until that
/// receive completes, since nothing else touches the inbox meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spare {
    pub ptr: *mut u8,
    pub len: u32,
}

/// The request of an attempt, to be sent: connect first if the slot has no connection. The
/// send and the receive behind it (`Next::recv`, if any) are linked after the connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// The prepared request to send (its index, as the driver picked it).
    pub request: usize,
    pub connect: bool,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ended {
    /// Answered, the answer complete at `done` (before the server's close, when the attempt
    /// waited for it).
    Answered {
        began: Instant,
        answer: Answer,
        done: Instant,
    },
    Failed(ErrorKind),
}

/// What the driver does for the slot after one report, in the order of the fields.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Next {
    /// A connect succeeded after this long.
    pub connected: Option<Duration>,
    /// Answer bytes taken in.
    pub read: usize,
    /// The attempt in hand ended.
    pub ended: Option<Ended>,
    /// Shut the connection down: the kernel still holds some of its operations, which the
    /// shutdown makes come back; the slot closes it once they have.
    pub shutdown: bool,
    /// Close the connection now (the kernel holds none of its operations).
    pub close: bool,
    /// Stand a multishot receive on the connection.
    pub arm: bool,
    /// Send a request (after a connect, if new).
    pub send: Option<Exchange>,
    /// Receive into the inbox: linked behind `send` if there is one, else alone.
    pub recv: Option<Spare>,
    /// Begin the next attempt (`Slot::begin`) if the budget allows, else `Slot::finish`.
    pub begin: bool,
}

/// What a multishot receive reported: bytes, or its end (0: the peer closed; else `-errno`).
#[derive(Clone, Copy, Debug)]
pub enum Arrival<'b> {
    Bytes(&'b [u8]),
    End(i32),
}

#[derive(Default)]
pub struct Slot {
    /// The slot has a connection (its socket belongs to the driver).
    open: bool,
    inbox: Inbox,
    progress: Progress,
    /// When the attempt in hand began (its connect included), and when its connect began.
    began: Option<Instant>,
    /// The attempt's answer, complete at the instant given, held until the server's close.
    closing: Option<(Answer, Instant)>,
    connect_began: Option<Instant>,
    /// Operations of this slot the kernel still holds and will report (a send reports only
    /// if it fails, and is not counted).
    pending: u32,
    /// The connection is being given up (a failure, or the server's close) while operations
    /// are in flight; they are awaited, not acted on, and then the socket is closed.
    draining: bool,
    /// A multishot receive stands on the connection.
    armed: bool,
    /// Counts the slot's connections, so a late report about a closed one is recognised.
    generation: u32,
    /// A paused slot begins again no sooner than this.
    resume_at: Option<Instant>,
    /// The budget is spent: no more attempts.
    finished: bool,
}

impl Slot {
    /// The slot's connection count, which tags its operations.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// An attempt is in hand (begun, neither answered nor failed).
    pub fn in_attempt(&self) -> bool {
        self.began.is_some()
    }

    /// When the connect the attempt in hand waits for began, if it waits for one.
    pub fn connect_pending_since(&self) -> Option<Instant> {
        self.began.and(self.connect_began)
    }

    /// No attempt will begin again and the kernel holds none of the slot's reports.
    pub fn is_done(&self) -> bool {
        self.finished && self.pending == 0
    }

    /// The kernel still holds operations (or a buffer) of the slot.
    pub fn is_busy(&self) -> bool {
        self.pending > 0 || self.armed
    }

    /// The budget is spent: the slot begins nothing more.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// Begins an attempt at `now` with prepared request `request`: on the slot's connection,
    /// else on a new one that `open` makes (its error fails the attempt, and the slot pauses,
    /// since an immediate retry would fail the same way).
    pub fn begin(
        &mut self,
        rules: &Rules,
        now: Instant,
        request: usize,
        open: impl FnOnce() -> Result<(), ErrorKind>,
    ) -> Next {
        let mut next = Next::default();
        self.began = Some(now);
        self.progress = Progress::default();
        let connect = !self.open;
        if connect {
            if let Err(kind) = open() {
                self.fail(kind, now, &mut next);
                self.resume_at = Some(now + STARVED_PAUSE);
                return next;
            }
            self.open = true;
            self.inbox.clear();
            self.connect_began = Some(now);
        }
        // With a multishot receive standing on the connection the exchange needs none.
        let recv = match rules.multishot {
            true => None,
            false => match spare_of(&mut self.inbox) {
                Ok(spare) => Some(spare),
                Err(kind) => {
                    // Nothing is in flight, so no report would move the slot on: the tick
                    // begins it again.
                    self.fail(kind, now, &mut next);
                    self.resume_at = Some(now);
                    return next;
                }
            },
        };
        self.pending += u32::from(connect) + u32::from(recv.is_some());
        next.send = Some(Exchange { request, connect });
        next.recv = recv;
        next
    }

    /// A connect, a send or a (single) receive of connection `generation` completed with
    /// `result` (the kernel's: a count, or `-errno`).
    pub fn on_completion(
        &mut self,
        rules: &Rules,
        now: Instant,
        generation: u32,
        op: Op,
        result: i32,
    ) -> Next {
        let mut next = Next::default();
        if generation != self.generation || op == Op::Close {
            // About a connection already closed (a failed send reporting late).
            return next;
        }
        if op != Op::Send {
            self.pending -= 1;
        }
        // A link broken by an earlier failure was counted with that failure.
        if !self.draining && result != -libc::ECANCELED {
            match op {
                Op::Connect => self.connected(result, now, &mut next),
                Op::Send => self.sent(result, now, &mut next),
                Op::Recv => self.received(rules, result, now, &mut next),
                Op::Close => {}
            }
        }
        self.settle(rules, now, &mut next);
        next
    }

    /// The multishot receive of connection `generation` reported `arrival`; `more` says it
    /// still stands (without it, `settle` arms another if the connection stays).
    pub fn on_multishot(
        &mut self,
        rules: &Rules,
        now: Instant,
        generation: u32,
        more: bool,
        arrival: Arrival,
    ) -> Next {
        let mut next = Next::default();
        if generation != self.generation {
            return next;
        }
        if !more {
            self.armed = false;
        }
        if !self.draining {
            match arrival {
                Arrival::Bytes(bytes) => self.absorb(rules, bytes, now, &mut next),
                // Cancelled, or out of provided buffers: the receive ended, the connection
                // did not.
                Arrival::End(r) if r == -libc::ECANCELED || r == -libc::ENOBUFS => {}
                Arrival::End(r) if self.began.is_some() => self.received(rules, r, now, &mut next),
                // The server let an idle connection go: the next attempt opens another.
                Arrival::End(_) if !self.armed => self.close(&mut next),
                Arrival::End(_) => {}
            }
        }
        self.settle(rules, now, &mut next);
        next
    }

    /// The loop's periodic look: fails an attempt that outlived the timeout, and moves on a
    /// slot that waits for nothing from the kernel (a pause that is over).
    pub fn tick(&mut self, rules: &Rules, now: Instant) -> Next {
        let mut next = Next::default();
        let overdue = self
            .began
            .is_some_and(|began| now.duration_since(began) > rules.timeout);
        if overdue && !self.draining {
            self.fail(ErrorKind::Timeout, now, &mut next);
        }
        if self.pending == 0 && self.began.is_none() {
            self.settle(rules, now, &mut next);
        }
        next
    }

    /// At the end of the run: an operation of the slot came back (`more`: a multishot
    /// receive that still stands), and is not acted on.
    pub fn returned(&mut self, rules: &Rules, op: Op, more: bool) {
        match op {
            Op::Recv if rules.multishot => self.armed &= more,
            Op::Connect | Op::Recv => self.pending -= 1,
            Op::Send | Op::Close => {}
        }
    }

    fn connected(&mut self, result: i32, now: Instant, next: &mut Next) {
        if result < 0 {
            let err = std::io::Error::from_raw_os_error(-result);
            return self.fail(ErrorKind::from_connect(&err), now, next);
        }
        next.connected = Some(now - self.connect_began.take().unwrap_or(now));
    }

    /// A send reports only when it failed: with `MSG_WAITALL` the kernel retries a short
    /// send itself, so a count short of the request means the connection broke.
    fn sent(&mut self, result: i32, now: Instant, next: &mut Next) {
        let kind = match result {
            r if r < 0 => ErrorKind::from_io(&std::io::Error::from_raw_os_error(-r)),
            _ => ErrorKind::Reset,
        };
        self.fail(kind, now, next);
    }

    /// A receive into the inbox got `result` bytes (0: the peer closed; below: `-errno`).
    fn received(&mut self, rules: &Rules, result: i32, now: Instant, next: &mut Next) {
        if let Some((answer, done)) = self.closing {
            return self.closed(answer, done, result, now, next);
        }
        if result < 0 {
            let err = std::io::Error::from_raw_os_error(-result);
            return self.fail(ErrorKind::from_io(&err), now, next);
        }
        if result == 0 {
            return match self.progress.ended_by_close() {
                Some(answer) => self.answered(rules, answer, now, next),
                None => self.fail(ErrorKind::Closed, now, next),
            };
        }
        self.progress.first_byte.get_or_insert(now);
        next.read += result as usize;
        self.inbox.filled(result as usize);
        self.parse(rules, now, next);
    }

    /// Takes bytes of a multishot receive into the inbox, answering as they complete.
    fn absorb(&mut self, rules: &Rules, mut bytes: &[u8], now: Instant, next: &mut Next) {
        next.read += bytes.len();
        while !bytes.is_empty() {
            let spare = match self.inbox.spare(None) {
                Ok(spare) => spare,
                Err(kind) if self.began.is_some() => return self.fail(kind, now, next),
                // Unasked-for bytes past the limit: no answer to pin them on.
                Err(_) => return self.drop_connection(next),
            };
            let n = spare.len().min(bytes.len());
            spare[..n].copy_from_slice(&bytes[..n]);
            self.inbox.filled(n);
            bytes = &bytes[n..];
            if self.began.is_some() {
                self.progress.first_byte.get_or_insert(now);
                self.parse(rules, now, next);
                if matches!(next.ended, Some(Ended::Failed(_))) {
                    return;
                }
            }
        }
    }

    /// Parses what the inbox holds for the attempt in hand.
    fn parse(&mut self, rules: &Rules, now: Instant, next: &mut Next) {
        match self
            .inbox
            .advance(&mut self.progress, rules.head_request, &mut discard)
        {
            Ok(Some(answer)) => self.answered(rules, answer, now, next),
            Ok(None) => {}
            Err(kind) => self.fail(kind, now, next),
        }
    }

    fn answered(&mut self, rules: &Rules, answer: Answer, now: Instant, next: &mut Next) {
        if rules.await_close && answer.close {
            // The attempt (and its timeout) goes on until the close: `settle` asks for the
            // receive that sees it.
            self.closing = Some((answer, now));
            self.inbox.clear();
            return;
        }
        let began = self.began.take().unwrap_or(now);
        next.ended = Some(Ended::Answered {
            began,
            answer,
            done: now,
        });
        if !rules.keep_alive || answer.close {
            self.drop_connection(next);
        }
    }

    /// A receive behind a held answer got `result`: the server's close ends the attempt
    /// answered; bytes after the answer are dropped unread, as the epoll loop drops them.
    fn closed(
        &mut self,
        answer: Answer,
        done: Instant,
        result: i32,
        now: Instant,
        next: &mut Next,
    ) {
        if result < 0 {
            let err = std::io::Error::from_raw_os_error(-result);
            return self.fail(ErrorKind::from_io(&err), now, next);
        }
        if result > 0 {
            next.read += result as usize;
            self.inbox.clear();
            return;
        }
        self.closing = None;
        let began = self.began.take().unwrap_or(done);
        next.ended = Some(Ended::Answered {
            began,
            answer,
            done,
        });
        self.drop_connection(next);
    }

    /// Ends the attempt with an error; operations still in flight are cut short.
    fn fail(&mut self, kind: ErrorKind, now: Instant, next: &mut Next) {
        debug_assert!(next.ended.is_none(), "one attempt ends once");
        next.ended = Some(Ended::Failed(kind));
        self.began = None;
        self.closing = None;
        if kind.invalidates_run() {
            self.resume_at = Some(now + STARVED_PAUSE);
        }
        self.drop_connection(next);
    }

    /// Gives the connection up: closed at once if the kernel holds none of its operations,
    /// else shut down and closed when they are back.
    fn drop_connection(&mut self, next: &mut Next) {
        if self.is_busy() {
            self.draining = true;
            next.shutdown = true;
        } else {
            self.close(next);
        }
    }

    fn close(&mut self, next: &mut Next) {
        self.inbox.clear();
        if !self.open {
            return;
        }
        self.open = false;
        self.generation = self.generation.wrapping_add(1);
        next.close = true;
    }

    /// After a report: moves the slot on once the kernel holds none of its operations.
    fn settle(&mut self, rules: &Rules, now: Instant, next: &mut Next) {
        if self.pending > 0 {
            return;
        }
        if self.draining {
            if self.armed {
                return;
            }
            self.draining = false;
            self.close(next);
        }
        if rules.multishot && self.open && !self.armed {
            self.armed = true;
            next.arm = true;
        }
        if self.began.is_some() {
            if !rules.multishot {
                self.receive(rules, now, next);
            }
            return;
        }
        if self.resume_at.is_some_and(|at| now < at) || self.finished {
            return;
        }
        self.resume_at = None;
        next.begin = true;
    }

    /// Queues a receive for more of the answer in hand.
    fn receive(&mut self, rules: &Rules, now: Instant, next: &mut Next) {
        match spare_of(&mut self.inbox) {
            Ok(spare) => {
                self.pending += 1;
                next.recv = Some(spare);
            }
            Err(kind) => {
                self.fail(kind, now, next);
                self.settle(rules, now, next);
            }
        }
    }
}

/// Where the next receive may write: the inbox's free room.
fn spare_of(inbox: &mut Inbox) -> Result<Spare, ErrorKind> {
    let spare = inbox.spare(None)?;
    Ok(Spare {
        ptr: spare.as_mut_ptr(),
        len: spare.len() as u32,
    })
}

#[cfg(test)]
mod tests;
