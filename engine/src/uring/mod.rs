//! The io_uring loop for plain closed-loop requests (kept-alive or a new connection each):
//! the generator's hot path. On loopback most of a generator's CPU is the kernel's TCP work,
//! which no client can avoid; what it can avoid is the system call per send, per receive and
//! per wait that an epoll loop pays. Here each slot's send and the receive behind it go to the
//! kernel linked, and one `io_uring_enter` hands over every slot's next request and collects
//! every answer that came in. Answers are parsed by the same `Inbox` as the epoll clients, and attempts are entered in
//! the same `Ledger`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};
use socket2::{SockAddr, Socket};

mod bufring;
mod wait_target;

use bufring::BufRing;
use wait_target::WaitTarget;

use crate::conn::{new_socket, ConnOptions};
use crate::inbox::{discard, Answer, Inbox, Progress};
use crate::ledger::{OpenConnection, STARVED_PAUSE};
use crate::plain::Plain;
use crate::shared::WorkerCtx;
use crate::stamps::{self, Stamps};
use crate::stats::ErrorKind;

/// How often the loop wakes without completions, to look at timeouts and the clock.
const TICK: Duration = Duration::from_millis(20);
/// How long in-flight operations get to finish after the run ends, once their sockets
/// are shut down.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// `IORING_RECVSEND_POLL_FIRST` (Linux 5.19), which the io-uring crate does not export.
const RECVSEND_POLL_FIRST: u16 = 1;
/// Provided buffers for multishot receives: their size, and at most this many per worker.
const BUFFER_SIZE: usize = 4096;
const MAX_BUFFERS: usize = 4096;

/// A ring for one worker: single issuer, and task work deferred to our own waits so
/// completions are reaped in batches on this thread.
pub fn new_ring(slots: usize) -> io::Result<IoUring> {
    let entries = (slots * 4).next_power_of_two().clamp(64, 32_768) as u32;
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Connect = 0,
    Send = 1,
    Recv = 2,
    Close = 3,
}

/// Runs `$body` with `$fd` bound to the slot's descriptor: its place in the ring's file
/// table when sockets are registered there (no file lookup per operation), else the raw fd.
macro_rules! with_fd {
    ($fixed:expr, $index:expr, $socket:expr, |$fd:ident| $body:expr) => {
        if $fixed {
            let $fd = types::Fixed($index as u32);
            $body
        } else {
            let $fd = types::Fd($socket.as_ref().map_or(-1, AsRawFd::as_raw_fd));
            $body
        }
    };
}

/// An operation's tag: its slot, the slot's connection (generation) and its kind.
fn user_data(slot: usize, generation: u32, op: Op) -> u64 {
    (u64::from(generation) << 32) | ((slot as u64) << 2) | op as u64
}

fn decode(user_data: u64) -> (usize, u32, Op) {
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

#[derive(Default)]
struct Slot {
    socket: Option<Socket>,
    /// The socket's place in the open-connections gauge.
    open: Option<OpenConnection>,
    inbox: Inbox,
    progress: Progress,
    /// When the attempt began (its connect included), and when its connect began.
    began: Option<Instant>,
    connect_began: Option<Instant>,
    /// Operations of this slot the kernel still holds.
    pending: u32,
    /// The connection is being given up (a failure, or the server's close) while operations
    /// are in flight; they are awaited, not acted on, and then the socket is closed.
    draining: bool,
    /// A multishot receive stands on the connection.
    armed: bool,
    /// Counts the slot's connections, so a late report about a closed one is recognised.
    generation: u32,
    resume_at: Option<Instant>,
    finished: bool,
}

pub struct Driver<'a> {
    ring: IoUring,
    ctx: Rc<WorkerCtx>,
    plain: &'a Plain,
    addr: SockAddr,
    slots: Vec<Slot>,
    options: ConnOptions,
    timeout: Duration,
    /// Sockets are registered in the ring's file table (kept-alive connections, where a
    /// registration is rare); a connection per request uses raw descriptors instead.
    fixed: bool,
    /// Kept-alive connections: one multishot receive per connection, filling buffers from
    /// this ring, instead of a receive armed after every send.
    buffers: Option<BufRing>,
    scratch: Vec<u8>,
    /// Kept-alive connections: how many completions a wait asks for (see `wait_target`).
    batch: Option<WaitTarget>,
    /// When `tick` last ran; the next is due `TICK` later.
    last_tick: Instant,
    /// Sampled kept-alive connections receive with the kernel's timestamps.
    stamps: Stamps,
}

