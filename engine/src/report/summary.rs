//! Output: the summary line, the last of a run, built from the workers' counters and
//! histograms (or added up from several generators' by `merge`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::types::{GroupWindow, WarmupEnd};
use super::OUTPUT_VERSION;
use crate::metrics::Timings;
use crate::plan::Plan;
use crate::stats::{round3, Attempts, Errors, Events, Histograms, Snapshot, Traffic};

/// The last line of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// Always `"summary"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    /// False when the figures cannot be trusted; `invalid_reasons` says why.
    pub valid: bool,
    pub invalid_reasons: Vec<String>,
    /// True when SIGTERM or SIGINT ended the run before its plan did: the figures cover the
    /// run until then.
    pub stopped_early: bool,
    /// Engines whose outputs this summary adds up: 1 for a run, N for `--merge`.
    pub generators: u64,
    // requests, answered, started, ok.
    #[serde(flatten)]
    pub attempts: Attempts,
    pub errors: Errors,
    /// Answers by status class: keys `1xx` … `5xx`.
    pub status: BTreeMap<String, u64>,
    /// From the start of the run to the last finished attempt (or the end of the duration).
    pub duration_s: f64,
    /// `answered / duration_s`: the throughput; failed attempts never count.
    pub rps: f64,
    /// Open loop: arrivals the schedule asked for per second; null for closed loops.
    pub intended_rate: Option<f64>,
    /// Attempts started per second: how well the generator kept to its schedule, not a
    /// throughput.
    pub achieved_rate: f64,
    // Each timing's percentiles (`latency_us` ...), then its histogram (`histogram` ...).
    #[serde(flatten)]
    pub timings: Timings,
    pub events: Events,
    // connections_opened, bytes_read, bytes_written.
    #[serde(flatten)]
    pub traffic: Traffic,
    /// CPU time the generator process used during the run (user + system), seconds.
    pub client_cpu_s: f64,
    pub client_cpu_user_s: f64,
    pub client_cpu_system_s: f64,
    /// How the workers waited for their sockets: `spin` (spin, then sleep) or `sleep` (both
    /// joined by `+` in a merge whose generators differed).
    #[serde(default)]
    pub wait: String,
    /// Why that wait: asked for, or what `auto` found (not latency-bound, not pinned, ...).
    #[serde(default)]
    pub wait_reason: String,
    /// Of `client_cpu_s`, the seconds spent spinning (polls that found nothing to do): CPU
    /// a spinning engine burns by choice, not work the load needed.
    #[serde(default)]
    pub spin_cpu_s: f64,
    /// The engine's floor: what it adds to one exchange by itself, in microseconds — its CPU
    /// per answer without spinning, plus the median `notice_us` when measured. An upper
    /// bound: on loopback the client's CPU includes kernel work done for the server's socket.
    /// A latency within twice this measures the client as much as the server. Null without
    /// answers.
    #[serde(default)]
    pub floor_us: Option<f64>,
    pub threads: usize,
    /// A plan with a warm-up phase: where it ended. The summary's counts, timings, CPU and
    /// `duration_s` cover the measured window after it only. Absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupEnd>,
    /// The loop that drove the sockets: `io_uring` or `epoll` (both joined by `+` if
    /// workers differed).
    pub io_backend: String,
    /// Distinct paths requests went to: the weighted paths, or 1 (the target's path).
    pub paths: usize,
    /// When the pacers started, in Unix milliseconds of this host's clock (a merge: the
    /// earliest generator's).
    pub started_at_ms: f64,
    /// How far the plan's `start_at_ms` had passed when the run was ready (it then started
    /// at once), in milliseconds; 0 when it started on time (a merge: the latest).
    pub start_late_ms: f64,
    /// The plan's `clock_offset_ms`, added to this host's clock when a delay was measured from
    /// a server timestamp (a merge: null when the generators' offsets differ).
    pub clock_offset_ms: Option<f64>,
    /// The plan as run, defaults filled in (a merge: the first generator's part of it).
    pub plan: Plan,
    /// A plan with client groups: each group's own summary, by name, the same fields as
    /// this one over the group's `window`, its `plan` the one the group ran. The figures
    /// above are every group's together. A group's `client_cpu_s` is 0 and its `floor_us`
    /// null: the process's CPU is not split by group. Absent without groups.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Summary>,
    /// A group's summary: the span of the run its figures cover. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<GroupWindow>,
}

pub struct SummaryInput<'a> {
    pub snapshot: &'a Snapshot,
    pub histograms: &'a Histograms,
    pub duration_s: f64,
    pub intended_rate: Option<f64>,
    pub cpu: (f64, f64),
    pub invalid_reasons: Vec<String>,
    pub stopped_early: bool,
    pub started_at_ms: f64,
    pub start_late_ms: f64,
    pub paths: usize,
    pub plan: &'a Plan,
    pub threads: usize,
    pub io_backend: String,
    pub wait: WaitUsed,
    pub warmup: Option<WarmupEnd>,
}

/// The wait the workers used, for the summary.
#[derive(Debug, Clone, Default)]
pub struct WaitUsed {
    pub spin: bool,
    pub reason: String,
    pub spin_cpu_s: f64,
}

impl Summary {
    pub fn build(input: SummaryInput) -> Summary {
        let s = input.snapshot;
        let h = input.histograms;
        let duration = input.duration_s.max(1e-9);
        let status = (1..=5)
            .map(|c| (format!("{c}xx"), s.status_classes[c - 1]))
            .collect();
        Summary {
            kind: "summary".into(),
            version: OUTPUT_VERSION,
            valid: input.invalid_reasons.is_empty(),
            invalid_reasons: input.invalid_reasons,
            stopped_early: input.stopped_early,
            generators: 1,
            attempts: s.attempts,
            errors: s.errors,
            status,
            duration_s: round3(input.duration_s),
            rps: round3(s.attempts.answered as f64 / duration),
            intended_rate: input.intended_rate.map(round3),
            achieved_rate: round3(s.attempts.started as f64 / duration),
            timings: Timings::of(&h.0),
            events: s.events,
            traffic: s.traffic,
            client_cpu_s: round3(input.cpu.0 + input.cpu.1),
            client_cpu_user_s: round3(input.cpu.0),
            client_cpu_system_s: round3(input.cpu.1),
            wait: if input.wait.spin { "spin" } else { "sleep" }.into(),
            wait_reason: input.wait.reason,
            spin_cpu_s: round3(input.wait.spin_cpu_s),
            floor_us: None,
            threads: input.threads,
            warmup: input.warmup,
            io_backend: input.io_backend,
            paths: input.paths,
            started_at_ms: round3(input.started_at_ms),
            start_late_ms: round3(input.start_late_ms),
            clock_offset_ms: Some(input.plan.clock_offset_ms),
            plan: input.plan.clone(),
            groups: BTreeMap::new(),
            window: None,
        }
        .with_floor()
    }

    /// The summary with its `floor_us` worked out from its CPU, spinning and `notice_us`.
    pub fn with_floor(mut self) -> Summary {
        let (answered, notice) = (self.attempts.answered, &self.timings.notice_us);
        self.floor_us = (answered > 0).then(|| {
            let own_cpu = (self.client_cpu_s - self.spin_cpu_s).max(0.0);
            let notice = if notice.count > 0 {
                notice.p50 as f64
            } else {
                0.0
            };
            round3(own_cpu * 1e6 / answered as f64 + notice)
        });
        self
    }
}
