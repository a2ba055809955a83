//! What the threads of a run share (the plan, the start and end, the request budget, the
//! early stop, the source addresses) and what the tasks of one worker thread share (its
//! ledger and emit log). A run starts now, or at the plan's `start_at_ms` on this host's
//! clock: the workers get ready and wait for that instant.

use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::emits::{Delivery, EmitLog};
use crate::ledger::Ledger;
use crate::plan::{Stop, ValidPlan};
use crate::stats::Counters;

/// How often a worker waiting for the start looks at the stop flag.
const START_POLL: Duration = Duration::from_millis(20);
/// How often a worker at the start looks for the workers not there yet (a thread spawn is
/// tens of microseconds on a quiet machine).
const ARRIVAL_POLL: Duration = Duration::from_micros(50);

/// `Shared::end_ns` of a run that time does not end.
const NO_END: u64 = u64::MAX;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NO_END - 1)
}

/// When a run's pacers start, on the monotonic clock and on this host's wall clock.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    pub at: Instant,
    /// How far the plan's `start_at_ms` had passed when the run was set up (0 when it had
    /// not, or the plan gave none), in milliseconds.
    pub late_ms: f64,
    /// One reading of both clocks, to place a monotonic instant on the wall clock.
    origin: (Instant, f64),
}

impl Start {
    /// Now, or `start_at_ms` (Unix ms, this host's clock) if it is still ahead.
    pub fn at_unix_ms(start_at_ms: Option<u64>) -> Start {
        let origin = read_clocks();
        let ahead_ms = start_at_ms.map_or(0.0, |at| at as f64 - origin.1);
        Start {
            at: origin.0 + Duration::from_secs_f64(ahead_ms.max(0.0) / 1000.0),
            late_ms: (-ahead_ms).max(0.0),
            origin,
        }
    }

    /// `instant` on this host's wall clock, in Unix milliseconds.
    pub fn unix_ms(&self, instant: Instant) -> f64 {
        let (origin, wall) = self.origin;
        match instant.checked_duration_since(origin) {
            Some(after) => wall + after.as_secs_f64() * 1000.0,
            None => wall - (origin - instant).as_secs_f64() * 1000.0,
        }
    }
}

/// The monotonic clock now, and the wall clock (Unix ms) at that instant: the middle of two
/// wall readings around it, the closest pair of a few, so that a thread preempted between
/// the readings does not misplace the start by its time off the CPU.
fn read_clocks() -> (Instant, f64) {
    let mut best = (f64::INFINITY, Instant::now(), 0.0);
    for _ in 0..5 {
        let before = crate::system::unix_ms();
        let now = Instant::now();
        let after = crate::system::unix_ms();
        if after - before < best.0 {
            best = (after - before, now, (before + after) / 2.0);
        }
        if best.0 < 0.02 {
            break;
        }
    }
    (best.1, best.2)
}

/// What every worker thread sees.
pub struct Shared {
    pub plan: ValidPlan,
    pub addr: SocketAddr,
    pub start: Instant,
    /// When a duration-bound run stops, in nanoseconds after `start` (`NO_END`: never by
    /// time). A run with a warm-up phase moves it once, as its measured window begins.
    end_ns: AtomicU64,
    pub counters: Vec<Arc<Counters>>,
    /// Each worker's emit records, which the coordinator takes settled cycles from.
    pub emit_logs: Vec<Mutex<EmitLog>>,
    issued: AtomicU64,
    source_cursor: AtomicUsize,
    /// Next syslog message number, unique across workers.
    pub syslog_seq: AtomicU64,
    /// WebSocket publishers taken so far (the run's first clients publish).
    pub publishers: AtomicU64,
    pub stopping: AtomicBool,
    /// Workers at the start (or ended before it). The start waits for all of them: CI once
    /// saw a run of 1,003 requests on 7 connections and 2 threads open 4, because the
    /// second thread was scheduled after the first one's clients had spent the budget.
    arrived: AtomicUsize,
    /// After an early stop: when work still in hand is dropped.
    abandon_at: OnceLock<Instant>,
    /// Whether the workers spin before they sleep (`spin::choose`): on epoll, or on the ring
    /// when the plan asks for io_uring.
    pub spin: bool,
}

impl Shared {
    pub fn new(plan: ValidPlan, start: Instant) -> Shared {
        let first_seq = plan.plan.behaviour.kind().seq_start();
        // Until a warm-up ends, the latest end it may have: its cap, then the duration.
        let warmup = Duration::from_secs_f64(plan.plan.warmup_max_s.unwrap_or(0.0));
        let end_ns = match plan.stop {
            Stop::Duration(d) => nanos(warmup + d),
            Stop::Requests(_) => NO_END,
        };
        let threads = plan.threads;
        let counters = (0..threads)
            .map(|_| Arc::new(Counters::default()))
            .collect();
        Shared {
            addr: plan.socket_addr(),
            plan,
            start,
            end_ns: AtomicU64::new(end_ns),
            counters,
            emit_logs: (0..threads).map(|_| Mutex::default()).collect(),
            issued: AtomicU64::new(0),
            source_cursor: AtomicUsize::new(0),
            syslog_seq: AtomicU64::new(first_seq),
            publishers: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            arrived: AtomicUsize::new(0),
            abandon_at: OnceLock::new(),
            spin: false,
        }
    }

    /// When a duration-bound run stops (None: a counted run).
    pub fn end(&self) -> Option<Instant> {
        match self.end_ns.load(Relaxed) {
            NO_END => None,
            ns => Some(self.start + Duration::from_nanos(ns)),
        }
    }

