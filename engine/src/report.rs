//! The output lines (`--json`: one JSON object per line) and the human summary. These types
//! are the contract with the orchestrator; `schema/output.schema.json` is generated from them.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::emits::{EmitLine, MinMax};
use crate::plan::{PacerSpec, Plan};
pub(crate) use crate::stats::round3;
pub use crate::stats::{decode_histogram, encode_histogram};
use crate::stats::{ErrorKind, Histograms, Snapshot};

/// Output format version; raised when a field changes meaning or disappears.
///
/// 2: `rps` counts answered attempts (`answered`), never failed ones; `floor_us` is per answer.
/// 3: emit lines carry each cycle's delay histogram, first and last arrival and the engine's
/// drain time, and come from every push transport; push plans stamp every read, so their
/// `notice_us` is measured; the summary adds the long poll's `resubscribe_gap_us`.
pub const OUTPUT_VERSION: u32 = 3;

/// Errors by kind. Every kind is always present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Errors {
    /// Connection refused or failed otherwise while connecting.
    pub connect: u64,
    /// No complete answer within the timeout.
    pub timeout: u64,
    /// Connection reset or broken pipe.
    pub reset: u64,
    /// The server closed before the answer was complete.
    pub closed: u64,
    /// Answers with status 400 or above (these are also counted in `requests`).
    pub status: u64,
    /// Unparseable answer: bad status line or header, header over 64 KiB, bad chunking,
    /// framing that reads two ways (Content-Length with Transfer-Encoding, Content-Length
    /// values that differ), unreadable push event.
    pub parse: u64,
    /// No local port left (EADDRNOTAVAIL): the run is invalid.
    pub ports_exhausted: u64,
    /// No file descriptor left (EMFILE/ENFILE): the run is invalid.
    pub fds_exhausted: u64,
    pub other: u64,
}

impl Errors {
    /// From counts indexed by `ErrorKind`.
    pub fn from_counts(counts: &[u64; ErrorKind::ALL.len()]) -> Errors {
        let n = |k: ErrorKind| counts[k as usize];
        Errors {
            connect: n(ErrorKind::Connect),
            timeout: n(ErrorKind::Timeout),
            reset: n(ErrorKind::Reset),
            closed: n(ErrorKind::Closed),
            status: n(ErrorKind::Status),
            parse: n(ErrorKind::Parse),
            ports_exhausted: n(ErrorKind::PortsExhausted),
            fds_exhausted: n(ErrorKind::FdsExhausted),
            other: n(ErrorKind::Other),
        }
    }

    /// Counts indexed by `ErrorKind`, as `from_counts` takes them.
    pub fn counts(&self) -> [u64; ErrorKind::ALL.len()] {
        std::array::from_fn(|k| match ErrorKind::ALL[k] {
            ErrorKind::Connect => self.connect,
            ErrorKind::Timeout => self.timeout,
            ErrorKind::Reset => self.reset,
            ErrorKind::Closed => self.closed,
            ErrorKind::Status => self.status,
            ErrorKind::Parse => self.parse,
            ErrorKind::PortsExhausted => self.ports_exhausted,
            ErrorKind::FdsExhausted => self.fds_exhausted,
            ErrorKind::Other => self.other,
        })
    }

    pub fn total(&self) -> u64 {
        self.counts().iter().sum()
    }
}

/// Server-push counters (zero for other behaviours).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Events {
    /// Event deliveries received (long-poll event answers plus comet event lines).
    pub received: u64,
    /// Comet only: events skipped in a stream (sum of `seq` gaps).
    pub lost: u64,
    /// A `seq` seen twice in a row by one client.
    pub duplicated: u64,
    /// A `seq` lower than one already seen by the same client.
    pub reordered: u64,
    pub longpoll_event_answers: u64,
    pub longpoll_timeout_answers: u64,
    /// Comet timeout lines (a stream ended by its `duration_ms`).
    pub comet_timeout_lines: u64,
    /// SSE heartbeats (comment lines) received.
    #[serde(default)]
    pub heartbeats: u64,
    /// SSE streams opened again with `Last-Event-ID` after one ended or failed.
    #[serde(default)]
    pub reconnects: u64,
    /// SSE deliveries the server replayed after a reconnect (`replayed: true`); also in `received`.
    #[serde(default)]
    pub replayed: u64,
    /// SSE gap messages (their missing `seq`s count in `lost`).
    #[serde(default)]
    pub gaps: u64,
    /// SSE timeout messages (a stream ended by its `duration_ms`).
    #[serde(default)]
    pub sse_timeout_messages: u64,
    /// WebSocket publish messages sent.
    #[serde(default)]
    pub publishes: u64,
    /// WebSocket `published` acknowledgements received (`broadcast_rtt_us` counts these).
    #[serde(default)]
    pub published: u64,
}

