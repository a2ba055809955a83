//! Output: the line types shared by interval lines and the summary (errors by kind, push
//! counters, percentiles) and the interval line itself, made from two snapshots.

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::stats::{round3, ErrorKind, Snapshot};

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
    pub(super) fn from_snapshot(s: &Snapshot) -> Events {
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

#[cfg(test)]
mod tests {
    use super::*;

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