    /// The measured window begins at `at` (after a warm-up phase): the run stops its
    /// `duration_s` later.
    pub fn measure_from(&self, at: Instant) {
        if let Stop::Duration(d) = self.plan.stop {
            self.end_ns
                .store(nanos(at.saturating_duration_since(self.start) + d), Relaxed);
        }
    }

    /// The same, with the workers spinning before they sleep.
    pub fn spinning(mut self, spin: bool) -> Shared {
        self.spin = spin;
        self
    }

    /// Blocks this worker thread until every worker has arrived and the start has come,
    /// looking at the stop flag meanwhile; returns when it went on. A thread's sleep wakes
    /// within tens of microseconds, closer than the event loop's millisecond timer would.
    fn wait_for_start(&self) -> Instant {
        loop {
            let now = Instant::now();
            if self.stopping.load(Relaxed) {
                return now;
            }
            if self.arrived.load(SeqCst) < self.plan.threads {
                std::thread::sleep(ARRIVAL_POLL);
            } else if now >= self.start {
                return now;
            } else {
                std::thread::sleep((self.start - now).min(START_POLL));
            }
        }
    }

    /// Starts no new work from now on and drops what is in hand at `abandon_at`.
    pub fn stop_early(&self, abandon_at: Instant) {
        self.stopping.store(true, Relaxed);
        let _ = self.abandon_at.set(abandon_at);
    }

    /// Whether an early stop's grace period is over.
    pub fn abandon_due(&self, now: Instant) -> bool {
        self.abandon_at.get().is_some_and(|&at| now >= at)
    }

    /// Resolves when an early stop's grace period is over (never without an early stop).
    pub async fn abandoned(&self) {
        const POLL: Duration = Duration::from_millis(20);
        loop {
            if let Some(&at) = self.abandon_at.get() {
                tokio::time::sleep_until(at.into()).await;
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Grants up to `wanted` more requests; 0 means the run is over.
    pub fn take_budget(&self, wanted: u64) -> u64 {
        if self.stopping.load(Relaxed) {
            return 0;
        }
        match self.plan.stop {
            Stop::Requests(limit) => {
                let before = self.issued.fetch_add(wanted, Relaxed);
                limit.saturating_sub(before).min(wanted)
            }
            Stop::Duration(_) => {
                if self.end().is_some_and(|end| Instant::now() >= end) {
                    0
                } else {
                    wanted
                }
            }
        }
    }

    pub fn next_source(&self) -> Option<Ipv4Addr> {
        let sources = &self.plan.sources;
        if sources.is_empty() {
            return None;
        }
        Some(sources[self.source_cursor.fetch_add(1, Relaxed) % sources.len()])
    }
}

/// What the tasks of one worker thread share.
pub struct WorkerCtx {
    pub shared: Arc<Shared>,
    pub ledger: Ledger,
    /// This worker's index: its counters and emit log in `shared`.
    index: usize,
    /// Whether this worker is counted among the arrived.
    arrived: Cell<bool>,
}

impl WorkerCtx {
    pub fn new(shared: Arc<Shared>, index: usize) -> WorkerCtx {
        WorkerCtx {
            ledger: Ledger::new(
                shared.counters[index].clone(),
                shared.plan.plan.clock_offset_ms,
            ),
            shared,
            index,
            arrived: Cell::new(false),
        }
    }

    /// Blocks this worker's thread until the run's start, which waits for every worker
    /// (no task exists on its loop yet, so this delays nothing).
    pub fn wait_for_start(&self) -> Instant {
        self.arrive();
        self.shared.wait_for_start()
    }

    fn arrive(&self) {
        if !self.arrived.replace(true) {
            self.shared.arrived.fetch_add(1, SeqCst);
        }
    }

    /// This worker's emit log (the coordinator locks it only to take settled cycles).
    pub fn emits(&self) -> MutexGuard<'_, EmitLog> {
        let log = &self.shared.emit_logs[self.index];
        log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn observe_emit(&self, delivery: &Delivery) {
        self.emits().observe(delivery);
    }
}

/// A worker that ends before its start (its loop could not be built) still counts as
/// arrived, so that the others do not wait for it.
impl Drop for WorkerCtx {
    fn drop(&mut self) {
        self.arrive();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use std::sync::mpsc;

    fn two_threads() -> Arc<Shared> {
        let plan = Plan::from_value(serde_json::json!({
            "target": "http://127.0.0.1:1/perf", "requests": 10, "threads": 2}))
        .unwrap()
        .validate()
        .unwrap();
        Arc::new(Shared::new(plan, Instant::now()))
    }

    /// The first worker's start, on a thread of its own: Some once it went on.
    fn first_worker(shared: &Arc<Shared>) -> mpsc::Receiver<Instant> {
        let (tx, rx) = mpsc::channel();
        let shared = shared.clone();
        std::thread::spawn(move || tx.send(WorkerCtx::new(shared, 0).wait_for_start()));
        rx
    }

    #[test]
    fn a_worker_does_not_start_before_the_last_one_arrives() {
        let shared = two_threads();
        let first = first_worker(&shared);
        assert!(
            first.recv_timeout(Duration::from_millis(100)).is_err(),
            "went on alone"
        );
        let arrival = Instant::now();
        WorkerCtx::new(shared, 1).wait_for_start();
        let went = first.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(went >= arrival, "went on before the second worker arrived");
    }

    #[test]
    fn a_worker_that_ends_before_its_start_does_not_hold_the_others() {
        let shared = two_threads();
        let first = first_worker(&shared);
        assert!(first.recv_timeout(Duration::from_millis(100)).is_err());
        drop(WorkerCtx::new(shared, 1));
        first.recv_timeout(Duration::from_secs(5)).unwrap();
    }
}
