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

use std::collections::BTreeMap;
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
    let parts = parts(&plan, start.at, wait.spin);
    let (handles, done) = spawn_workers(&parts)?;
    let workers = handles.iter().map(Vec::len).sum();
    let watched = watch(&parts, &start, workers, &done, controls, on_line);
    for part in &parts {
        part.shared.stopping.store(true, Relaxed);
    }
    let mut joined = handles
        .into_iter()
        .map(join_workers)
        .collect::<Result<Vec<_>, _>>()?;
    let cpu_after = system::cpu_times();
    let measured = watched.measured.as_ref();
    // The measured window: the whole run, or what follows its warm-up.
    let origin = measured.map_or(start.at, |m| m.at);
    let snapshot = Snapshot::sum(parts.iter().flat_map(Part::counters));
    let snapshot = measured.map_or(snapshot, |m| snapshot.since(&m.base));
    let cpu_before = measured.map_or(cpu_before, |m| m.cpu);
    let span = |part: &Part| {
        let end = part
            .shared
            .end()
            .map_or(watched.last_done, |end| end.min(watched.last_done));
        end.saturating_duration_since(origin.max(part.shared.start))
            .as_secs_f64()
    };
    let run_end = parts.iter().map(|p| p.shared.end()).max().flatten();
    let duration = match run_end {
        Some(end) => end.min(watched.last_done) - origin,
        None => watched.last_done - origin,
    }
    .as_secs_f64();
    invalid.extend(exhaustion_reasons(&snapshot));
    let groups = group_summaries(&plan, &parts, &joined, &start, &watched, &span, &invalid);
    let all = Joined::all(&mut joined);
    let started = measured.map_or(all.started.unwrap_or(start.at), |m| m.at);
    let scheduled = parts.iter().map(|p| scheduled(&p.shared.plan, span(p)));
    let mut summary = Summary::build(SummaryInput {
        snapshot: &snapshot,
        histograms: &all.histograms,
        duration_s: duration,
        intended_rate: total(scheduled).map(|n| n / duration.max(1e-9)),
        cpu: (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1),
        invalid_reasons: invalid,
        stopped_early: watched.stopped_early,
        started_at_ms: start.unix_ms(started),
        start_late_ms: start.late_ms,
        paths: plan.paths.len().max(1),
        plan: &plan.plan,
        threads: workers,
        io_backend: all.io.join("+"),
        wait: report::WaitUsed {
            spin: wait.spin,
            reason: wait.reason,
            spin_cpu_s: all
                .spun
                .saturating_sub(measured.map_or(Duration::ZERO, |m| m.spun))
                .as_secs_f64(),
        },
        warmup: measured.map(|m| m.end.clone()),
    });
    summary.groups = groups;
    // One choice of wait for the whole process.
    for group in summary.groups.values_mut() {
        group.wait_reason.clone_from(&summary.wait_reason);
    }
    Ok(Outcome {
        emits: all.emits.into_lines(),
        summary,
    })
}

/// One part of a run, driven by workers of its own: the plan itself, or one of its client
/// groups, which starts its `start` after the run and keeps its own counters and histograms.
struct Part {
    /// The group's name; empty for a plan without groups.
    name: String,
    shared: Arc<Shared>,
}

impl Part {
    fn counters(&self) -> impl Iterator<Item = &stats::Counters> {
        self.shared.counters.iter().map(|c| &**c)
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::sum(self.counters())
    }
}

/// The run's parts: one per client group, or the plan alone.
fn parts(plan: &ValidPlan, start: Instant, spin: bool) -> Vec<Part> {
    let part = |name: &str, plan: &ValidPlan, at: Instant| Part {
        name: name.into(),
        shared: Arc::new(Shared::new(plan.clone(), at).spinning(spin)),
    };
    if plan.groups.is_empty() {
        return vec![part("", plan, start)];
    }
    let groups = plan.groups.iter();
    groups
        .map(|g| part(&g.name, &g.plan, start + g.start))
        .collect()
}

/// Each group's summary over its own window, by name (empty without groups).
fn group_summaries(
    plan: &ValidPlan,
    parts: &[Part],
    joined: &[Joined],
    start: &Start,
    watched: &Watched,
    span: &dyn Fn(&Part) -> f64,
    invalid: &[String],
) -> BTreeMap<String, Summary> {
    if plan.groups.is_empty() {
        return BTreeMap::new();
    }
    let windows = plan.groups.iter();
    let zipped = parts.iter().zip(joined).zip(windows);
    zipped
        .map(|((part, joined), group)| {
            let snapshot = part.snapshot();
            let duration = span(part);
            let mut reasons = invalid.to_vec();
            reasons.extend(
                exhaustion_reasons(&snapshot)
                    .into_iter()
                    .filter(|r| !invalid.contains(r)),
            );
            let shared = &part.shared;
            let start_s = group.start.as_secs_f64();
            let mut summary = Summary::build(SummaryInput {
                snapshot: &snapshot,
                histograms: &joined.histograms,
                duration_s: duration,
                intended_rate: scheduled(&shared.plan, duration).map(|n| n / duration.max(1e-9)),
                cpu: (0.0, 0.0),
                invalid_reasons: reasons,
                stopped_early: watched.stopped_early,
                started_at_ms: start.unix_ms(joined.started.unwrap_or(shared.start)),
                start_late_ms: start.late_ms,
                paths: shared.plan.paths.len().max(1),
                plan: &shared.plan.plan,
                threads: shared.plan.threads,
                io_backend: joined.io.join("+"),
                wait: report::WaitUsed {
                    spin: shared.spin,
                    reason: String::new(),
                    spin_cpu_s: joined.spun.as_secs_f64(),
                },
                warmup: None,
            });
            summary.floor_us = None;
            summary.window = Some(report::GroupWindow {
                start_s: report::round3(start_s),
                stop_s: report::round3(start_s + shared.plan.plan.duration_s.unwrap_or(0.0)),
            });
            (part.name.clone(), summary)
        })
        .collect()
}

