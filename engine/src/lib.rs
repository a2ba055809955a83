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
pub use report::{EmitLine, IntervalLine, MeasureLine, Summary};

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

/// What a caller may ask of a run under way: an early stop (a signal handler sets it), and
/// the end of a warm-up phase (`warmup_max_s`: the measured window begins at the next
/// interval boundary).
pub struct Controls<'a> {
    pub stop: &'a AtomicBool,
    pub measure: &'a AtomicBool,
}

/// A line a run prints as it goes: an interval's, the start of its measured window, or an
/// emit cycle that has settled (no delivery of it for a while, `emits::take_settled`).
pub enum Line<'a> {
    Interval(&'a IntervalLine),
    Measure(&'a MeasureLine),
    Emit(&'a EmitLine),
}

/// Runs a plan, handing each interval line to `on_interval` as it is due. Setting
/// `stop_requested` (a signal handler does) ends the run early: no new work starts, work in
/// hand gets `STOP_GRACE` to finish, and the summary says `stopped_early`. The emit lines
/// come back in the outcome, each cycle's lines added up into one.
pub fn run_with(
    plan: ValidPlan,
    stop_requested: &AtomicBool,
    mut on_interval: impl FnMut(&IntervalLine),
) -> Result<Outcome, RunError> {
    let controls = Controls {
        stop: stop_requested,
        measure: &AtomicBool::new(false),
    };
    let mut settled = Vec::new();
    let mut outcome = run_controlled(plan, &controls, |line| match line {
        Line::Interval(line) => on_interval(line),
        Line::Emit(line) => settled.push(line.clone()),
        Line::Measure(_) => {}
    })?;
    settled.append(&mut outcome.emits);
    let log = emits::EmitLog::from_lines(settled).expect("the engine's own lines read back");
    outcome.emits = log.into_lines();
    Ok(outcome)
}

/// Runs a plan as `run_with` does, with its warm-up phase (if any) ended by `measure` or by
/// its cap, handing each line to `on_line` as it is due. Each emit cycle that has settled
/// goes to `on_line` during the run, so that a run of any length holds only its recent
/// cycles; a delivery that comes after its cycle's line makes a further line for the same
/// (event, seq), which a reader adds up. The outcome's emits are the cycles not settled by
/// the end.
pub fn run_controlled(
    plan: ValidPlan,
    controls: &Controls,
    on_line: impl FnMut(Line),
) -> Result<Outcome, RunError> {
    let mut invalid = system::raise_fd_limit(needed_descriptors(&plan));
    // Before the start: the choice may watch the CPUs for a moment.
    let wait = spin::choose(&plan.plan, plan.threads);
    let cpu_before = system::cpu_times();
    let start = Start::at_unix_ms(plan.plan.start_at_ms);
    let shared = Arc::new(Shared::new(plan, start.at).spinning(wait.spin));
    let (handles, done) = spawn_workers(&shared)?;
    let watched = watch(&shared, &start, handles.len(), &done, controls, on_line);
    shared.stopping.store(true, Relaxed);
    let joined = join_workers(handles)?;
    let cpu_after = system::cpu_times();
    let measured = watched.measured.as_ref();
    // The measured window: the whole run, or what follows its warm-up.
    let origin = measured.map_or(shared.start, |m| m.at);
    let snapshot = Snapshot::sum(shared.counters.iter().map(|c| &**c));
    let snapshot = measured.map_or(snapshot, |m| snapshot.since(&m.base));
    let cpu_before = measured.map_or(cpu_before, |m| m.cpu);
    let duration = match shared.end() {
        Some(end) => end.min(watched.last_done) - origin,
        None => watched.last_done - origin,
    };
    invalid.extend(exhaustion_reasons(&snapshot));
    let started = measured.map_or(joined.started.unwrap_or(start.at), |m| m.at);
    let summary = Summary::build(SummaryInput {
        snapshot: &snapshot,
        histograms: &joined.histograms,
        duration_s: duration.as_secs_f64(),
        intended_rate: intended_rate(&shared.plan, duration.as_secs_f64()),
        cpu: (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1),
        invalid_reasons: invalid,
        stopped_early: watched.stopped_early,
        started_at_ms: start.unix_ms(started),
        start_late_ms: start.late_ms,
        paths: shared.plan.paths.len().max(1),
        plan: &shared.plan.plan,
        threads: shared.plan.threads,
        io_backend: joined.io.join("+"),
        wait: report::WaitUsed {
            spin: wait.spin,
            reason: wait.reason,
            spin_cpu_s: joined
                .spun
                .saturating_sub(measured.map_or(Duration::ZERO, |m| m.spun))
                .as_secs_f64(),
        },
        warmup: measured.map(|m| m.end.clone()),
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
    /// Where the measured window began, after a warm-up phase.
    measured: Option<Measured>,
}

/// The start of a measured window that follows a warm-up phase.
struct Measured {
    at: Instant,
    /// The counts at `at`: the window's own are the counts since.
    base: Snapshot,
    /// The process's CPU times (user, system) at `at`.
    cpu: (f64, f64),
    /// The workers' time spinning by `at`.
    spun: Duration,
    end: report::WarmupEnd,
}

/// The coordinator's interval lines: deltas between snapshots, counted from the measured
/// window's start once it has one.
struct Lines {
    prev: Snapshot,
    /// The workers' windows, drained into one at each interval's end (made once, reset each
    /// time).
    window: Window,
    origin: Instant,
    base: Snapshot,
}

impl Lines {
    fn line(&mut self, shared: &Shared, due: Instant, interval: Duration) -> IntervalLine {
        let now = Snapshot::sum(shared.counters.iter().map(|c| &**c));
        drain_windows(shared, &mut self.window);
        let line = IntervalLine::between(
            &self.prev.since(&self.base),
            &now.since(&self.base),
            (due - self.origin).as_secs_f64(),
            interval.as_secs_f64(),
            &self.window,
        );
        self.prev = now;
        line
    }

    /// The measured window begins at `due`, the end of the interval just written.
    fn measure_from(&mut self, shared: &Shared, start: &Start, due: Instant, by: &str) -> Measured {
        shared.measure_from(due);
        for counters in &shared.counters {
            counters.restart_histograms();
        }
        let end = report::WarmupEnd {
            elapsed_s: report::round3((due - shared.start).as_secs_f64()),
            unix_ms: report::round3(start.unix_ms(due)),
            by: by.into(),
        };
        (self.origin, self.base) = (due, self.prev);
        Measured {
            at: due,
            base: self.prev,
            cpu: system::cpu_times(),
            spun: shared.counters.iter().map(|c| c.spun_so_far()).sum(),
            end,
        }
    }
}

/// Watches the run until every worker is done: an interval line each time one is due, the
/// end of a warm-up phase at the first boundary after it is asked for or its cap, and an
/// early stop passed on to the workers when one is requested.
fn watch(
    shared: &Shared,
    start: &Start,
    workers: usize,
    done: &mpsc::Receiver<()>,
    controls: &Controls,
    mut on_line: impl FnMut(Line),
) -> Watched {
    let mut next_settle = Instant::now() + SETTLE_PASS;
    let interval = Duration::from_millis(shared.plan.plan.interval_ms);
    let cap =
        (shared.plan.plan.warmup_max_s).map(|cap| shared.start + Duration::from_secs_f64(cap));
    let mut lines = Lines {
        prev: Snapshot::default(),
        window: Window::default(),
        origin: shared.start,
        base: Snapshot::default(),
    };
    let mut last_tick = shared.start;
    let mut finished = 0;
    let mut watched = Watched {
        stopped_early: false,
        last_done: shared.start,
        measured: None,
    };
    while finished < workers {
        if !watched.stopped_early && controls.stop.load(Relaxed) {
            watched.stopped_early = true;
            shared.stop_early(Instant::now() + STOP_GRACE);
        }
        if Instant::now() >= next_settle {
            next_settle += SETTLE_PASS;
            let settled = emits::take_settled(&shared.emit_logs, Instant::now());
            for line in settled.into_lines() {
                on_line(Line::Emit(&line));
            }
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
                on_line(Line::Interval(&lines.line(shared, due, due - last_tick)));
                last_tick = due;
                let asked = controls.measure.load(Relaxed);
                let by = match cap {
                    Some(_) if watched.stopped_early => None,
                    Some(_) if asked => Some("request"),
                    Some(cap) if due >= cap => Some("cap"),
                    _ => None,
                };
                if let (Some(by), None) = (by, &watched.measured) {
                    let measured = lines.measure_from(shared, start, due, by);
                    let line = MeasureLine {
                        kind: "measure".into(),
                        end: measured.end.clone(),
                    };
                    on_line(Line::Measure(&line));
                    watched.measured = Some(measured);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // A line due by the planned end that the workers beat to it (they end at that instant
    // too): written from the final counts, so that a run of N whole intervals has N lines.
    let due = last_tick + interval;
    let whole = Instant::now() >= due && shared.end().is_some_and(|end| due <= end);
    if !watched.stopped_early && whole {
        on_line(Line::Interval(&lines.line(shared, due, interval)));
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
