//! Output: the interval line, made from two snapshots. The counts it shares with the summary
//! (errors by kind, traffic) are declared once, with their names, in `crate::metrics`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use hdrhistogram::Histogram;

use crate::emits::CycleTick;
use crate::hdr::{decode_histogram, encode_histogram};
use crate::stats::{round3, Errors, Snapshot, Traffic, Window};

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
    /// Median latency (the summary's `latency_us` timing) of the attempts answered in this
    /// interval, µs, read exactly from their HdrHistogram; null when none was answered.
    pub latency_p50_us: Option<u64>,
    /// 99th percentile of the same latencies, µs; null when none was answered.
    pub latency_p99_us: Option<u64>,
    /// Push: median delay (the summary's `event_delay_us` timing) of the events received in
    /// this interval, µs; null when none was received.
    pub event_delay_p50_us: Option<u64>,
    /// Push: 99th percentile of the same delays, µs; null when none was received.
    pub event_delay_p99_us: Option<u64>,
    /// This interval's latencies as HdrHistogram V2 + DEFLATE, base64 (the summary's
    /// encoding), so that `--merge` adds generators' intervals exactly.
    pub latency_histogram: String,
    /// This interval's push event delays in the same encoding.
    pub event_delay_histogram: String,
    /// Push: the emit cycles whose deliveries this interval received, by seq then event, at
    /// most the newest 256 seqs (each cycle's deliveries so far: its `received` added over
    /// the lines so far).
    pub cycles: Vec<CycleTick>,
    /// Push: deliveries received in this interval of cycles left off `cycles` (more seqs
    /// than it lists).
    pub cycles_unlisted: u64,
    /// A plan with client groups: each group's own line for this interval, by name (the
    /// counts above are every group's together). Absent without groups.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, IntervalLine>,
}

impl IntervalLine {
    /// The line of the interval from `prev` to `now`, whose timings are `window`.
    pub fn between(
        prev: &Snapshot,
        now: &Snapshot,
        elapsed_s: f64,
        interval_s: f64,
        window: &Window,
    ) -> Self {
        let attempts = now.attempts.since(&prev.attempts);
        let mut line = IntervalLine {
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
            latency_p50_us: None,
            latency_p99_us: None,
            event_delay_p50_us: None,
            event_delay_p99_us: None,
            latency_histogram: String::new(),
            event_delay_histogram: String::new(),
            cycles: Vec::new(),
            cycles_unlisted: 0,
            groups: BTreeMap::new(),
        };
        line.set_window(window);
        line
    }

    /// Sets the line's timings (percentiles and encoded histograms) from `window`.
    pub fn set_window(&mut self, window: &Window) {
        (self.latency_p50_us, self.latency_p99_us) = p50_p99(&window.latency);
        (self.event_delay_p50_us, self.event_delay_p99_us) = p50_p99(&window.event_delay);
        self.latency_histogram = encode_histogram(&window.latency);
        self.event_delay_histogram = encode_histogram(&window.event_delay);
        self.cycles = window.cycles.ticks();
        self.cycles_unlisted = window.cycles.unlisted;
    }

    /// The line's timings, decoded from its histograms, added into `window`.
    pub fn add_window_into(&self, window: &mut Window) -> Result<(), String> {
        let decode =
            |text: &str, what: &str| decode_histogram(text).map_err(|e| format!("{what}: {e}"));
        let latency = decode(&self.latency_histogram, "latency_histogram")?;
        let delay = decode(&self.event_delay_histogram, "event_delay_histogram")?;
        let adding = |into: &mut Histogram<u64>, h: &Histogram<u64>| {
            into.add(h)
                .map_err(|e| format!("histograms differ in bounds: {e:?}"))
        };
        adding(&mut window.latency, &latency)?;
        adding(&mut window.event_delay, &delay)?;
        window
            .cycles
            .absorb(self.cycles.iter().cloned(), self.cycles_unlisted);
        Ok(())
    }
}

/// Where a run's warm-up phase ended and its measured window began (`warmup_max_s`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WarmupEnd {
    /// Seconds since the run started: the warm-up's length, a whole number of intervals.
    pub elapsed_s: f64,
    /// The same instant on this host's clock, Unix milliseconds.
    pub unix_ms: f64,
    /// What ended it: `request` (a `measure` line on stdin) or `cap` (`warmup_max_s` passed).
    pub by: String,
}

/// A client group's window in the run, as planned: its figures cover this span only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupWindow {
    /// When its clients started, seconds after the run's start.
    pub start_s: f64,
    /// When its clients stopped, seconds after the run's start.
    pub stop_s: f64,
}

/// Printed once, at the interval boundary where a warm-up phase ends. The interval lines
/// after it belong to the measured window: their `elapsed_s` and `_total` counts start
/// there, as the summary's figures do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasureLine {
    /// Always `"measure"`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(flatten)]
    pub end: WarmupEnd,
}

fn p50_p99(h: &Histogram<u64>) -> (Option<u64>, Option<u64>) {
    if h.is_empty() {
        return (None, None);
    }
    (
        Some(h.value_at_quantile(0.5)),
        Some(h.value_at_quantile(0.99)),
    )
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
        let line = IntervalLine::between(&prev, &now, 2.0, 1.0, &Window::default());
        assert_eq!(
            (line.completed, line.completed_total, line.ok),
            (20, 30, 15)
        );
        assert_eq!((line.answered, line.rps), (16, 16.0));
        assert_eq!((line.events, line.traffic.bytes_read), (4, 300));
        assert_eq!((line.latency_p50_us, line.event_delay_p99_us), (None, None));
    }

    #[test]
    fn interval_percentiles_are_read_from_the_window_and_round_trip_its_histogram() {
        let mut window = Window::default();
        for us in 1..=100u64 {
            crate::hdr::record_us(&mut window.latency, us * 1000);
        }
        crate::hdr::record_us(&mut window.event_delay, 7000);
        let nothing = Snapshot::default();
        let line = IntervalLine::between(&nothing, &nothing, 1.0, 1.0, &window);
        let near = |v: Option<u64>, want: u64| v.is_some_and(|v| v.abs_diff(want) <= want / 500);
        assert!(
            near(line.latency_p50_us, 50_000),
            "{:?}",
            line.latency_p50_us
        );
        assert!(
            near(line.latency_p99_us, 99_000),
            "{:?}",
            line.latency_p99_us
        );
        assert!(near(line.event_delay_p50_us, 7000));
        let mut back = Window::default();
        line.add_window_into(&mut back).unwrap();
        assert_eq!((back.latency.len(), back.event_delay.len()), (100, 1));
        assert_eq!(
            back.latency.value_at_quantile(0.5),
            window.latency.value_at_quantile(0.5)
        );
    }
}