type WorkerHandle = std::thread::JoinHandle<std::io::Result<worker::WorkerResults>>;

/// Each part's workers, a thread each (the part's plan's `threads`); each says on the
/// returned channel when it is done.
fn spawn_workers(parts: &[Part]) -> Result<(Vec<Vec<WorkerHandle>>, mpsc::Receiver<()>), RunError> {
    let (done_tx, done_rx) = mpsc::channel();
    let mut handles = Vec::new();
    for part in parts {
        let mut own = Vec::new();
        for index in 0..part.shared.plan.threads {
            let shared = part.shared.clone();
            let done = done_tx.clone();
            let name = match part.name.as_str() {
                "" => format!("load-{index}"),
                group => format!("load-{group}-{index}"),
            };
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let result = worker::run_worker(index, shared);
                    let _ = done.send(());
                    result
                })
                .map_err(RunError::Worker)?;
            own.push(handle);
        }
        handles.push(own);
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
    /// Each part's counts at the last line.
    prev: Vec<Snapshot>,
    /// Each part's workers' windows, drained into one at each interval's end (made once,
    /// reset each time), and all parts' together.
    windows: Vec<Window>,
    window: Window,
    origin: Instant,
    base: Snapshot,
}

impl Lines {
    fn new(parts: &[Part], origin: Instant) -> Lines {
        Lines {
            prev: vec![Snapshot::default(); parts.len()],
            windows: parts.iter().map(|_| Window::default()).collect(),
            window: Window::default(),
            origin,
            base: Snapshot::default(),
        }
    }

    /// The run's line of the interval ending at `due`; with client groups, each group's
    /// own line within it.
    fn line(&mut self, parts: &[Part], due: Instant, interval: Duration) -> IntervalLine {
        let now: Vec<Snapshot> = parts.iter().map(Part::snapshot).collect();
        let grouped = parts.iter().any(|p| !p.name.is_empty());
        if grouped {
            self.window.reset();
            for (part, window) in parts.iter().zip(&mut self.windows) {
                drain_windows(&part.shared, window);
                self.window.add(window);
            }
        } else {
            // Without groups, straight into the run's window: nothing more between the
            // counts' reading and a warm-up's end (`measure_from`) than before groups.
            drain_windows(&parts[0].shared, &mut self.window);
        }
        let (elapsed, interval) = ((due - self.origin).as_secs_f64(), interval.as_secs_f64());
        let mut line = IntervalLine::between(
            &added(&self.prev).since(&self.base),
            &added(&now).since(&self.base),
            elapsed,
            interval,
            &self.window,
        );
        let named = parts.iter().filter(|p| !p.name.is_empty());
        for (((part, prev), now), window) in named.zip(&self.prev).zip(&now).zip(&self.windows) {
            let own = IntervalLine::between(prev, now, elapsed, interval, window);
            line.groups.insert(part.name.clone(), own);
        }
        self.prev = now;
        line
    }

