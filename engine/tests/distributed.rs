//! What a run split over several generators needs of each engine, with engine processes
//! side by side on loopback: one start instant, interleaved schedules, and `--merge` adding
//! their outputs up exactly.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{perf_server, read_request, serve, unix_ms, PERF_BODY};
use serde_json::{json, Value};
use serverlab_load::report::{decode_histogram, Percentiles};
use tokio::io::AsyncWriteExt;

/// How late past its instant a start may be: a sleeping thread wakes within tens of
/// microseconds, but on a shared 2-core machine the scheduler may hold a runnable thread for
/// a few milliseconds more; a start that ignored its instant would be 1.5 s early.
const START_SLACK_MS: f64 = 50.0;

fn engine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_serverlab-load"))
}

/// A scratch directory of this test process, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("serverlab-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts an engine on a plan file; its `--json` output is read by `finish`.
fn start(scratch: &Scratch, name: &str, plan: &Value) -> Child {
    let path = scratch.write(&format!("{name}.json"), &plan.to_string());
    engine()
        .args(["--plan", &path, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The engine's output lines, once it exited 0.
fn finish(child: Child) -> Vec<Value> {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::json_lines(&out.stdout)
}

/// Arrivals at a server: when each request was read (ms on this host's clock) and the value
/// of its `X-Gen` header.
type Arrivals = Arc<Mutex<Vec<(f64, String)>>>;

/// A server answering every request with the /perf body and noting its arrival.
fn noting_server() -> (common::TestServer, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    let noted = arrivals.clone();
    let server = serve(move |mut stream, _| {
        let noted = noted.clone();
        async move {
            while let Some((head, _)) = read_request(&mut stream).await {
                let now = now_ms();
                let gen = head
                    .lines()
                    .find_map(|l| l.strip_prefix("X-Gen: "))
                    .unwrap_or_default();
                noted.lock().unwrap().push((now, gen.to_string()));
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{PERF_BODY}",
                    PERF_BODY.len()
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    });
    (server, arrivals)
}

#[test]
fn engines_given_one_start_instant_begin_at_it() {
    let (server, arrivals) = noting_server();
    let scratch = Scratch::new("start-at");
    let start_at_ms = unix_ms() + 1_500;
    let plan = |gen: &str| {
        json!({"target": server.url("/perf"), "requests": 20, "connections": 1,
            "threads": 1, "headers": [format!("X-Gen: {gen}")], "start_at_ms": start_at_ms})
    };
    let children = [
        start(&scratch, "a", &plan("a")),
        start(&scratch, "b", &plan("b")),
    ];
    let summaries: Vec<Value> = children
        .into_iter()
        .map(|c| finish(c).pop().unwrap())
        .collect();
    let start_at = start_at_ms as f64;
    for s in &summaries {
        assert_eq!(s["requests"], 20);
        assert_eq!(s["start_late_ms"], 0.0, "{s}");
        let began = s["started_at_ms"].as_f64().unwrap();
        assert!(
            began >= start_at - 0.01,
            "began {} ms early",
            start_at - began
        );
        assert!(
            began < start_at + START_SLACK_MS,
            "began {} ms late",
            began - start_at
        );
    }
    let arrivals = arrivals.lock().unwrap();
    for gen in ["a", "b"] {
        let first = arrivals
            .iter()
            .filter(|(_, g)| g == gen)
            .map(|&(at, _)| at)
            .fold(f64::INFINITY, f64::min);
        assert!(
            first >= start_at,
            "{gen}: a request {} ms early",
            start_at - first
        );
        assert!(
            first < start_at + START_SLACK_MS,
            "{gen}: {} ms late",
            first - start_at
        );
    }
}

#[test]
fn a_start_instant_already_passed_starts_at_once_and_says_so() {
    let server = perf_server();
    let start_at_ms = unix_ms() - 5_000;
    let s = common::run_plan(json!({"target": server.url("/perf"), "requests": 10,
        "connections": 1, "start_at_ms": start_at_ms}));
    assert_eq!(s.attempts.requests, 10);
    assert!(s.start_late_ms >= 5_000.0, "{}", s.start_late_ms);
    assert!(s.start_late_ms < 6_000.0, "{}", s.start_late_ms);
    assert!(s.human().contains("after start_at_ms"));
}

#[test]
fn a_start_instant_more_than_ten_minutes_ahead_is_refused() {
    let plan = json!({"target": "http://127.0.0.1:9/", "requests": 1, "connections": 1,
        "start_at_ms": unix_ms() + 11 * 60_000});
    let mut child = engine()
        .arg("--check")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, format!("{plan}\n").as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(common::json_lines(&out.stdout)[0]["field"], "start_at_ms");
}

#[test]
fn two_open_loops_offset_by_half_a_gap_interleave_their_arrivals() {
    let (server, arrivals) = noting_server();
    let scratch = Scratch::new("offsets");
    let start_at_ms = unix_ms() + 1_000;
    // 10 arrivals/s each: a at 0, 100, 200 … ms, b at 50, 150, 250 … ms.
    let plan = |gen: &str, offset_s: f64| {
        json!({"target": server.url("/perf"), "requests": 8, "connections": 1, "threads": 1,
            "headers": [format!("X-Gen: {gen}")], "start_at_ms": start_at_ms,
            "pacer": {"kind": "open", "rate": 10.0, "offset_s": offset_s}})
    };
    let children = [
        start(&scratch, "a", &plan("a", 0.0)),
        start(&scratch, "b", &plan("b", 0.05)),
    ];
    for child in children {
        let summary = finish(child).pop().unwrap();
        assert_eq!(summary["requests"], 8);
    }
    let mut arrivals = arrivals.lock().unwrap().clone();
    arrivals.sort_by(|x, y| x.0.total_cmp(&y.0));
    let order: String = arrivals.iter().map(|(_, g)| g.as_str()).collect();
    assert_eq!(order, "ab".repeat(8));
    let first_b = arrivals[1].0 - start_at_ms as f64;
    assert!(
        (50.0..50.0 + START_SLACK_MS).contains(&first_b),
        "{first_b} ms"
    );
}

#[test]
fn users_start_after_their_offset() {
    // Each user keeps one connection: its first request arrives when the user starts.
    let firsts: Arc<Mutex<Vec<f64>>> = Arc::default();
    let noted = firsts.clone();
    let server = serve(move |mut stream, _| {
        let noted = noted.clone();
        async move {
            let mut first = true;
            while read_request(&mut stream).await.is_some() {
                if std::mem::take(&mut first) {
                    noted.lock().unwrap().push(now_ms());
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{PERF_BODY}",
                    PERF_BODY.len()
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    // The users' schedule counts from the start instant.
    let start_at_ms = unix_ms() + 300;
    let s = common::run_plan(
        json!({"target": server.url("/perf"), "start_at_ms": start_at_ms,
        "pacer": {"kind": "users", "users": 2, "ramp_up_s": 0.4, "hold_s": 0.4,
            "offset_s": 0.3}}),
    );
    assert_eq!(s.start_late_ms, 0.0);
    let mut starts: Vec<f64> = firsts
        .lock()
        .unwrap()
        .iter()
        .map(|at| at - start_at_ms as f64)
        .collect();
    starts.sort_by(f64::total_cmp);
    // User 0 at 0.3 s, user 1 at 0.3 + 0.4 / 2 = 0.5 s; both stop at 0.4 + 0.4 s.
    assert_eq!(starts.len(), 2, "{starts:?}");
    for (got, want) in starts.iter().zip([300.0, 500.0]) {
        assert!(*got >= want, "{starts:?}");
        assert!(*got < want + START_SLACK_MS, "{starts:?}");
    }
    assert!(
        s.duration_s >= 0.8 && s.duration_s < 0.9,
        "{}",
        s.duration_s
    );
}

/// This host's clock in milliseconds since the epoch, to the microsecond.
fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

#[test]
fn merged_outputs_add_counts_and_histograms() {
    let server = perf_server();
    let scratch = Scratch::new("merge");
    let plan = |requests: u64| {
        json!({"target": server.url("/perf"), "requests": requests, "connections": 2,
            "interval_ms": 100})
    };
    let outputs: Vec<Vec<Value>> = [300, 500]
        .into_iter()
        .map(|n| finish(start(&scratch, &format!("run{n}"), &plan(n))))
        .collect();
    let files: Vec<String> = outputs
        .iter()
        .enumerate()
        .map(|(i, lines)| {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            scratch.write(&format!("generator-{i}.jsonl"), &text)
        })
        .collect();
    let out = engine()
        .arg("--merge")
        .args(&files)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = common::json_lines(&out.stdout);
    let summary = merged.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["generators"], 2);
    assert_eq!(summary["requests"], 800);
    assert_eq!(summary["ok"], 800);
    let mut both =
        decode_histogram(outputs[0].last().unwrap()["histogram"].as_str().unwrap()).unwrap();
    both.add(decode_histogram(outputs[1].last().unwrap()["histogram"].as_str().unwrap()).unwrap())
        .unwrap();
    let latency: Percentiles = serde_json::from_value(summary["latency_us"].clone()).unwrap();
    assert_eq!(latency, Percentiles::of(&both));
    assert_eq!(latency.count, 800);
    let intervals = merged.iter().filter(|l| l["type"] == "interval").count();
    let longest = outputs
        .iter()
        .map(|o| o.iter().filter(|l| l["type"] == "interval").count())
        .max();
    assert_eq!(Some(intervals), longest);
    let human = engine().arg("--merge").args(&files).output().unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("2 generators") && text.contains("800 answered of 800 attempts"),
        "{text}"
    );
}

#[test]
fn a_malformed_or_missing_file_is_one_line_and_exit_2() {
    let scratch = Scratch::new("merge-bad");
    let broken = scratch.write(
        "broken.jsonl",
        "{\"type\": \"interval\", \"elapsed_s\": 1}\n",
    );
    let missing = scratch.0.join("missing.jsonl");
    for file in [broken.as_str(), missing.to_str().unwrap()] {
        let out = engine().args(["--merge", file]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(file), "{err}");
    }
    let out = engine()
        .args(["--merge", &broken, "-c", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--merge runs nothing");
}
