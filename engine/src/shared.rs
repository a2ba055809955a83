//! What the threads of a run share (the plan, the start and end, the request budget, the
//! early stop, the source addresses) and what the tasks of one worker thread share (its
//! ledger and emit log).

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::emits::EmitLog;
use crate::ledger::Ledger;
use crate::plan::{Stop, ValidPlan};
use crate::stats::Counters;

/// What every worker thread sees.
pub struct Shared {
    pub plan: ValidPlan,
    pub addr: SocketAddr,
    pub start: Instant,
    /// When a duration-bound run stops.
    pub end: Option<Instant>,
    pub counters: Vec<Arc<Counters>>,
    issued: AtomicU64,
    source_cursor: AtomicUsize,
    /// Next syslog message number, unique across workers.
    pub syslog_seq: AtomicU64,
    pub stopping: AtomicBool,
    /// After an early stop: when work still in hand is dropped.
    abandon_at: OnceLock<Instant>,
}

impl Shared {
    pub fn new(plan: ValidPlan, start: Instant) -> Shared {
        let end = match plan.stop {
            Stop::Duration(d) => Some(start + d),
            Stop::Requests(_) => None,
        };
        let counters = (0..plan.threads)
            .map(|_| Arc::new(Counters::default()))
            .collect();
        Shared {
            addr: plan.socket_addr(),
            plan,
            start,
            end,
            counters,
            issued: AtomicU64::new(0),
            source_cursor: AtomicUsize::new(0),
            syslog_seq: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            abandon_at: OnceLock::new(),
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
                if self.end.is_some_and(|end| Instant::now() >= end) {
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
    pub emits: RefCell<EmitLog>,
}

impl WorkerCtx {
    pub fn new(shared: Arc<Shared>, index: usize) -> WorkerCtx {
        WorkerCtx {
            ledger: Ledger::new(shared.counters[index].clone()),
            shared,
            emits: RefCell::default(),
        }
    }
}
