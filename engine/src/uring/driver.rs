//! The ring-facing half of the io_uring loop: it owns the ring, the sockets and the provided
//! buffers, routes each completion to its slot's state machine (`slot.rs`) and submits what
//! the slot returns. What comes next for a slot is decided there, never here; this file builds
//! submission entries, opens and closes sockets, enters figures in the ledger and waits.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, EnterFlags, IoUring};
use socket2::{SockAddr, Socket};

use super::bufring::BufRing;
use super::notice::Notice;
use super::slot::{Arrival, Ended, Exchange, Next, Rules, Slot, Spare};
use super::tag::{decode, user_data, Op};
use super::wait_target::WaitTarget;
use crate::conn::{new_socket, ConnOptions};
use crate::ledger::OpenConnection;
use crate::plain::Plain;
use crate::shared::WorkerCtx;
use crate::spin::Budget;
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

/// Runs `$body` with `$fd` bound to the slot's descriptor: its place in the ring's file
/// table when sockets are registered there (no file lookup per operation), else the raw fd.
macro_rules! with_fd {
    ($fixed:expr, $index:expr, $conn:expr, |$fd:ident| $body:expr) => {
        if $fixed {
            let $fd = types::Fixed($index as u32);
            $body
        } else {
            let $fd = types::Fd($conn.as_ref().map_or(-1, |c| c.socket.as_raw_fd()));
            $body
        }
    };
}

/// The spinning wait on the ring (`--wait spin` with `--io io_uring`): before it sleeps, the
/// loop polls the ring without sleeping until a completion is there or the budget (the epoll
/// spinner's, `spin::Budget`) is spent.
struct Spinner {
    budget: Budget,
    /// The time of polls that found nothing: the CPU spent spinning (`spin_cpu_s`).
    spun: Rc<Cell<Duration>>,
}

/// A slot's connection: its socket and its place in the open-connections gauge.
struct Conn {
    socket: Socket,
    _open: OpenConnection,
}

pub struct Driver<'a> {
    ring: IoUring,
    ctx: Rc<WorkerCtx>,
    plain: &'a Plain,
    addr: SockAddr,
    rules: Rules,
    slots: Vec<Slot>,
    /// Each slot's connection, if it has one (the slot's state says when to open or close).
    conns: Vec<Option<Conn>>,
    options: ConnOptions,
    /// Sockets are registered in the ring's file table (kept-alive connections, where a
    /// registration is rare); a connection per request uses raw descriptors instead.
    fixed: bool,
    /// Kept-alive connections: one multishot receive per connection, filling buffers from
    /// this ring, instead of a receive armed after every send.
    buffers: Option<BufRing>,
    /// Kept-alive connections: how many completions a wait asks for (see `wait_target`).
    batch: Option<WaitTarget>,
    /// When `tick` last ran; the next is due `TICK` later.
    last_tick: Instant,
    /// Sampled kept-alive connections receive with the kernel's timestamps.
    stamps: Stamps,
    /// A latency-bound plan without multishot receives: the first receive of each answer
    /// carries the kernel's timestamp.
    notice: Option<Notice>,
    /// Spinning before each sleep, when the plan asks for it.
    spinner: Option<Spinner>,
}