impl Events {
    fn from_snapshot(s: &Snapshot) -> Events {
        Events {
            received: s.events,
            lost: s.events_lost,
            duplicated: s.events_duplicated,
            reordered: s.events_reordered,
            longpoll_event_answers: s.longpoll_event_answers,
            longpoll_timeout_answers: s.longpoll_timeout_answers,
            comet_timeout_lines: s.comet_timeout_lines,
            heartbeats: s.heartbeats,
            reconnects: s.reconnects,
            replayed: s.replayed,
            gaps: s.gaps,
            sse_timeout_messages: s.sse_timeout_messages,
            publishes: s.publishes,
            published: s.published,
        }
    }
}

/// One line per interval. Counts are for this interval unless named `_total`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IntervalLine {
    /// Always `"interval"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Seconds since the run started, at the end of this interval.
    pub elapsed_s: f64,
    /// Length of this interval in seconds.
    pub interval_s: f64,
    /// Attempts finished in this interval (answered or failed).
    pub completed: u64,
    pub completed_total: u64,
    /// Attempts finished in this interval with a valid answer, whatever its status (syslog:
    /// messages sent).
    pub answered: u64,
    /// Answers with status below 400 in this interval.
    pub ok: u64,
    pub errors: Errors,
    /// `answered / interval_s`: failed attempts never count.
    pub rps: f64,
    /// Connections open at the end of the interval.
    pub open_connections: i64,
    pub connections_opened: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Push events received in this interval.
    pub events: u64,
}

impl IntervalLine {
    pub fn between(prev: &Snapshot, now: &Snapshot, elapsed_s: f64, interval_s: f64) -> Self {
        let answered = now.answered - prev.answered;
        IntervalLine {
            kind: "interval".into(),
            elapsed_s: round3(elapsed_s),
            interval_s: round3(interval_s),
            completed: now.requests - prev.requests,
            completed_total: now.requests,
            answered,
            ok: now.ok - prev.ok,
            errors: Errors::from_counts(&std::array::from_fn(|k| now.errors[k] - prev.errors[k])),
            rps: round3(answered as f64 / interval_s.max(1e-9)),
            open_connections: now.open_connections.max(0),
            connections_opened: now.connections_opened - prev.connections_opened,
            bytes_read: now.bytes_read - prev.bytes_read,
            bytes_written: now.bytes_written - prev.bytes_written,
            events: now.events - prev.events,
        }
    }
}