impl<'a> Driver<'a> {
    pub fn new(ring: IoUring, ctx: Rc<WorkerCtx>, plain: &'a Plain, slots: usize) -> Driver<'a> {
        let no_delay = plain.keep_alive();
        let fixed =
            plain.keep_alive() && ring.submitter().register_files_sparse(slots as u32).is_ok();
        let count = (slots * 2).next_power_of_two().clamp(16, MAX_BUFFERS) as u16;
        let buffers = fixed
            .then(|| BufRing::register(&ring, count, BUFFER_SIZE, 0).ok())
            .flatten();
        let addr: SocketAddr = ctx.shared.addr;
        let batch = buffers.is_some().then(WaitTarget::default);
        Driver {
            ring,
            plain,
            addr: addr.into(),
            slots: (0..slots).map(|_| Slot::default()).collect(),
            options: ConnOptions {
                source: None,
                recv_buffer: None,
                no_delay,
            },
            timeout: plain.timeout(),
            fixed,
            buffers,
            scratch: Vec::with_capacity(BUFFER_SIZE),
            batch,
            last_tick: Instant::now(),
            stamps: Stamps::default(),
            ctx,
        }
    }

    /// Runs every slot until the budget or the clock says stop.
    pub fn run(mut self) -> io::Result<()> {
        let now = Instant::now();
        for index in 0..self.slots.len() {
            self.start_attempt(index, now)?;
        }
        let mut completions = Vec::with_capacity(self.slots.len() * 2);
        self.last_tick = now;
        loop {
            self.wait(self.batch.as_ref().map_or(1, WaitTarget::get))?;
            completions.clear();
            completions.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            if let Some(batch) = &mut self.batch {
                batch.saw(completions.len());
            }
            let now = Instant::now();
            for &(user_data, result, flags) in &completions {
                self.complete(user_data, result, flags, now)?;
            }
            if self.is_over(now) {
                break;
            }
            if now >= self.last_tick + TICK {
                self.tick(now)?;
            }
        }
        self.drain();
        Ok(())
    }

    fn is_over(&self, now: Instant) -> bool {
        let shared = &self.ctx.shared;
        shared.end.is_some_and(|end| now >= end)
            || shared.abandon_due(now)
            || self.slots.iter().all(|s| s.finished && s.pending == 0)
    }

    /// Submits what is queued and waits for `completions`, or the tick.
    fn wait(&mut self, completions: usize) -> io::Result<()> {
        let ts = types::Timespec::from(TICK);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(completions, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer an entry points at (the prepared requests, the slots'
            // inboxes, the target address) outlives the operation: `drain` waits for all of
            // them before the driver is dropped.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    /// Begins the slot's next request, or marks the slot finished when the budget is spent.
    fn start_attempt(&mut self, index: usize, now: Instant) -> io::Result<()> {
        if self.ctx.shared.take_budget(1) == 0 {
            self.slots[index].finished = true;
            if let Some(batch) = &mut self.batch {
                batch.budget_spent();
            }
            return Ok(());
        }
        self.ctx.ledger.begin(1);
        let request = self.plain.pick();
        let slot = &mut self.slots[index];
        slot.began = Some(now);
        slot.progress = Progress::default();
        if slot.socket.is_some() {
            return self.push_exchange(index, request, false, now);
        }
        self.options.source = self.ctx.shared.next_source();
        match new_socket(&self.options).and_then(|socket| self.register(index, socket)) {
            Ok(socket) => {
                let slot = &mut self.slots[index];
                slot.socket = Some(socket);
                slot.open = Some(self.ctx.ledger.opened());
                slot.inbox.clear();
                slot.connect_began = Some(now);
                self.push_exchange(index, request, true, now)
            }
            Err(e) => {
                // Nothing is in flight, so no completion will move the slot on: the tick
                // restarts it after the pause.
                self.fail(index, ErrorKind::from_connect(&e), now);
                self.slots[index].resume_at = Some(now + STARVED_PAUSE);
                Ok(())
            }
        }
    }

    fn register(&mut self, index: usize, socket: Socket) -> io::Result<Socket> {
        if self.buffers.is_some() && stamps::sampled(index) {
            Stamps::enable(&socket)?;
        }
        if self.fixed {
            let fd = [socket.as_raw_fd()];
            self.ring
                .submitter()
                .register_files_update(index as u32, &fd)?;
        }
        Ok(socket)
    }

    /// Queues connect (if new), the request and a receive, linked in order.
    fn push_exchange(
        &mut self,
        index: usize,
        request: usize,
        connect: bool,
        now: Instant,
    ) -> io::Result<()> {
        // With a multishot receive standing on the connection the exchange needs none.
        let spare = match self.buffers {
            Some(_) => None,
            None => match spare_of(&mut self.slots[index].inbox) {
                Ok(spare) => Some(spare),
                Err(kind) => {
                    self.fail(index, kind, now);
                    return Ok(());
                }
            },
        };
        let request = self.plain.request(request);
        let entries = self.exchange_entries(index, request, connect, spare);
        // The send reports only if it fails, and is not counted as pending.
        self.slots[index].pending += u32::from(connect) + u32::from(spare.is_some());
        self.ctx.ledger.wrote(request.len());
        for entry in entries.iter().flatten() {
            self.push(entry)?;
        }
        Ok(())
    }

    /// One exchange's entries: the connect (if new), the send, and a receive into `spare`
    /// (if given), linked in that order.
    fn exchange_entries(
        &self,
        index: usize,
        request: &[u8],
        connect: bool,
        spare: Option<(*mut u8, u32)>,
    ) -> [Option<squeue::Entry>; 3] {
        let slot = &self.slots[index];
        let generation = slot.generation;
        let addr = &self.addr;
        with_fd!(self.fixed, index, slot.socket, |fd| {
            let connect = connect.then(|| {
                opcode::Connect::new(fd, addr.as_ptr().cast(), addr.len())
                    .build()
                    .flags(squeue::Flags::IO_LINK)
                    .user_data(user_data(index, generation, Op::Connect))
            });
            // MSG_WAITALL: the kernel retries a short send itself, so a send that completes
            // sent everything and its completion can be skipped; only failures report.
            // A link flag on the last entry would leave the chain open: the kernel then
            // runs the whole chain from a worker thread, where a connect does not wait.
            let link = match spare {
                Some(_) => squeue::Flags::IO_LINK,
                None => squeue::Flags::empty(),
            };
            let send = opcode::Send::new(fd, request.as_ptr(), request.len() as u32)
                .flags(libc::MSG_WAITALL)
                .build()
                .flags(link | squeue::Flags::SKIP_SUCCESS)
                .user_data(user_data(index, generation, Op::Send));
            // The answer cannot be there before the request left: wait for it without the
            // receive attempt that would fail first.
            let recv = spare.map(|(buf, len)| {
                opcode::Recv::new(fd, buf, len)
                    .ioprio(RECVSEND_POLL_FIRST)
                    .build()
                    .user_data(user_data(index, generation, Op::Recv))
            });
            [connect, Some(send), recv]
        })
    }

    /// Queues a receive for more of the answer in hand.
    fn push_recv(&mut self, index: usize, now: Instant) -> io::Result<()> {
        let slot = &mut self.slots[index];
        let generation = slot.generation;
        match spare_of(&mut slot.inbox) {
            Ok((buf, len)) => {
                let entry = with_fd!(self.fixed, index, slot.socket, |fd| {
                    opcode::Recv::new(fd, buf, len).build().user_data(user_data(
                        index,
                        generation,
                        Op::Recv,
                    ))
                });
                slot.pending += 1;
                self.push(&entry)
            }
            Err(kind) => {
                self.fail(index, kind, now);
                self.settle(index, now)
            }
        }
    }

    /// Stands a multishot receive on the slot's connection.
    fn arm(&mut self, index: usize) -> io::Result<()> {
        let Some(buffers) = &self.buffers else {
            return Ok(());
        };
        let generation = self.slots[index].generation;
        let fd = types::Fixed(index as u32);
        let entry = if stamps::sampled(index) {
            self.stamps.receive(fd, buffers.group())
        } else {
            opcode::RecvMulti::new(fd, buffers.group()).build()
        };
        let entry = entry.user_data(user_data(index, generation, Op::Recv));
        self.slots[index].armed = true;
        self.push(&entry)
    }

    fn complete(
        &mut self,
        user_data: u64,
        result: i32,
        flags: u32,
        now: Instant,
    ) -> io::Result<()> {
        let (index, generation, op) = decode(user_data);
        if op == Op::Close {
            return Ok(());
        }
        if generation != self.slots[index].generation {
            // About a connection already closed (a failed send reporting late): only its
            // buffer matters.
            self.recycle(flags);
            return Ok(());
        }
        if op == Op::Recv && self.buffers.is_some() {
            return self.complete_multishot(index, result, flags, now);
        }
        let slot = &mut self.slots[index];
        if op != Op::Send {
            slot.pending -= 1;
        }
        if slot.draining {
            return self.settle(index, now);
        }
        if result == -libc::ECANCELED {
            // A link broken by an earlier failure, already counted.
            return self.settle(index, now);
        }
        match op {
            Op::Connect => self.connected(index, result, now),
            Op::Send => self.sent(index, result, now),
            Op::Recv => self.received(index, result, now),
            Op::Close => {}
        }
        self.settle(index, now)
    }

    /// A multishot receive reported: bytes (in a provided buffer, copied out and given back
    /// at once), the connection's end, or its own end (no `MORE`; re-armed by `settle`).
    fn complete_multishot(
        &mut self,
        index: usize,
        result: i32,
        flags: u32,
        now: Instant,
    ) -> io::Result<()> {
        if !io_uring::cqueue::more(flags) {
            self.slots[index].armed = false;
        }
        let mut chunk = std::mem::take(&mut self.scratch);
        chunk.clear();
        let mut result = result;
        if let (Some(buffers), Some(bid)) =
            (&mut self.buffers, io_uring::cqueue::buffer_select(flags))
        {
            let bytes = buffers.bytes(bid, result.max(0) as usize);
            if !stamps::sampled(index) {
                chunk.extend_from_slice(bytes);
            } else if let Some((payload, arrived)) = self.stamps.unpack(bytes) {
                chunk.extend_from_slice(payload);
                // A recvmsg result counts its header too: the payload's length is the read's,
                // and an empty payload is the connection's end.
                result = payload.len() as i32;
                if let Some(arrived) = arrived.filter(|_| result > 0) {
                    self.ctx.ledger.noticed(stamps::waited_since(arrived));
                }
            } else {
                result = -libc::EBADMSG;
            }
            buffers.recycle(bid);
        }
        let slot = &self.slots[index];
        let in_hand = slot.began.is_some();
        if !slot.draining && result != -libc::ECANCELED && result != -libc::ENOBUFS {
            match (result, in_hand) {
                (r, _) if r > 0 => self.absorb(index, &chunk, now),
                (_, true) => self.received(index, result, now),
                // The server let an idle connection go: the next attempt opens another.
                (_, false) if !self.slots[index].armed => self.close_socket(index),
                _ => {}
            }
        }
        self.scratch = chunk;
        self.settle(index, now)
    }

    /// Gives back the provided buffer a completion carries, if any.
    fn recycle(&mut self, flags: u32) {
        if let (Some(buffers), Some(bid)) =
            (&mut self.buffers, io_uring::cqueue::buffer_select(flags))
        {
            buffers.recycle(bid);
        }
    }

    /// Takes bytes of a multishot receive into the inbox, answering as they complete.
    fn absorb(&mut self, index: usize, mut bytes: &[u8], now: Instant) {
        self.ctx.ledger.read(bytes.len());
        let head_request = self.plain.head_request();
        while !bytes.is_empty() {
            let slot = &mut self.slots[index];
            let spare = match slot.inbox.spare(None) {
                Ok(spare) => spare,
                Err(kind) if slot.began.is_some() => return self.fail(index, kind, now),
                // Unasked-for bytes past the limit: no answer to pin them on.
                Err(_) => return self.drop_connection(index),
            };
            let n = spare.len().min(bytes.len());
            spare[..n].copy_from_slice(&bytes[..n]);
            slot.inbox.filled(n);
            bytes = &bytes[n..];
            if slot.began.is_none() {
                continue;
            }
            slot.progress.first_byte.get_or_insert(now);
            match slot
                .inbox
                .advance(&mut slot.progress, head_request, &mut discard)
            {
                Ok(Some(answer)) => self.answered(index, &answer, now),
                Ok(None) => {}
                Err(kind) => return self.fail(index, kind, now),
            }
        }
    }

    /// Gives the connection up: closed at once if the kernel holds none of its operations,
    /// else shut down and closed when they are back.
    fn drop_connection(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        if slot.pending > 0 || slot.armed {
            slot.draining = true;
            if let Some(socket) = &slot.socket {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
        } else {
            self.close_socket(index);
        }
    }

    fn connected(&mut self, index: usize, result: i32, now: Instant) {
        if result < 0 {
            let err = io::Error::from_raw_os_error(-result);
            return self.fail(index, ErrorKind::from_connect(&err), now);
        }
        let began = self.slots[index].connect_began.unwrap_or(now);
        self.ctx.ledger.connected(now - began);
    }

    /// A send reports only when it failed (a short count means the connection broke).
    fn sent(&mut self, index: usize, result: i32, now: Instant) {
        let kind = match result {
            r if r < 0 => ErrorKind::from_io(&io::Error::from_raw_os_error(-r)),
            _ => ErrorKind::Reset,
        };
        self.fail(index, kind, now);
    }

    fn received(&mut self, index: usize, result: i32, now: Instant) {
        if result < 0 {
            let err = io::Error::from_raw_os_error(-result);
            return self.fail(index, ErrorKind::from_io(&err), now);
        }
        let head_request = self.plain.head_request();
        let slot = &mut self.slots[index];
        slot.progress.first_byte.get_or_insert(now);
        if result == 0 {
            return match slot.progress.ended_by_close() {
                Some(answer) => self.answered(index, &answer, now),
                None => self.fail(index, ErrorKind::Closed, now),
            };
        }
        self.ctx.ledger.read(result as usize);
        slot.inbox.filled(result as usize);
        match slot
            .inbox
            .advance(&mut slot.progress, head_request, &mut discard)
        {
            Ok(Some(answer)) => self.answered(index, &answer, now),
            Ok(None) => {}
            Err(kind) => self.fail(index, kind, now),
        }
    }

    fn answered(&mut self, index: usize, answer: &Answer, now: Instant) {
        let slot = &mut self.slots[index];
        let began = slot.began.take().unwrap_or(now);
        self.ctx.ledger.answered(None, began, answer, now);
        self.ctx.ledger.end(1, Ok(()));
        if !self.plain.keep_alive() || answer.close {
            self.drop_connection(index);
        }
    }

    /// Ends the attempt with an error; operations still in flight are cut short.
    fn fail(&mut self, index: usize, kind: ErrorKind, now: Instant) {
        self.ctx.ledger.end(1, Err(kind));
        let slot = &mut self.slots[index];
        slot.began = None;
        if kind.invalidates_run() {
            slot.resume_at = Some(now + STARVED_PAUSE);
        }
        self.drop_connection(index);
    }

    /// After a completion: moves the slot on once the kernel holds none of its operations.
    fn settle(&mut self, index: usize, now: Instant) -> io::Result<()> {
        let slot = &mut self.slots[index];
        if slot.pending > 0 {
            return Ok(());
        }
        if slot.draining {
            if slot.armed {
                return Ok(());
            }
            slot.draining = false;
            self.close_socket(index);
        }
        let slot = &self.slots[index];
        if self.buffers.is_some() && slot.socket.is_some() && !slot.armed {
            self.arm(index)?;
        }
        let slot = &mut self.slots[index];
        if slot.began.is_some() {
            return match self.buffers {
                Some(_) => Ok(()),
                None => self.push_recv(index, now),
            };
        }
        if slot.resume_at.is_some_and(|at| now < at) || slot.finished {
            return Ok(());
        }
        slot.resume_at = None;
        self.start_attempt(index, now)
    }

    fn close_socket(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        slot.inbox.clear();
        let Some(socket) = slot.socket.take() else {
            return;
        };
        slot.generation = slot.generation.wrapping_add(1);
        slot.open = None;
        if self.fixed {
            // Out of the table, then closed here: rare with kept-alive connections.
            let _ = self
                .ring
                .submitter()
                .register_files_update(index as u32, &[-1]);
            drop(socket);
            return;
        }
        let fd: RawFd = socket.into_raw_fd();
        let close = opcode::Close::new(types::Fd(fd))
            .build()
            .user_data(user_data(index, 0, Op::Close));
        if self.push(&close).is_err() {
            // SAFETY: the descriptor came from `into_raw_fd` and is closed once, here.
            unsafe { libc::close(fd) };
        }
    }

    /// Times out overdue attempts and restarts slots whose pause is over.
    fn tick(&mut self, now: Instant) -> io::Result<()> {
        let mut in_flight = 0;
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            in_flight += usize::from(slot.began.is_some());
            let overdue = !slot.draining
                && slot
                    .began
                    .is_some_and(|began| now.duration_since(began) > self.timeout);
            if overdue {
                self.fail(index, ErrorKind::Timeout, now);
            }
            let slot = &self.slots[index];
            if slot.pending == 0 && slot.began.is_none() && slot.resume_at.is_some() {
                self.settle(index, now)?;
            }
        }
        if let Some(batch) = &mut self.batch {
            batch.retarget(now - self.last_tick, in_flight);
        }
        self.last_tick = now;
        Ok(())
    }

    /// Cuts every connection short and waits for the kernel to give back every buffer.
    fn drain(&mut self) {
        for slot in &self.slots {
            if let Some(socket) = &slot.socket {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
        }
        let limit = Instant::now() + DRAIN_LIMIT;
        let busy = |s: &Slot| s.pending > 0 || s.armed;
        while self.slots.iter().any(busy) && Instant::now() < limit {
            if self.wait(1).is_err() {
                break;
            }
            let done: Vec<(u64, u32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.flags()))
                .collect();
            for (user_data, flags) in done {
                let (index, _, op) = decode(user_data);
                let slot = &mut self.slots[index];
                match op {
                    Op::Recv if self.buffers.is_some() => {
                        slot.armed &= io_uring::cqueue::more(flags);
                    }
                    Op::Connect | Op::Recv => slot.pending -= 1,
                    Op::Send | Op::Close => {}
                }
            }
        }
        if let Some(buffers) = &self.buffers {
            buffers.unregister(&self.ring);
        }
        if self.slots.iter().any(busy) {
            // The kernel still holds buffers of these slots: leak them rather than free
            // memory it may write to.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
        for slot in &mut self.slots {
            slot.socket = None;
            slot.open = None;
        }
    }
}

/// Where the next receive may write: the inbox's free space.
fn spare_of(inbox: &mut Inbox) -> Result<(*mut u8, u32), ErrorKind> {
    let spare = inbox.spare(None)?;
    Ok((spare.as_mut_ptr(), spare.len() as u32))
}
