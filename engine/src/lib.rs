//! serverlab-load: the load engine of serverlab. `run` takes a validated plan, drives the
//! load on one event loop per worker thread, reports each interval through a callback, and
//! returns the summary; `merge` adds up the outputs of several engines that shared one run.

mod behaviours;
pub mod check;
pub mod cli;
mod client;
mod conn;
pub mod emits;
mod h2frames;
mod h2watch;
mod hdr;
pub mod http;
mod inbox;
mod ledger;
pub mod merge;
pub mod metrics;
mod mux;
pub mod pacer;
mod paths;
mod plain;
pub mod plan;
pub mod report;
mod shared;
mod spin;
mod stamps;
pub mod stats;
mod syslogmsg;
pub mod system;
pub mod target;
mod tls;
mod uring;
mod worker;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

pub use plan::{Plan, PlanError, ValidPlan};
pub use report::{EmitLine, IntervalLine, Summary};

use plan::Stop;
use report::SummaryInput;
use shared::{Shared, Start};
use stats::{Histograms, Snapshot, Window};

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

/// How often the coordinator takes the cycles that have settled out of the workers' logs.
const SETTLE_PASS: Duration = Duration::from_secs(1);

/// What a run produced: its emit records (push behaviours) and its summary.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// From `run` and `run_with`, one line per (event, seq); from `run_streaming`, the
    /// lines of the cycles that had not settled by the end.
    pub emits: Vec<EmitLine>,
    pub summary: Summary,
}

/// Runs a plan, discarding interval lines.
pub fn run(plan: ValidPlan) -> Result<Outcome, RunError> {
    run_with(plan, &AtomicBool::new(false), |_| {})
}

/// Runs a plan, handing each interval line to `on_interval` as it is due. Setting
/// `stop_requested` (a signal handler does) ends the run early: no new work starts, work in
/// hand gets `STOP_GRACE` to finish, and the summary says `stopped_early`. The emit lines
/// come back in the outcome, each cycle's lines added up into one.
pub fn run_with(
    plan: ValidPlan,
    stop_requested: &AtomicBool,
    on_interval: impl FnMut(&IntervalLine),
) -> Result<Outcome, RunError> {
    let mut settled = Vec::new();
    let mut outcome = run_streaming(plan, stop_requested, on_interval, |line| {
        settled.push(line.clone())
    })?;
    settled.append(&mut outcome.emits);
    let log = emits::EmitLog::from_lines(settled).expect("the engine's own lines read back");
    outcome.emits = log.into_lines();
    Ok(outcome)
}

/// Runs a plan as `run_with` does, and hands each emit cycle that has settled (no delivery
/// of it for a while, `emits::take_settled`) to `on_emit` during the run, so that a run of
/// any length holds only its recent cycles. A delivery that comes after its cycle's line
/// makes a further line for the same (event, seq): a reader adds them up.
pub fn run_streaming(
    plan: ValidPlan,
    stop_requested: &AtomicBool,
    on_interval: impl FnMut(&IntervalLine),
    on_emit: impl FnMut(&EmitLine),
) -> Result<Outcome, RunError> {
    let mut invalid = system::raise_fd_limit(needed_descriptors(&plan));
    // Before the start: the choice may watch the CPUs for a moment.
    let wait = spin::choose(&plan.plan, plan.threads);
    let cpu_before = system::cpu_times();
    let start = Start::at_unix_ms(plan.plan.start_at_ms);
    let shared = Arc::new(Shared::new(plan, start.at).spinning(wait.spin));
    let (handles, done) = spawn_workers(&shared)?;
    let callbacks = Callbacks {
        on_interval,
        on_emit,
    };
    let watched = watch(&shared, handles.len(), &done, stop_requested, callbacks);
    shared.stopping.store(true, Relaxed);
    let joined = join_workers(handles)?;
    let cpu_after = system::cpu_times();
    let snapshot = Snapshot::sum(shared.counters.iter().map(|c| &**c));
    let duration = match shared.end {
        Some(end) => end.min(watched.last_done) - shared.start,
        None => watched.last_done - shared.start,
    };
    invalid.extend(exhaustion_reasons(&snapshot));
    let summary = Summary::build(SummaryInput {
        snapshot: &snapshot,
        histograms: &joined.histograms,
        duration_s: duration.as_secs_f64(),
        intended_rate: intended_rate(&shared.plan, duration.as_secs_f64()),
        cpu: (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1),
        invalid_reasons: invalid,
        stopped_early: watched.stopped_early,
        started_at_ms: start.unix_ms(joined.started.unwrap_or(start.at)),
        start_late_ms: start.late_ms,
        paths: shared.plan.paths.len().max(1),
        plan: &shared.plan.plan,
        threads: shared.plan.threads,
        io_backend: joined.io.join("+"),
        wait: report::WaitUsed {
            spin: wait.spin,
            reason: wait.reason,
            spin_cpu_s: joined.spun.as_secs_f64(),
        },
    });
    Ok(Outcome {
        emits: joined.emits.into_lines(),
        summary,
    })
}

type WorkerHandle = std::thread::JoinHandle<std::io::Result<worker::WorkerResults>>;

