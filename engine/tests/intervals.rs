//! Interval lines' timings: each interval's latency (and push event delay) percentiles, read
//! from that interval's samples alone, against servers whose answers take a known time.

mod common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{delivery_created, read_request, serve, unix_ms, write_json_answer};
use serde_json::{json, Value};
use serverlab_load::{EmitLine, IntervalLine, Plan};

/// Every answer is written this long after its request was read.
const ANSWER_DELAY: Duration = Duration::from_millis(30);

/// Every pushed event is stamped as created this long before it is written.
const EVENT_AGE_MS: u64 = 40;

/// Runs `plan` and returns its interval lines.
fn intervals(plan: Value) -> Vec<IntervalLine> {
    intervals_and_emits(plan).0
}

/// Runs `plan` and returns its interval lines and emit lines.
fn intervals_and_emits(plan: Value) -> (Vec<IntervalLine>, Vec<EmitLine>) {
    let plan = Plan::from_value(plan).unwrap().validate().unwrap();
    let mut lines = Vec::new();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let outcome = serverlab_load::run_with(plan, &stop, |l| lines.push(l.clone())).unwrap();
    (lines, outcome.emits)
}

/// How many samples an interval histogram holds.
fn count(text: &str) -> u64 {
    serverlab_load::report::decode_histogram(text)
        .unwrap()
        .len()
}

#[test]
fn each_interval_reads_its_latency_from_the_answers_it_holds_of_a_slow_server() {
    let server = serve(|mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            tokio::time::sleep(ANSWER_DELAY).await;
            if write_json_answer(&mut stream, "{}").await.is_err() {
                return;
            }
        }
    });
    let connections = 2;
    let lines = intervals(json!({"target": server.url("/slow"), "duration_s": 1.2,
        "interval_ms": 300, "connections": connections, "threads": 1}));
    assert!(lines.len() >= 3, "{} lines", lines.len());
    let floor = ANSWER_DELAY.as_micros() as u64;
    for line in &lines {
        let (p50, p99) = (line.latency_p50_us.unwrap(), line.latency_p99_us.unwrap());
        // No answer comes sooner than the server's delay, so neither does any percentile.
        assert!(floor <= p50 && p50 <= p99, "{line:?}");
        // The window holds this interval's answers only: an answer is timed a moment before
        // it is counted, so a tick between the two moves at most one per connection.
        let held = count(&line.latency_histogram);
        assert!(
            held.abs_diff(line.answered) <= connections,
            "{held} vs {line:?}"
        );
        assert_eq!(line.event_delay_p50_us, None);
    }
}

/// A long-poll server answering each request 20 ms after it came with the next seq, stamped
/// `EVENT_AGE_MS` old.
fn aged_push_server() -> common::TestServer {
    let answered = Arc::new(AtomicU64::new(0));
    serve(move |mut stream, _| {
        let counter = answered.clone();
        async move {
            while read_request(&mut stream).await.is_some() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let seq = counter.fetch_add(1, SeqCst) + 1;
                let answer = delivery_created(seq, unix_ms() - EVENT_AGE_MS);
                if write_json_answer(&mut stream, &answer).await.is_err() {
                    return;
                }
            }
        }
    })
}

#[test]
fn each_interval_reads_its_push_delay_from_the_events_it_received() {
    let server = aged_push_server();
    let lines = intervals(json!({"target": server.url("/push"), "duration_s": 1.2,
        "interval_ms": 300, "connections": 1, "threads": 1,
        "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 50}}));
    assert!(lines.len() >= 3, "{} lines", lines.len());
    for line in &lines {
        let (p50, p99) = (
            line.event_delay_p50_us.unwrap(),
            line.event_delay_p99_us.unwrap(),
        );
        assert!(EVENT_AGE_MS * 1000 <= p50 && p50 <= p99, "{line:?}");
        let held = count(&line.event_delay_histogram);
        assert!(held.abs_diff(line.events) <= 1, "{held} vs {line:?}");
    }
}

#[test]
fn each_interval_lists_the_cycles_it_received_and_they_add_up_to_the_emit_lines() {
    let server = aged_push_server();
    let (lines, emits) = intervals_and_emits(json!({"target": server.url("/push"),
        "duration_s": 1.2, "interval_ms": 300, "connections": 2, "threads": 1,
        "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 50}}));
    assert!(lines.len() >= 3, "{} lines", lines.len());
    let mut so_far = std::collections::BTreeMap::new();
    for line in &lines {
        assert!(
            !line.cycles.is_empty() && line.cycles_unlisted == 0,
            "{line:?}"
        );
        let listed: u64 = line.cycles.iter().map(|c| c.received).sum();
        // Counted a moment apart from the window, like the timings: one per connection.
        assert!(listed.abs_diff(line.events) <= 2, "{listed} vs {line:?}");
        for cycle in &line.cycles {
            assert_eq!((cycle.event.as_str(), cycle.total), ("e1", 1));
            assert!(cycle.max_delay_us >= EVENT_AGE_MS * 1000, "{cycle:?}");
            *so_far.entry(cycle.seq).or_insert(0) += cycle.received;
        }
    }
    // Deliveries the run received after its last line (none in a run of whole intervals)
    // are the emit lines' only; every seq a line listed has its whole count there.
    for emit in &emits {
        if let Some(&listed) = so_far.get(&emit.seq) {
            assert_eq!(listed, emit.received, "seq {}", emit.seq);
        }
    }
    assert_eq!(so_far.len(), emits.len(), "every cycle received was listed");
}
