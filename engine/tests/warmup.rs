//! A plan with a warm-up phase (`warmup_max_s`): one run whose measured window follows the
//! warm-up on the same connections, at an interval boundary, with the summary's counts and
//! timings its own.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{read_request, serve, write_json_answer};
use serde_json::json;
use serverlab_load::{Controls, IntervalLine, Line, MeasureLine, Outcome, Plan};

/// The server's first answers take this long; the rest are immediate.
const SLOW_ANSWER: Duration = Duration::from_millis(30);
const SLOW_ANSWERS: u64 = 6;
const CONNECTIONS: u64 = 2;

/// A run's lines in order: interval lines, and the measure line where it came.
#[derive(Default)]
struct Lines {
    warmup: Vec<IntervalLine>,
    measure: Option<MeasureLine>,
    measured: Vec<IntervalLine>,
}

fn run(plan: serde_json::Value, measure: bool) -> (Outcome, Lines) {
    let plan = Plan::from_value(plan).unwrap().validate().unwrap();
    let (stop, asked) = (AtomicBool::new(false), AtomicBool::new(measure));
    let controls = Controls {
        stop: &stop,
        measure: &asked,
    };
    let mut lines = Lines::default();
    let outcome = serverlab_load::run_controlled(plan, &controls, |line| match line {
        Line::Interval(l) if lines.measure.is_none() => lines.warmup.push(l.clone()),
        Line::Interval(l) => lines.measured.push(l.clone()),
        Line::Measure(m) => lines.measure = Some(m.clone()),
        Line::Emit(_) => {}
    })
    .unwrap();
    (outcome, lines)
}

/// A server whose first `SLOW_ANSWERS` answers wait `SLOW_ANSWER`: a server warming up.
fn warming_server() -> common::TestServer {
    let served = Arc::new(AtomicU64::new(0));
    serve(move |mut stream, _| {
        let served = served.clone();
        async move {
            while read_request(&mut stream).await.is_some() {
                if served.fetch_add(1, SeqCst) < SLOW_ANSWERS {
                    tokio::time::sleep(SLOW_ANSWER).await;
                }
                if write_json_answer(&mut stream, "{}").await.is_err() {
                    return;
                }
            }
        }
    })
}

#[test]
fn a_warm_up_that_reaches_its_cap_is_left_out_of_the_summary() {
    let server = warming_server();
    let (outcome, lines) = run(
        json!({"target": server.url("/perf"), "duration_s": 0.75, "interval_ms": 250,
            "warmup_max_s": 0.5, "connections": CONNECTIONS, "threads": 1}),
        false,
    );
    let summary = &outcome.summary;
    let measure = lines.measure.expect("a measure line");
    assert_eq!(
        (measure.end.by.as_str(), measure.end.elapsed_s),
        ("cap", 0.5)
    );
    assert_eq!(summary.warmup.as_ref(), Some(&measure.end));
    assert_eq!(lines.warmup.len(), 2, "two warm-up intervals of 0.25 s");
    assert!(lines.warmup.iter().map(|l| l.answered).sum::<u64>() >= SLOW_ANSWERS);
    // The measured window's lines count from its start, as the summary does.
    let elapsed: Vec<f64> = lines.measured.iter().map(|l| l.elapsed_s).collect();
    assert_eq!(elapsed, [0.25, 0.5, 0.75]);
    assert_eq!(summary.duration_s, 0.75);
    assert_eq!(
        summary.traffic.connections_opened, 0,
        "the measured window goes on over the warm-up's connections"
    );
    assert_eq!(summary.started_at_ms, measure.end.unix_ms);
    let in_lines: u64 = lines.measured.iter().map(|l| l.answered).sum();
    let last = lines.measured.last().unwrap();
    assert_eq!(
        last.completed_total, in_lines,
        "totals start with the window"
    );
    // Answers still in flight at the last line's end are counted once they arrive.
    let answered = summary.attempts.answered;
    assert!(
        (in_lines..=in_lines + CONNECTIONS).contains(&answered),
        "{answered} vs {in_lines}"
    );
    // The slow answers were all in the warm-up: no timing of the summary holds one. (An
    // answer is timed a moment before it is counted, so the boundary moves at most one per
    // connection between the two.)
    let timed = summary.timings.latency_us.count;
    assert!(
        timed.abs_diff(answered) <= CONNECTIONS,
        "{timed} timed, {answered} answered"
    );
    assert!(
        summary.timings.latency_us.max < SLOW_ANSWER.as_micros() as u64,
        "{:?}",
        summary.timings.latency_us
    );
}

#[test]
fn a_measure_request_ends_the_warm_up_at_the_next_interval_boundary() {
    let server = warming_server();
    let (outcome, lines) = run(
        json!({"target": server.url("/perf"), "duration_s": 0.5, "interval_ms": 250,
            "warmup_max_s": 30.0, "connections": CONNECTIONS, "threads": 1}),
        true,
    );
    let measure = lines.measure.expect("a measure line");
    assert_eq!(
        (measure.end.by.as_str(), measure.end.elapsed_s),
        ("request", 0.25)
    );
    assert_eq!(lines.warmup.len(), 1);
    assert_eq!(lines.measured.len(), 2);
    assert_eq!(outcome.summary.duration_s, 0.5, "the cap never ran");
}

#[test]
fn a_plan_without_a_warm_up_has_no_measure_line() {
    let server = warming_server();
    let (outcome, lines) = run(
        json!({"target": server.url("/perf"), "duration_s": 0.5, "interval_ms": 250,
            "connections": CONNECTIONS, "threads": 1}),
        true,
    );
    assert!(lines.measure.is_none());
    assert_eq!(outcome.summary.warmup, None);
    assert!(outcome.summary.timings.latency_us.max >= SLOW_ANSWER.as_micros() as u64);
}

#[test]
fn a_spinning_run_counts_only_the_measured_windows_spin() {
    let server = warming_server();
    let (outcome, _) = run(
        json!({"target": server.url("/perf"), "duration_s": 0.5, "interval_ms": 250,
            "warmup_max_s": 1.0, "connections": 1, "threads": 1, "wait": "spin"}),
        false,
    );
    let s = &outcome.summary;
    assert_eq!(s.wait, "spin");
    // One thread cannot spin longer than the window it is counted over (a second of warm-up
    // spinning before it is not the measurement's).
    assert!(
        s.spin_cpu_s <= s.duration_s,
        "{} s spun in a {} s window",
        s.spin_cpu_s,
        s.duration_s
    );
}