impl<'a> Driver<'a> {
    /// A driver for `slots` slots; with `spun`, it spins before each sleep and adds the time
    /// its polls found nothing to it.
    pub fn new(
        ring: IoUring,
        ctx: Rc<WorkerCtx>,
        plain: &'a Plain,
        slots: usize,
        spun: Option<Rc<Cell<Duration>>>,
    ) -> Driver<'a> {
        let no_delay = plain.keep_alive();
        let fixed =
            plain.keep_alive() && ring.submitter().register_files_sparse(slots as u32).is_ok();
        let count = (slots * 2).next_power_of_two().clamp(16, MAX_BUFFERS) as u16;
        let buffers = fixed
            .then(|| BufRing::register(&ring, count, BUFFER_SIZE, 0).ok())
            .flatten();
        let addr: SocketAddr = ctx.shared.addr;
        let buffers_none = buffers.is_none();
        let rules = Rules {
            keep_alive: plain.keep_alive(),
            head_request: plain.head_request(),
            multishot: buffers.is_some(),
            timeout: plain.timeout(),
            await_close: plain.await_close(),
        };
        Driver {
            ring,
            plain,
            addr: addr.into(),
            rules,
            slots: (0..slots).map(|_| Slot::default()).collect(),
            conns: (0..slots).map(|_| None).collect(),
            options: ConnOptions {
                source: None,
                recv_buffer: None,
                no_delay,
            },
            fixed,
            batch: buffers.is_some().then(WaitTarget::default),
            buffers,
            last_tick: Instant::now(),
            stamps: Stamps::default(),
            notice: (buffers_none && ctx.shared.plan.plan.stamps_arrivals())
                .then(|| Notice::new(slots)),
            spinner: spun.map(|spun| Spinner {
                budget: Budget::default(),
                spun,
            }),
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
                self.cut_connects(now);
                break;
            }
            if now >= self.last_tick + TICK {
                self.tick(now)?;
            }
        }
        self.drain();
        Ok(())
    }

    /// The connects still waiting as the run ends, counted as the ledger says.
    fn cut_connects(&self, now: Instant) {
        for slot in &self.slots {
            if let Some(began) = slot.connect_pending_since() {
                self.ctx.ledger.stage_cut(ErrorKind::Timeout, began, now);
            }
        }
    }

    fn is_over(&self, now: Instant) -> bool {
        let shared = &self.ctx.shared;
        shared.end().is_some_and(|end| now >= end)
            || shared.abandon_due(now)
            || self.slots.iter().all(Slot::is_done)
    }

    /// Submits what is queued and waits for `completions`, or the tick (spinning first,
    /// when the plan spins).
    fn wait(&mut self, completions: usize) -> io::Result<()> {
        if self.spin()? {
            return Ok(());
        }
        let ts = types::Timespec::from(TICK);
        let args = types::SubmitArgs::new().timespec(&ts);
        waited(self.ring.submitter().submit_with_args(completions, &args))
    }

    /// Polls the ring without sleeping until a completion is there, or the budget is spent;
    /// whether one came. Each poll submits what is queued and runs the kernel's deferred
    /// completions, asking for none. A wait for one with a zero timeout is no poll: on Linux
    /// 6.18 a sequential run of 300 requests waited that way spun not once in 6 runs of 17
    /// (each wait came back holding its answer), likely as the timer sleeps its slack
    /// (50 µs by default), longer than a loopback answer takes.
    fn spin(&mut self) -> io::Result<bool> {
        let Some(spinner) = &mut self.spinner else {
            return Ok(false);
        };
        let since = Instant::now();
        loop {
            let before = Instant::now();
            poll(&mut self.ring)?;
            let after = Instant::now();
            if !self.ring.completion().is_empty() {
                spinner.budget.caught(after - since);
                return Ok(true);
            }
            spinner.spun.set(spinner.spun.get() + (after - before));
            self.ctx.ledger.counters().spun(after - before);
            if after - since >= spinner.budget.now() {
                spinner.budget.missed();
                return Ok(false);
            }
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

    /// Routes a completion to its slot and submits what the slot asks for next.
    fn complete(
        &mut self,
        user_data: u64,
        result: i32,
        flags: u32,
        now: Instant,
    ) -> io::Result<()> {
        let (index, generation, op) = decode(user_data);
        if op == Op::Recv {
            self.noticed(index, generation, result);
        }
        let next = if op == Op::Recv && self.buffers.is_some() {
            self.multishot(index, generation, result, flags, now)
        } else {
            self.slots[index].on_completion(&self.rules, now, generation, op, result)
        };
        self.apply(index, next, now)
    }

    /// A single receive of slot `index` reported: if it was the stamped first receive of an
    /// answer that brought bytes, how long they waited in the kernel.
    fn noticed(&mut self, index: usize, generation: u32, result: i32) {
        let Some(notice) = &mut self.notice else {
            return;
        };
        let arrived = notice.take(index);
        if let Some(arrived) = arrived.filter(|_| result > 0) {
            if generation == self.slots[index].generation() {
                self.ctx.ledger.noticed(stamps::waited_since(arrived));
            }
        }
    }

    /// A multishot receive reported: its bytes (or its end) go to the slot straight from the
    /// provided buffer, which goes back to the kernel at once. A sampled connection's buffer
    /// holds a `recvmsg` result: its payload, and the kernel's stamp of the arrival.
    fn multishot(
        &mut self,
        index: usize,
        generation: u32,
        result: i32,
        flags: u32,
        now: Instant,
    ) -> Next {
        let more = cqueue::more(flags);
        let slot = &mut self.slots[index];
        let (Some(buffers), Some(bid)) = (&mut self.buffers, cqueue::buffer_select(flags)) else {
            return slot.on_multishot(&self.rules, now, generation, more, arrival(result, &[]));
        };
        let bytes = buffers.bytes(bid, result.max(0) as usize);
        let arrival = if !stamps::sampled(index) {
            arrival(result, bytes)
        } else if let Some((payload, arrived)) = self.stamps.unpack(bytes) {
            let current = generation == slot.generation();
            if let Some(arrived) = arrived.filter(|_| current && !payload.is_empty()) {
                self.ctx.ledger.noticed(stamps::waited_since(arrived));
            }
            // A recvmsg result counts its header too: the payload is what was read, and an
            // empty payload is the connection's end.
            arrival(payload.len() as i32, payload)
        } else {
            Arrival::End(-libc::EBADMSG)
        };
        let next = slot.on_multishot(&self.rules, now, generation, more, arrival);
        buffers.recycle(bid);
        next
    }

    /// Does what a slot asked for, in `Next`'s order.
    fn apply(&mut self, index: usize, next: Next, now: Instant) -> io::Result<()> {
        self.record(&next);
        if next.shutdown {
            if let Some(conn) = &self.conns[index] {
                let _ = conn.socket.shutdown(std::net::Shutdown::Both);
            }
        }
        if next.close {
            self.close_socket(index);
        }
        if next.arm {
            self.arm(index)?;
        }
        match (next.send, next.recv) {
            (Some(exchange), recv) => self.push_exchange(index, exchange, recv)?,
            (None, Some(spare)) => self.push_recv(index, spare)?,
            (None, None) => {}
        }
        if next.begin {
            self.start_attempt(index, now)?;
        }
        Ok(())
    }

    /// Enters a slot's figures in the ledger.
    fn record(&self, next: &Next) {
        let ledger = &self.ctx.ledger;
        if let Some(took) = next.connected {
            ledger.connected(took);
        }
        if next.read > 0 {
            ledger.read(next.read);
        }
        match next.ended {
            Some(Ended::Answered {
                began,
                answer,
                done,
            }) => {
                ledger.answered(None, began, &answer, done);
                ledger.end(1, Ok(()));
            }
            Some(Ended::Failed(kind)) => ledger.end(1, Err(kind)),
            None => {}
        }
    }

    /// Begins the slot's next request, or marks the slot finished when the budget is spent.
    fn start_attempt(&mut self, index: usize, now: Instant) -> io::Result<()> {
        if self.ctx.shared.take_budget(1) == 0 {
            self.slots[index].finish();
            if let Some(batch) = &mut self.batch {
                batch.budget_spent();
            }
            return Ok(());
        }
        self.ctx.ledger.begin(1);
        let request = self.plain.pick();
        let next = self.slots[index].begin(&self.rules, now, request, || {
            self.options.source = self.ctx.shared.next_source();
            let stamp = (self.rules.multishot && stamps::sampled(index)) || self.notice.is_some();
            let socket = new_socket(&self.options)
                .and_then(|socket| register(&self.ring, self.fixed, stamp, index, socket))
                .map_err(|e| ErrorKind::from_connect(&e))?;
            let open = self.ctx.ledger.opened();
            self.conns[index] = Some(Conn {
                socket,
                _open: open,
            });
            Ok(())
        });
        self.apply(index, next, now)
    }

    /// Queues connect (if new), the request and a receive (if given), linked in order.
    fn push_exchange(
        &mut self,
        index: usize,
        exchange: Exchange,
        recv: Option<Spare>,
    ) -> io::Result<()> {
        let request = self.plain.request(exchange.request);
        let entries = self.exchange_entries(index, request, exchange.connect, recv);
        self.ctx.ledger.wrote(request.len());
        for entry in entries.iter().flatten() {
            self.push(entry)?;
        }
        Ok(())
    }

    /// One exchange's entries: the connect (if new), the send, and a receive into `spare`
    /// (if given), linked in that order.
    fn exchange_entries(
        &mut self,
        index: usize,
        request: &[u8],
        connect: bool,
        spare: Option<Spare>,
    ) -> [Option<squeue::Entry>; 3] {
        let generation = self.slots[index].generation();
        let stamped = spare
            .zip(self.notice.as_mut())
            .map(|(spare, notice)| notice.prepare(index, spare));
        let addr = &self.addr;
        with_fd!(self.fixed, index, self.conns[index], |fd| {
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
            let recv = spare.map(|spare| {
                match stamped {
                    Some(msghdr) => opcode::RecvMsg::new(fd, msghdr)
                        .ioprio(RECVSEND_POLL_FIRST)
                        .build(),
                    None => opcode::Recv::new(fd, spare.ptr, spare.len)
                        .ioprio(RECVSEND_POLL_FIRST)
                        .build(),
                }
                .user_data(user_data(index, generation, Op::Recv))
            });
            [connect, Some(send), recv]
        })
    }

    /// Queues a receive for more of the answer in hand.
    fn push_recv(&mut self, index: usize, spare: Spare) -> io::Result<()> {
        let generation = self.slots[index].generation();
        let entry = with_fd!(self.fixed, index, self.conns[index], |fd| {
            opcode::Recv::new(fd, spare.ptr, spare.len)
                .build()
                .user_data(user_data(index, generation, Op::Recv))
        });
        self.push(&entry)
    }

    /// Stands a multishot receive on the slot's connection.
    fn arm(&mut self, index: usize) -> io::Result<()> {
        let Some(buffers) = &self.buffers else {
            return Ok(());
        };
        let generation = self.slots[index].generation();
        let fd = types::Fixed(index as u32);
        let entry = if stamps::sampled(index) {
            self.stamps.receive(fd, buffers.group())
        } else {
            opcode::RecvMulti::new(fd, buffers.group()).build()
        };
        let entry = entry.user_data(user_data(index, generation, Op::Recv));
        self.push(&entry)
    }

    fn close_socket(&mut self, index: usize) {
        let Some(conn) = self.conns[index].take() else {
            return;
        };
        if self.fixed {
            // Out of the table, then closed here: rare with kept-alive connections.
            let _ = self
                .ring
                .submitter()
                .register_files_update(index as u32, &[-1]);
            return;
        }
        let fd: RawFd = conn.socket.into_raw_fd();
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
            in_flight += usize::from(self.slots[index].in_attempt());
            let next = self.slots[index].tick(&self.rules, now);
            self.apply(index, next, now)?;
        }
        if let Some(batch) = &mut self.batch {
            batch.retarget(now - self.last_tick, in_flight);
        }
        self.last_tick = now;
        Ok(())
    }

    /// Cuts every connection short and waits for the kernel to give back every buffer.
    fn drain(&mut self) {
        for conn in self.conns.iter().flatten() {
            let _ = conn.socket.shutdown(std::net::Shutdown::Both);
        }
        // The last completions may have queued closes and nothing else: they go to the
        // kernel here, or their descriptors would stay open after the run.
        let _ = self.ring.submit();
        let limit = Instant::now() + DRAIN_LIMIT;
        while self.slots.iter().any(Slot::is_busy) && Instant::now() < limit {
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
                self.slots[index].returned(&self.rules, op, cqueue::more(flags));
            }
        }
        if let Some(buffers) = &self.buffers {
            buffers.unregister(&self.ring);
        }
        if self.slots.iter().any(Slot::is_busy) {
            // The kernel still holds buffers of these slots: leak them rather than free
            // memory it may write to.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
        self.conns.clear();
    }
}

