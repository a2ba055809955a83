//! serverlab-load: the load engine of serverlab. `run` takes a validated plan, drives the
//! load on one event loop per worker thread, reports each interval through a callback, and
//! returns the summary.

mod behaviour;
pub mod check;
pub mod cli;
mod client;
mod conn;
pub mod emits;
pub mod http;
mod inbox;
mod ledger;
pub mod pacer;
mod paths;
pub mod plan;
pub mod report;
mod shared;
pub mod stats;
pub mod system;
pub mod target;
mod uring;
mod worker;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

pub use plan::{Plan, PlanError, ValidPlan};
pub use report::{EmitLine, IntervalLine, Summary};

use pacer::RateCurve;
use plan::Stop;
use report::SummaryInput;
use shared::Shared;
use stats::{Histograms, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start worker thread: {0}")]
    Worker(std::io::Error),
    #[error("a worker thread panicked")]
    WorkerPanic,
}

/// How long workers may finish what they hold after a stop request before it is dropped.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// How often the coordinator looks at the stop flag while it waits.
const STOP_POLL: Duration = Duration::from_millis(20);

/// What a run produced: its emit records (push behaviours) and its summary.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub emits: Vec<EmitLine>,
    pub summary: Summary,
}

/// Runs a plan, discarding interval lines.
pub fn run(plan: ValidPlan) -> Result<Outcome, RunError> {
    run_with(plan, &AtomicBool::new(false), |_| {})
}

/// Runs a plan, handing each interval line to `on_interval` as it is due. Setting
/// `stop_requested` (a signal handler does) ends the run early: no new work starts, work in
/// hand gets `STOP_GRACE` to finish, and the summary says `stopped_early`.
pub fn run_with(
    plan: ValidPlan,
    stop_requested: &AtomicBool,
    mut on_interval: impl FnMut(&IntervalLine),
) -> Result<Outcome, RunError> {
    let mut invalid = system::raise_fd_limit(needed_descriptors(&plan));
    let cpu_before = system::cpu_times();
    let interval = Duration::from_millis(plan.plan.interval_ms);
    let shared = Arc::new(Shared::new(plan, Instant::now()));
    let (done_tx, done_rx) = mpsc::channel();
    let mut handles = Vec::new();
    for index in 0..shared.plan.threads {
        let shared = shared.clone();
        let done = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-{index}"))
            .spawn(move || {
                let result = worker::run_worker(index, shared);
                let _ = done.send(());
                result
            })
            .map_err(RunError::Worker)?;
        handles.push(handle);
    }
    drop(done_tx);
    let mut prev = Snapshot::default();
    let mut last_tick = shared.start;
    let mut finished = 0;
    let mut last_done = shared.start;
    let mut stopped_early = false;
    while finished < handles.len() {
        if !stopped_early && stop_requested.load(Relaxed) {
            stopped_early = true;
            shared.stop_early(Instant::now() + STOP_GRACE);
        }
        let due = last_tick + interval;
        let wait = due.saturating_duration_since(Instant::now()).min(STOP_POLL);
        match done_rx.recv_timeout(wait) {
            Ok(()) => {
                finished += 1;
                last_done = Instant::now();
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < due => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Snapshot::sum(shared.counters.iter().map(|c| &**c));
                let elapsed = due - shared.start;
                on_interval(&IntervalLine::between(
                    &prev,
                    &now,
                    elapsed.as_secs_f64(),
                    (due - last_tick).as_secs_f64(),
                ));
                prev = now;
                last_tick = due;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    shared.stopping.store(true, Relaxed);
    let mut histograms = Histograms::default();
    let mut emits = emits::EmitLog::default();
    let mut io = Vec::new();
    for handle in handles {
        let worker = handle.join().map_err(|_| RunError::WorkerPanic)?;
        let worker = worker.map_err(RunError::Worker)?;
        histograms.merge(&worker.histograms);
        emits.merge(worker.emits);
        if !io.contains(&worker.io.name()) {
            io.push(worker.io.name());
        }
    }
    let cpu_after = system::cpu_times();
    let snapshot = Snapshot::sum(shared.counters.iter().map(|c| &**c));
    let duration = match shared.end {
        Some(end) => end.min(last_done) - shared.start,
        None => last_done - shared.start,
    };
    invalid.extend(exhaustion_reasons(&snapshot));
    let summary = Summary::build(SummaryInput {
        snapshot: &snapshot,
        histograms: &histograms,
        duration_s: duration.as_secs_f64(),
        intended_rate: intended_rate(&shared.plan, duration.as_secs_f64()),
        cpu: (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1),
        invalid_reasons: invalid,
        stopped_early,
        paths: shared.plan.paths.len().max(1),
        plan: &shared.plan.plan,
        threads: shared.plan.threads,
        io_backend: io.join("+"),
    });
    Ok(Outcome {
        emits: emits.into_lines(),
        summary,
    })
}

/// Descriptors the plan may hold at once, plus room for the runtime itself.
fn needed_descriptors(plan: &ValidPlan) -> u64 {
    let slots = plan.plan.concurrency().unwrap_or(plan.plan.connections);
    slots + 64 + 4 * plan.threads as u64
}

fn exhaustion_reasons(s: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let ports = s.error_count(stats::ErrorKind::PortsExhausted);
    if ports > 0 {
        out.push(format!(
            "{ports} connects found no free local port (EADDRNOTAVAIL): spread sources with --source 127.0.0.2-127.0.0.250"
        ));
    }
    let fds = s.error_count(stats::ErrorKind::FdsExhausted);
    if fds > 0 {
        out.push(format!(
            "{fds} connects found no free file descriptor (EMFILE/ENFILE): raise the hard RLIMIT_NOFILE"
        ));
    }
    out
}

/// The open-loop schedule's rate over the run (null for closed pacing).
fn intended_rate(plan: &ValidPlan, duration_s: f64) -> Option<f64> {
    let curve = RateCurve::of(&plan.plan.pacer)?;
    // Requests per second: each arrival of a new-connection open loop makes `calls`.
    let scheduled = curve.arrivals_by(duration_s) * plan.plan.calls_per_arrival() as f64;
    let scheduled = match plan.stop {
        Stop::Requests(n) => scheduled.min(n as f64),
        Stop::Duration(_) => scheduled,
    };
    Some(scheduled / duration_s.max(1e-9))
}