/// Percentiles of one histogram, in microseconds (0 when it is empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Percentiles {
    pub count: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
    pub stdev: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            min: h.min(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: round3(h.mean()),
            stdev: round3(h.stdev()),
        }
    }
}

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

    /// A wrk-like text summary; a run that got no answer says so first.
    pub fn human(&self) -> String {
        [
            self.human_no_answer(),
            self.human_latency(),
            self.human_counts(),
            self.human_rates(),
            self.human_caveats(),
        ]
        .concat()
    }

    /// What ran, and its latency percentiles.
    fn human_latency(&self) -> String {
        let l = &self.latency_us;
        let mut out = format!(
            "{} {} with {} thread(s), {}, {}\n",
            self.method(),
            self.plan.target,
            self.threads,
            self.clients(),
            self.io_backend
        );
        out += "  Latency     p50       p90       p99       p99.9     max\n";
        out += &format!(
            "           {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            fmt_us(l.p50),
            fmt_us(l.p90),
            fmt_us(l.p99),
            fmt_us(l.p999),
            fmt_us(l.max)
        );
        out
    }

    /// The first line when no attempt was answered: the rates below are zero, not slow.
    fn human_no_answer(&self) -> String {
        if self.answered > 0 {
            return String::new();
        }
        let kinds: Vec<String> = ErrorKind::ALL
            .iter()
            .zip(self.errors.counts())
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{} {n}", kind.wire_name()))
            .collect();
        let why = if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        };
        format!(
            "NO ANSWER: none of {} attempt(s) got an answer{why}\n",
            self.requests
        )
    }

    /// Answers, attempts, bytes, errors and push events.
    fn human_counts(&self) -> String {
        let mut out = format!(
            "  {} answered of {} attempts in {:.2}s, {} read, {} errors\n",
            self.answered,
            self.requests,
            self.duration_s,
            fmt_bytes(self.bytes_read),
            self.errors.total()
        );
        if self.errors.total() > 0 {
            out += &format!(
                "  Errors: {}\n",
                serde_json::to_string(&self.errors).unwrap_or_default()
            );
        }
        if self.events.received > 0 || self.events.longpoll_timeout_answers > 0 {
            out += &format!(
                "  Events: {}\n",
                serde_json::to_string(&self.events).unwrap_or_default()
            );
        }
        out
    }

    /// Rates, the loop's reading delay and the generator's CPU.
    fn human_rates(&self) -> String {
        let mut out = String::new();
        if let Some(rate) = self.intended_rate {
            out += &format!(
                "Intended rate: {rate:.2}/s, achieved {:.2}/s\n",
                self.achieved_rate
            );
        }
        if self.resubscribe_gap_us.count > 0 {
            out += &format!(
                "  Long poll re-subscribe gap (answer to next poll): p50 {}, p99 {}\n",
                fmt_us(self.resubscribe_gap_us.p50),
                fmt_us(self.resubscribe_gap_us.p99)
            );
        }
        if self.notice_us.count > 0 {
            out += &format!(
                "  Answers read after arrival: p50 {}, p99 {} (sampled; part of the latency)\n",
                fmt_us(self.notice_us.p50),
                fmt_us(self.notice_us.p99)
            );
        }
        out += &format!("Requests/sec: {:.2} (answers)\n", self.rps);
        out += &format!("Client CPU: {:.3}s\n", self.client_cpu_s);
        out
    }

    /// What qualifies the figures: a late start, an early stop, an invalid run.
    fn human_caveats(&self) -> String {
        let mut out = String::new();
        if self.start_late_ms > 0.0 {
            out += &format!(
                "Started {:.1} ms after start_at_ms, which had passed when the run was ready\n",
                self.start_late_ms
            );
        }
        if self.stopped_early {
            out += "Stopped early by a signal: the figures cover the run until then\n";
        }
        if !self.valid {
            out += &format!("INVALID RUN: {}\n", self.invalid_reasons.join("; "));
        }
        out
    }
}

impl Summary {
    /// The method on the wire, or what is sent instead of HTTP.
    fn method(&self) -> &str {
        if self.plan.behaviour.kind().needs_http() {
            self.plan.wire_method()
        } else {
            "SYSLOG"
        }
    }

    fn clients(&self) -> String {
        if self.generators > 1 {
            return format!("{} generators", self.generators);
        }
        match (&self.plan.pacer, self.plan.concurrency()) {
            (PacerSpec::Users { users, .. }, _) => format!("{users} user(s)"),
            (PacerSpec::Sequential {}, _) => "1 connection at a time".into(),
            (_, Some(connections)) => format!("{connections} connection(s)"),
            (_, None) => "a new connection per arrival".into(),
        }
    }
}

fn fmt_us(us: u64) -> String {
    match us {
        0..1_000 => format!("{us}us"),
        1_000..1_000_000 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

fn fmt_bytes(b: u64) -> String {
    match b {
        0..1024 => format!("{b}B"),
        1024..1_048_576 => format!("{:.1}KB", b as f64 / 1024.0),
        _ => format!("{:.1}MB", b as f64 / 1_048_576.0),
    }
}

/// The JSON schema of every output line: an interval, emit or summary line.
pub fn output_schema() -> String {
    #[derive(JsonSchema)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum OutputLine {
        Interval(IntervalLine),
        Emit(EmitLine),
        Summary(Box<Summary>),
    }
    let schema = schemars::schema_for!(OutputLine);
    serde_json::to_string_pretty(&schema).expect("schemas serialize") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_round_trips_through_base64() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in [10u64, 200, 3000, 40_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }

    #[test]
    fn interval_lines_are_deltas() {
        let prev = Snapshot {
            requests: 10,
            answered: 9,
            ok: 9,
            ..Default::default()
        };
        let now = Snapshot {
            requests: 30,
            answered: 25,
            ok: 24,
            events: 4,
            ..Default::default()
        };
        let line = IntervalLine::between(&prev, &now, 2.0, 1.0);
        assert_eq!(
            (line.completed, line.completed_total, line.ok),
            (20, 30, 15)
        );
        assert_eq!((line.answered, line.rps), (16, 16.0));
        assert_eq!(line.events, 4);
    }
}
