//! The golden JSON Lines: fixed plans run by the binary against this suite's own servers,
//! their output normalised (timings, CPU, ports and the machine's wait choice become fixed
//! tokens; counts stay) and compared with `tests/golden/output.jsonl`. Each line also lists
//! its keys in the order they were printed, so a renamed, moved or dropped field fails as
//! surely as a changed count. A deliberate output change regenerates the file with
//! `SERVERLAB_GOLDEN_WRITE=1 cargo test --release --test golden` and bumps `OUTPUT_VERSION`.
//! `SERVERLAB_GOLDEN_ENGINE=PATH` runs another build of the binary instead of this one: the
//! file was written that way from the engine as it was before the refactor it guards.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use common::{delivery, read_request, serve, write_json_answer, TIMEOUT_ANSWER};
use serde_json::{json, Value};

/// Summary fields that measure time, CPU or the clock: kept as a type, not a value.
const TIMED: [&str; 12] = [
    "duration_s",
    "rps",
    "intended_rate",
    "achieved_rate",
    "client_cpu_s",
    "client_cpu_user_s",
    "client_cpu_system_s",
    "spin_cpu_s",
    "floor_us",
    "started_at_ms",
    "start_late_ms",
    "clock_offset_ms",
];

/// What the machine decides (the wait: CPUs watched for a moment before the run).
const MACHINE: [&str; 2] = ["wait", "wait_reason"];

/// Timings that are sampled, so even their count depends on the machine.
const SAMPLED: [&str; 2] = ["notice_us", "notice_histogram"];

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/output.jsonl")
}

/// Runs `plan` with `--plan FILE --json`; returns its stdout lines.
fn run_plan_file(name: &str, plan: Value) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("serverlab-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, plan.to_string()).unwrap();
    let engine = std::env::var_os("SERVERLAB_GOLDEN_ENGINE").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_serverlab-load")),
        PathBuf::from,
    );
    let out = Command::new(engine)
        .args(["--plan", path.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(out.status.success(), "{name}: {:?}", out.status);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every object key of a JSON text, in the order printed (nested keys included).
fn keys_in_order(text: &str) -> Vec<String> {
    let (mut keys, mut chars) = (Vec::new(), text.chars().peekable());
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => s.extend(chars.next()),
                '"' => break,
                c => s.push(c),
            }
        }
        if chars.peek() == Some(&':') {
            keys.push(s);
        }
    }
    keys
}

fn zero_numbers(v: &mut Value) {
    match v {
        Value::Number(_) => *v = json!(0),
        Value::Array(items) => items.iter_mut().for_each(zero_numbers),
        Value::Object(map) => map.values_mut().for_each(zero_numbers),
        _ => {}
    }
}

/// `127.0.0.1:PORT` in any string of `v`.
fn hide_ports(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("127.0.0.1:") => {
            let at = s.find("127.0.0.1:").unwrap() + "127.0.0.1:".len();
            let end = s[at..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(s.len(), |e| at + e);
            s.replace_range(at..end, "PORT");
        }
        Value::Array(items) => items.iter_mut().for_each(hide_ports),
        Value::Object(map) => map.values_mut().for_each(hide_ports),
        _ => {}
    }
}

/// A summary with its counts kept and its timings reduced to their shape.
fn normalise_summary(summary: &mut Value) {
    let map = summary.as_object_mut().unwrap();
    for (key, value) in map.iter_mut() {
        let key = key.as_str();
        if TIMED.contains(&key) && value.is_number() {
            *value = json!(0);
        } else if MACHINE.contains(&key) || SAMPLED.contains(&key) {
            *value = json!("<machine>");
        } else if key.ends_with("_us") && value.is_object() {
            let count = value["count"].clone();
            zero_numbers(value);
            value["count"] = count;
        } else if key.ends_with("histogram") {
            let text = value.as_str().unwrap();
            let h = serverlab_load::report::decode_histogram(text).unwrap();
            *value = json!(format!("hdr:{}", h.len()));
        }
    }
}

