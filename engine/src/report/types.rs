//! Output: the interval line, made from two snapshots. The counts it shares with the summary
//! (errors by kind, traffic) are declared once, with their names, in `crate::metrics`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::stats::{round3, Errors, Snapshot, Traffic};

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
    // connections_opened, bytes_read, bytes_written.
    #[serde(flatten)]
    pub traffic: Traffic,
    /// Push events received in this interval.
    pub events: u64,
}

impl IntervalLine {
    pub fn between(prev: &Snapshot, now: &Snapshot, elapsed_s: f64, interval_s: f64) -> Self {
        let attempts = now.attempts.since(&prev.attempts);
        IntervalLine {
            kind: "interval".into(),
            elapsed_s: round3(elapsed_s),
            interval_s: round3(interval_s),
            completed: attempts.requests,
            completed_total: now.attempts.requests,
            answered: attempts.answered,
            ok: attempts.ok,
            errors: now.errors.since(&prev.errors),
            rps: round3(attempts.answered as f64 / interval_s.max(1e-9)),
            open_connections: now.open_connections.max(0),
            traffic: now.traffic.since(&prev.traffic),
            events: now.events.received - prev.events.received,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_lines_are_deltas() {
        let attempts = |requests, answered, ok| crate::stats::Attempts {
            requests,
            answered,
            ok,
            started: requests,
        };
        let prev = Snapshot {
            attempts: attempts(10, 9, 9),
            ..Default::default()
        };
        let mut now = Snapshot {
            attempts: attempts(30, 25, 24),
            ..Default::default()
        };
        now.events.received = 4;
        now.traffic.bytes_read = 300;
        let line = IntervalLine::between(&prev, &now, 2.0, 1.0);
        assert_eq!(
            (line.completed, line.completed_total, line.ok),
            (20, 30, 15)
        );
        assert_eq!((line.answered, line.rps), (16, 16.0));
        assert_eq!((line.events, line.traffic.bytes_read), (4, 300));
    }
}