/// One thread per worker; each says on the returned channel when it is done.
fn spawn_workers(
    shared: &Arc<Shared>,
) -> Result<(Vec<WorkerHandle>, mpsc::Receiver<()>), RunError> {
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
    Ok((handles, done_rx))
}

/// How the run went while the coordinator watched it.
struct Watched {
    stopped_early: bool,
    /// When the last worker finished.
    last_done: Instant,
}

/// Where the coordinator hands the lines it makes during the run.
struct Callbacks<I, E> {
    on_interval: I,
    on_emit: E,
}

/// Watches the run until every worker is done: an interval line each time one is due, the
/// settled emit cycles each `SETTLE_PASS`, and an early stop passed on to the workers when
/// one is requested.
fn watch<I: FnMut(&IntervalLine), E: FnMut(&EmitLine)>(
    shared: &Shared,
    workers: usize,
    done: &mpsc::Receiver<()>,
    stop_requested: &AtomicBool,
    mut callbacks: Callbacks<I, E>,
) -> Watched {
    let on_interval = &mut callbacks.on_interval;
    let mut next_settle = Instant::now() + SETTLE_PASS;
    let interval = Duration::from_millis(shared.plan.plan.interval_ms);
    let mut prev = Snapshot::default();
    // The workers' windows, drained into one at each interval's end (made once, reset each
    // time).
    let mut window = Window::default();
    let mut last_tick = shared.start;
    let mut finished = 0;
    let mut watched = Watched {
        stopped_early: false,
        last_done: shared.start,
    };
    while finished < workers {
        if !watched.stopped_early && stop_requested.load(Relaxed) {
            watched.stopped_early = true;
            shared.stop_early(Instant::now() + STOP_GRACE);
        }
        if Instant::now() >= next_settle {
            next_settle += SETTLE_PASS;
            let settled = emits::take_settled(&shared.emit_logs, Instant::now());
            settled.into_lines().iter().for_each(&mut callbacks.on_emit);
        }
        let due = last_tick + interval;
        let wait = due.saturating_duration_since(Instant::now()).min(STOP_POLL);
        match done.recv_timeout(wait) {
            Ok(()) => {
                finished += 1;
                watched.last_done = Instant::now();
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < due => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Snapshot::sum(shared.counters.iter().map(|c| &**c));
                drain_windows(shared, &mut window);
                let elapsed = due - shared.start;
                on_interval(&IntervalLine::between(
                    &prev,
                    &now,
                    elapsed.as_secs_f64(),
                    (due - last_tick).as_secs_f64(),
                    &window,
                ));
                prev = now;
                last_tick = due;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // A line due by the planned end that the workers beat to it (they end at that instant
    // too): written from the final counts, so that a run of N whole intervals has N lines.
    let due = last_tick + interval;
    let whole = Instant::now() >= due && shared.end.is_some_and(|end| due <= end);
    if !watched.stopped_early && whole {
        let now = Snapshot::sum(shared.counters.iter().map(|c| &**c));
        drain_windows(shared, &mut window);
        on_interval(&IntervalLine::between(
            &prev,
            &now,
            (due - shared.start).as_secs_f64(),
            interval.as_secs_f64(),
            &window,
        ));
    }
    watched
}

/// Every worker's window of the interval just ended, emptied into `window` (emptied first).
fn drain_windows(shared: &Shared, window: &mut Window) {
    window.reset();
    for counters in &shared.counters {
        counters.drain_window(window);
    }
}

/// What the workers kept to themselves, merged.
struct Joined {
    histograms: Histograms,
    emits: emits::EmitLog,
    /// The socket loops that ran, each named once.
    io: Vec<&'static str>,
    /// When the first worker's pacers started.
    started: Option<Instant>,
    /// Time the workers spent spinning.
    spun: Duration,
}

fn join_workers(handles: Vec<WorkerHandle>) -> Result<Joined, RunError> {
    let mut joined = Joined {
        histograms: Histograms::default(),
        emits: emits::EmitLog::default(),
        io: Vec::new(),
        started: None,
        spun: Duration::ZERO,
    };
    for handle in handles {
        let worker = handle.join().map_err(|_| RunError::WorkerPanic)?;
        let worker = worker.map_err(RunError::Worker)?;
        joined.histograms.merge(&worker.histograms);
        joined.emits.merge(worker.emits);
        joined.spun += worker.spun;
        if !joined.io.contains(&worker.io.name()) {
            joined.io.push(worker.io.name());
        }
        joined.started = Some(
            joined
                .started
                .map_or(worker.started, |s| s.min(worker.started)),
        );
    }
    Ok(joined)
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
    let curve = plan.plan.pacer.pace().curve()?;
    // Requests per second: each arrival of a new-connection open loop makes `calls`.
    let scheduled = curve.arrivals_by(duration_s) * plan.plan.calls_per_arrival() as f64;
    let scheduled = match plan.stop {
        Stop::Requests(n) => scheduled.min(n as f64),
        Stop::Duration(_) => scheduled,
    };
    Some(scheduled / duration_s.max(1e-9))
}