/// Readies a new socket for the ring: the kernel's receive stamps (`stamp`: a sampled
/// kept-alive connection, or any of a latency-bound plan), and its place in the file table
/// when sockets are registered.
fn register(
    ring: &IoUring,
    fixed: bool,
    stamp: bool,
    index: usize,
    socket: Socket,
) -> io::Result<Socket> {
    if stamp {
        Stamps::enable(&socket)?;
    }
    if fixed {
        let fd = [socket.as_raw_fd()];
        ring.submitter().register_files_update(index as u32, &fd)?;
    }
    Ok(socket)
}

/// A receive's result as the slot reads it: `bytes` if any came, else its end.
fn arrival(result: i32, bytes: &[u8]) -> Arrival<'_> {
    match result {
        r if r > 0 => Arrival::Bytes(bytes),
        r => Arrival::End(r),
    }
}

/// One poll of `ring`: an enter that submits its queue and runs its deferred completions,
/// with GETEVENTS (which alone runs them) and no completion to wait for.
fn poll(ring: &mut IoUring) -> io::Result<()> {
    let queued = ring.submission().len() as u32;
    let flags = EnterFlags::GETEVENTS.bits();
    // SAFETY: no argument is passed; the queued entries' buffers live as `push` says.
    let entered = unsafe {
        ring.submitter()
            .enter::<libc::sigset_t>(queued, 0, flags, None)
    };
    waited(entered)
}

/// A wait's result: one that ended by its timeout, a signal or a full completion queue is a
/// wait like another.
fn waited(result: io::Result<usize>) -> io::Result<()> {
    match result {
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