/// One output line as the golden file holds it: its keys in order, and its normalised value.
fn normalise(line: &str, keep_counts: bool) -> Value {
    let mut value: Value = serde_json::from_str(line).unwrap();
    hide_ports(&mut value);
    match value["type"].as_str() {
        Some("summary") if keep_counts => normalise_summary(&mut value),
        Some("emit") => {
            for key in ["created_ms", "duration_ms", "places"] {
                zero_numbers(&mut value[key]);
            }
            for key in ["first_arrival_ms", "last_arrival_ms"] {
                value[key] = json!(value[key].is_number());
            }
            // Whether the kernel stamped a read depends on the machine.
            for key in ["drain_us", "drain_samples"] {
                value[key] = json!("<machine>");
            }
            let text = value["delay_histogram"].as_str().unwrap();
            let h = serverlab_load::report::decode_histogram(text).unwrap();
            value["delay_histogram"] = json!(format!("hdr:{}", h.len()));
        }
        _ => {
            let kind = value["type"].clone();
            zero_numbers(&mut value);
            value["type"] = kind;
            hide_interval_timings(&mut value);
        }
    }
    json!({"keys": keys_in_order(line).join(","), "line": value})
}

/// An interval line's timings (percentiles, or null when the interval had none, and their
/// histograms): which interval holds which answer depends on the machine.
fn hide_interval_timings(line: &mut Value) {
    let Some(map) = line.as_object_mut() else {
        return;
    };
    for (key, value) in map.iter_mut() {
        if key.ends_with("_histogram") || key.ends_with("_p50_us") || key.ends_with("_p99_us") {
            *value = json!("<timing>");
        }
    }
}

/// A long-poll server whose every third answer is a timeout: 2 events in 3 answers.
fn longpoll_server() -> common::TestServer {
    let answered = Arc::new(AtomicU64::new(0));
    serve(move |mut stream, _| {
        let counter = answered.clone();
        async move {
            while read_request(&mut stream).await.is_some() {
                let n = counter.fetch_add(1, SeqCst) + 1;
                let answer = if n.is_multiple_of(3) {
                    TIMEOUT_ANSWER.to_string()
                } else {
                    delivery(n)
                };
                if write_json_answer(&mut stream, &answer).await.is_err() {
                    return;
                }
            }
        }
    })
}

/// The fixed plans, each with its name and whether its counts are fixed too.
fn plans() -> Vec<(&'static str, Value, bool)> {
    let perf = common::perf_server().url("/perf");
    let push = longpoll_server().url("/push");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = format!("http://{}/perf", closed.local_addr().unwrap());
    drop(closed);
    let keepalive = |io: &str| json!({"target": perf, "requests": 30, "connections": 2, "threads": 1, "io": io});
    vec![
        ("keepalive-io_uring", keepalive("io_uring"), true),
        ("keepalive-epoll", keepalive("epoll"), true),
        (
            "refused",
            json!({"target": refused, "requests": 10, "connections": 1, "threads": 1}),
            true,
        ),
        (
            "longpoll",
            json!({"target": push, "requests": 30, "connections": 1, "threads": 1,
            "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 50}}),
            true,
        ),
        // Interval lines: their counts depend on timing, so only their shape is kept.
        (
            "intervals",
            json!({"target": perf, "duration_s": 0.25, "interval_ms": 100,
            "connections": 1, "threads": 1}),
            false,
        ),
    ]
}

fn golden_lines() -> Vec<String> {
    let mut out = Vec::new();
    for (name, plan, keep_counts) in plans() {
        let lines = run_plan_file(name, plan);
        let chosen: Vec<&String> = if keep_counts {
            lines.iter().collect()
        } else {
            lines.iter().take(1).collect()
        };
        for line in chosen {
            let mut value = normalise(line, keep_counts);
            value["plan"] = json!(name);
            out.push(value.to_string());
        }
    }
    out
}

#[test]
fn output_matches_the_golden_json_lines() {
    let got = golden_lines();
    let path = golden_path();
    if std::env::var_os("SERVERLAB_GOLDEN_WRITE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got.join("\n") + "\n").unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).expect("tests/golden/output.jsonl is committed");
    let want: Vec<&str> = want.lines().collect();
    for (index, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "golden line {} differs", index + 1);
    }
    assert_eq!(got.len(), want.len(), "golden line count differs");
}
