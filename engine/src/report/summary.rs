//! Output: the summary line, the last of a run, built from the workers' counters and
//! histograms (or added up from several generators' by `merge`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Errors, Events, Percentiles, OUTPUT_VERSION};
use crate::hdr::encode_histogram;
use crate::plan::Plan;
use crate::stats::{round3, Histograms, Snapshot};

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
    /// Finished attempts (answered with any status, or failed). Syslog: messages sent.
    pub requests: u64,
    /// Finished attempts with a valid answer, whatever its status (syslog: messages sent).
    /// Failed connects, resets and timeouts are in `errors`, never here.
    pub answered: u64,
    /// Attempts begun (`achieved_rate` is these per second).
    pub started: u64,
    /// Answers with a status below 400.
    pub ok: u64,
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
    /// In open loop from the intended send time (corrected for coordinated omission), else
    /// from the actual send; in microseconds.
    pub latency_us: Percentiles,
    /// From the actual send to the complete answer (the raw service time).
    pub service_us: Percentiles,
    pub connect_us: Percentiles,
    /// From the send to the first byte of the answer.
    pub first_byte_us: Percentiles,
    /// Generator scheduling lag: actual minus intended send time (open loop only).
    pub lag_us: Percentiles,
    /// The engine's own reading delay: from the kernel's receive timestamp of an answer's
    /// bytes to the loop reading them. The io_uring loop samples one kept-alive connection in
    /// 64; the epoll loop stamps every connection of a latency-bound plan (new connections
    /// included) and every read of a push plan's streams, and none of other plans. A latency
    /// can read high by up to this much.
    pub notice_us: Percentiles,
    /// Push: server `created` timestamp to arrival, the arrival read on the server's clock
    /// (this host's plus `clock_offset_ms`), millisecond grain.
    pub event_delay_us: Percentiles,
    /// Push: from the subscription request to each event's arrival.
    pub event_since_subscribe_us: Percentiles,
    /// SSE and WebSocket: from the start of the connect to the response head (the `101`).
    pub handshake_us: Percentiles,
    /// WebSocket publish: from sending a publish to the server's `published`
    /// acknowledgement, which follows the cycle's last delivery.
    pub broadcast_rtt_us: Percentiles,
    /// Long poll: from an answer's arrival to the next poll's request written, when the
    /// client is subscribed to nothing.
    pub resubscribe_gap_us: Percentiles,
    /// `latency_us` as HdrHistogram V2 + DEFLATE, base64 (standard alphabet, padded).
    pub histogram: String,
    /// `service_us` in the same encoding.
    pub service_histogram: String,
    // The other percentiles' histograms too, so that a merge adds them up.
    /// `connect_us` in the same encoding.
    pub connect_histogram: String,
    /// `first_byte_us` in the same encoding.
    pub first_byte_histogram: String,
    /// `lag_us` in the same encoding.
    pub lag_histogram: String,
    /// `notice_us` in the same encoding.
    pub notice_histogram: String,
    /// `event_delay_us` in the same encoding.
    pub event_delay_histogram: String,
    /// `event_since_subscribe_us` in the same encoding.
    pub event_since_subscribe_histogram: String,
    /// `handshake_us` in the same encoding.
    pub handshake_histogram: String,
    /// `broadcast_rtt_us` in the same encoding.
    pub broadcast_rtt_histogram: String,
    /// `resubscribe_gap_us` in the same encoding.
    pub resubscribe_gap_histogram: String,
    pub events: Events,
    pub connections_opened: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
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
            requests: s.requests,
            answered: s.answered,
            started: s.started,
            ok: s.ok,
            errors: Errors::from_counts(&s.errors),
            status,
            duration_s: round3(input.duration_s),
            rps: round3(s.answered as f64 / duration),
            intended_rate: input.intended_rate.map(round3),
            achieved_rate: round3(s.started as f64 / duration),
            latency_us: Percentiles::of(&h.latency),
            service_us: Percentiles::of(&h.service),
            connect_us: Percentiles::of(&h.connect),
            first_byte_us: Percentiles::of(&h.first_byte),
            lag_us: Percentiles::of(&h.lag),
            notice_us: Percentiles::of(&h.notice),
            event_delay_us: Percentiles::of(&h.event_delay),
            event_since_subscribe_us: Percentiles::of(&h.event_since_subscribe),
            handshake_us: Percentiles::of(&h.handshake),
            broadcast_rtt_us: Percentiles::of(&h.broadcast_rtt),
            resubscribe_gap_us: Percentiles::of(&h.resubscribe),
            histogram: encode_histogram(&h.latency),
            service_histogram: encode_histogram(&h.service),
            connect_histogram: encode_histogram(&h.connect),
            first_byte_histogram: encode_histogram(&h.first_byte),
            lag_histogram: encode_histogram(&h.lag),
            notice_histogram: encode_histogram(&h.notice),
            event_delay_histogram: encode_histogram(&h.event_delay),
            event_since_subscribe_histogram: encode_histogram(&h.event_since_subscribe),
            handshake_histogram: encode_histogram(&h.handshake),
            broadcast_rtt_histogram: encode_histogram(&h.broadcast_rtt),
            resubscribe_gap_histogram: encode_histogram(&h.resubscribe),
            events: Events::from_snapshot(s),
            connections_opened: s.connections_opened,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            client_cpu_s: round3(input.cpu.0 + input.cpu.1),
            client_cpu_user_s: round3(input.cpu.0),
            client_cpu_system_s: round3(input.cpu.1),
            wait: if input.wait.spin { "spin" } else { "sleep" }.into(),
            wait_reason: input.wait.reason,
            spin_cpu_s: round3(input.wait.spin_cpu_s),
            floor_us: None,
            threads: input.threads,
            io_backend: input.io_backend,
            paths: input.paths,
            started_at_ms: round3(input.started_at_ms),
            start_late_ms: round3(input.start_late_ms),
            clock_offset_ms: Some(input.plan.clock_offset_ms),
            plan: input.plan.clone(),
        }
        .with_floor()
    }

    /// The summary with its `floor_us` worked out from its CPU, spinning and `notice_us`.
    pub fn with_floor(mut self) -> Summary {
        self.floor_us = (self.answered > 0).then(|| {
            let own_cpu = (self.client_cpu_s - self.spin_cpu_s).max(0.0);
            let notice = if self.notice_us.count > 0 {
                self.notice_us.p50 as f64
            } else {
                0.0
            };
            round3(own_cpu * 1e6 / self.answered as f64 + notice)
        });
        self
    }

    /// Every histogram the summary carries, beside the percentiles read from it.
    pub fn histograms_mut(&mut self) -> [(&mut Percentiles, &mut String); 11] {
        [
            (&mut self.latency_us, &mut self.histogram),
            (&mut self.service_us, &mut self.service_histogram),
            (&mut self.connect_us, &mut self.connect_histogram),
            (&mut self.first_byte_us, &mut self.first_byte_histogram),
            (&mut self.lag_us, &mut self.lag_histogram),
            (&mut self.notice_us, &mut self.notice_histogram),
            (&mut self.event_delay_us, &mut self.event_delay_histogram),
            (
                &mut self.event_since_subscribe_us,
                &mut self.event_since_subscribe_histogram,
            ),
            (&mut self.handshake_us, &mut self.handshake_histogram),
            (
                &mut self.broadcast_rtt_us,
                &mut self.broadcast_rtt_histogram,
            ),
            (
                &mut self.resubscribe_gap_us,
                &mut self.resubscribe_gap_histogram,
            ),
        ]
    }
}