    /// The measured window begins at `due`, the end of the interval just written (its
    /// histograms restarted just before that line's counts were read).
    fn measure_from(&mut self, shared: &Shared, start: &Start, due: Instant, by: &str) -> Measured {
        shared.measure_from(due);
        let end = report::WarmupEnd {
            elapsed_s: report::round3((due - shared.start).as_secs_f64()),
            unix_ms: report::round3(start.unix_ms(due)),
            by: by.into(),
        };
        (self.origin, self.base) = (due, added(&self.prev));
        Measured {
            at: due,
            base: self.base,
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
    parts: &[Part],
    start: &Start,
    workers: usize,
    done: &mpsc::Receiver<()>,
    controls: &Controls,
    mut on_line: impl FnMut(Line),
) -> Watched {
    let mut next_settle = Instant::now() + SETTLE_PASS;
    // Plan-wide: the same in every part. A warm-up (never with groups) is the first part's.
    let first = &parts[0].shared;
    let interval = Duration::from_millis(first.plan.plan.interval_ms);
    let cap = (first.plan.plan.warmup_max_s).map(|cap| start.at + Duration::from_secs_f64(cap));
    let mut lines = Lines::new(parts, start.at);
    let mut last_tick = start.at;
    let mut finished = 0;
    let mut watched = Watched {
        stopped_early: false,
        last_done: start.at,
        measured: None,
    };
    while finished < workers {
        if !watched.stopped_early && controls.stop.load(Relaxed) {
            watched.stopped_early = true;
            for part in parts {
                part.shared.stop_early(Instant::now() + STOP_GRACE);
            }
        }
        if Instant::now() >= next_settle {
            next_settle += SETTLE_PASS;
            for part in parts {
                let settled = emits::take_settled(&part.shared.emit_logs, Instant::now());
                for line in settled.into_lines() {
                    on_line(Line::Emit(&line));
                }
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
                let asked = controls.measure.load(Relaxed);
                let by = match cap {
                    Some(_) if watched.measured.is_some() || watched.stopped_early => None,
                    Some(_) if asked => Some("request"),
                    Some(cap) if due >= cap => Some("cap"),
                    _ => None,
                };
                if by.is_some() {
                    // Before the counts are read, not after the line is written: an answer
                    // timed in between would be counted in the window but timed in the
                    // warm-up (a loaded run lost 138 timings so, with four connections).
                    for counters in &first.counters {
                        counters.restart_histograms();
                    }
                }
                on_line(Line::Interval(&lines.line(parts, due, due - last_tick)));
                last_tick = due;
                if let Some(by) = by {
                    let measured = lines.measure_from(first, start, due, by);
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
    // too, or a little before, when an open loop's last arrival is answered, or a group
    // ends before the run): written at its instant from the final counts, so that a run of
    // N whole intervals has N lines.
    let due = last_tick + interval;
    let run_end = parts.iter().map(|p| p.shared.end()).max().flatten();
    if !watched.stopped_early && run_end.is_some_and(|end| due <= end) {
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        on_line(Line::Interval(&lines.line(parts, due, interval)));
    }
    watched
}

/// Several parts' counts added up.
fn added(parts: &[Snapshot]) -> Snapshot {
    let mut sum = Snapshot::default();
    for part in parts {
        sum.add(part);
    }
    sum
}

/// Every worker's window of the interval just ended, emptied into `window` (emptied first).
fn drain_windows(shared: &Shared, window: &mut Window) {
    window.reset();
    for counters in &shared.counters {
        counters.drain_window(window);
    }
}

/// What the workers (of a part, or of the whole run) kept to themselves, merged.
#[derive(Default)]
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
    let mut joined = Joined::default();
    for handle in handles {
        let worker = handle.join().map_err(|_| RunError::WorkerPanic)?;
        let worker = worker.map_err(RunError::Worker)?;
        joined.add(Joined {
            histograms: worker.histograms,
            emits: worker.emits,
            io: vec![worker.io.name()],
            started: Some(worker.started),
            spun: worker.spun,
        });
    }
    Ok(joined)
}

impl Joined {
    /// Adds another's (its emit records are moved in).
    fn add(&mut self, other: Joined) {
        self.histograms.merge(&other.histograms);
        self.emits.merge(other.emits);
        self.spun += other.spun;
        for io in other.io {
            if !self.io.contains(&io) {
                self.io.push(io);
            }
        }
        self.started = match (self.started, other.started) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Every part's together; the parts' emit records are moved into it.
    fn all(parts: &mut [Joined]) -> Joined {
        let mut all = Joined::default();
        for part in parts {
            all.add(Joined {
                histograms: part.histograms.clone(),
                emits: std::mem::take(&mut part.emits),
                io: part.io.clone(),
                started: part.started,
                spun: part.spun,
            });
        }
        all
    }
}

/// Descriptors the plan may hold at once (its groups' added up), plus room for the runtime
/// itself.
fn needed_descriptors(plan: &ValidPlan) -> u64 {
    let own = |plan: &ValidPlan| {
        let slots = plan.plan.concurrency().unwrap_or(plan.plan.connections);
        slots + 4 * plan.threads as u64
    };
    let parts = match plan.groups.is_empty() {
        true => own(plan),
        false => plan.groups.iter().map(|g| own(&g.plan)).sum(),
    };
    parts + 64
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

/// The requests an open-loop schedule asks for in its first `duration_s` (null for closed
/// pacing): the summary's `intended_rate` is these over the duration.
fn scheduled(plan: &ValidPlan, duration_s: f64) -> Option<f64> {
    let curve = plan.plan.pacer.pace().curve()?;
    // Each arrival of a new-connection open loop makes `calls`.
    let scheduled = curve.arrivals_by(duration_s) * plan.plan.calls_per_arrival() as f64;
    Some(match plan.stop {
        Stop::Requests(n) => scheduled.min(n as f64),
        Stop::Duration(_) => scheduled,
    })
}

/// The sum of the parts that have one (null when none has).
fn total(parts: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    parts.flatten().reduce(|a, b| a + b)
}
