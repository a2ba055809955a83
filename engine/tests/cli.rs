//! The binary: exit codes, JSON Lines output, and the committed output schema.

mod common;

use std::process::Command;

fn engine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_serverlab-load"))
}

#[test]
fn off_loopback_targets_exit_2() {
    let out = engine()
        .args(["http://10.1.2.3:80/", "-n", "1", "-c", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loopback"), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line reason: {err}");
}

#[test]
fn contradictory_flags_exit_2() {
    let out = engine()
        .args(["http://127.0.0.1:9/", "-n", "5", "-d", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A run of whole intervals has a line for each, its last too: the workers end as it falls
/// due, and it is written from their final counts (the orchestrator's steady check needs it).
#[test]
fn a_run_of_whole_intervals_has_a_line_for_each() {
    let server = common::perf_server();
    for _ in 0..3 {
        let out = engine()
            .args([&server.url("/perf"), "-c", "2", "-d", "1s"])
            .args(["--interval", "250ms", "--json"])
            .output()
            .unwrap();
        let lines = common::json_lines(&out.stdout);
        let ends: Vec<f64> = lines
            .iter()
            .filter(|l| l["type"] == "interval")
            .map(|l| l["elapsed_s"].as_f64().unwrap())
            .collect();
        assert_eq!(ends, [0.25, 0.5, 0.75, 1.0]);
    }
}

#[test]
fn json_lines_end_with_a_summary() {
    let server = common::perf_server();
    let out = engine()
        .args([
            &server.url("/perf"),
            "-c",
            "4",
            "-d",
            "1.2s",
            "--interval",
            "500ms",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines = common::json_lines(&out.stdout);
    let (last, intervals) = lines.split_last().unwrap();
    assert_eq!(last["type"], "summary");
    assert!(intervals.len() >= 2 && intervals.iter().all(|l| l["type"] == "interval"));
    let sum: u64 = intervals
        .iter()
        .map(|l| l["completed"].as_u64().unwrap())
        .sum();
    assert!(sum <= last["requests"].as_u64().unwrap());
    assert_eq!(
        last["answered"], last["requests"],
        "every attempt was answered"
    );
    assert_eq!(last["version"], serverlab_load::report::OUTPUT_VERSION);
    for key in [
        "requests",
        "errors",
        "duration_s",
        "rps",
        "intended_rate",
        "achieved_rate",
        "latency_us",
        "histogram",
        "client_cpu_s",
    ] {
        assert!(last.get(key).is_some(), "summary lacks {key}");
    }
    assert!(last["latency_us"]["p999"].as_u64().is_some());
}

#[test]
fn plan_files_run_alone() {
    let server = common::perf_server();
    let dir = std::env::temp_dir().join(format!("serverlab-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        serde_json::json!({"target": server.url("/perf"), "requests": 25}).to_string(),
    )
    .unwrap();
    let out = engine()
        .args(["--plan", path.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["requests"], 25);
    let mixed = engine()
        .args(["--plan", path.to_str().unwrap(), "-c", "5"])
        .output()
        .unwrap();
    assert_eq!(mixed.status.code(), Some(2));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A port nothing listens on (bound once, then freed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn a_run_by_hand_with_nothing_listening_says_no_answer_first_and_exits_3() {
    let url = format!("http://127.0.0.1:{}/perf", closed_port());
    let out = engine()
        .args([&url, "-c", "4", "-d", "500ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("NO ANSWER: none of "), "{text}");
    assert!(first.contains("(connect "), "{text}");
    assert!(text.contains("Requests/sec: 0.00"), "{text}");
    let json = engine()
        .args([
            &url,
            "-c",
            "4",
            "-d",
            "500ms",
            "--interval",
            "100ms",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(3));
    let lines = common::json_lines(&json.stdout);
    let (summary, intervals) = lines.split_last().unwrap();
    assert!(summary["requests"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(summary["requests"], summary["errors"]["connect"]);
    assert_eq!(
        (summary["answered"].as_u64(), summary["rps"].as_f64()),
        (Some(0), Some(0.0))
    );
    assert!(!intervals.is_empty());
    for line in intervals {
        assert_eq!(
            (line["answered"].as_u64(), line["rps"].as_f64()),
            (Some(0), Some(0.0))
        );
    }
}

#[test]
fn a_plan_file_with_nothing_listening_still_gives_its_summary_and_exits_0() {
    let dir = std::env::temp_dir().join(format!("serverlab-noanswer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    let url = format!("http://127.0.0.1:{}/perf", closed_port());
    let plan = serde_json::json!({"target": url, "requests": 30, "connections": 2});
    std::fs::write(&path, plan.to_string()).unwrap();
    let out = engine()
        .args(["--plan", path.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the orchestrator judges the summary"
    );
    let summary = last_json_line(&out.stdout);
    assert_eq!(summary["type"], "summary");
    assert_eq!(
        (summary["requests"].as_u64(), summary["answered"].as_u64()),
        (Some(30), Some(0))
    );
    assert_eq!(summary["errors"]["connect"], 30);
    assert_eq!(summary["rps"].as_f64(), Some(0.0));
    assert!(
        summary["floor_us"].is_null(),
        "no answer, no cost per answer"
    );
}

#[test]
fn committed_schema_matches_the_types() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/output.schema.json"
    ))
    .expect("schema/output.schema.json is committed (regenerate: serverlab-load --print-schema)");
    assert_eq!(
        committed,
        serverlab_load::report::output_schema(),
        "schema is stale: run `serverlab-load --print-schema > schema/output.schema.json`"
    );
}

/// The facts the orchestrator reads (`schema/facts.json`) are the ones the engine prints.
#[test]
fn committed_facts_match_the_engines_own() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/facts.json"))
            .expect("schema/facts.json is committed (regenerate: serverlab-load --print-facts)");
    assert_eq!(
        committed,
        serverlab_load::plan::engine_facts(),
        "facts are stale: run `serverlab-load --print-facts > schema/facts.json`"
    );
}

#[test]
fn descriptor_exhaustion_marks_the_run_invalid_without_hanging() {
    let server = common::perf_server();
    // Without CAP_SYS_RESOURCE the engine cannot lift the hard limit of 60 descriptors.
    let script = format!(
        "ulimit -n 60 && exec {} {} -c 200 -t 1 -n 2000 --json",
        env!("CARGO_BIN_EXE_serverlab-load"),
        server.url("/perf")
    );
    let began = std::time::Instant::now();
    let out = Command::new("setpriv")
        .args([
            "--bounding-set=-sys_resource",
            "--inh-caps=-sys_resource",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .expect("setpriv (util-linux) runs");
    assert!(began.elapsed().as_secs() < 20, "the run must not hang");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["requests"], 2000);
    assert_eq!(summary["valid"], false);
    assert!(summary["errors"]["fds_exhausted"].as_u64().unwrap() > 0);
    let reasons = summary["invalid_reasons"].to_string();
    assert!(reasons.contains("file descriptor"), "{reasons}");
}

/// Waits for the child at most `limit`; kills it and fails if it is still running.
fn wait_within(child: &mut std::process::Child, limit: std::time::Duration) {
    let began = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > limit {
            let _ = child.kill();
            panic!("the engine did not stop within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn last_json_line(text: &[u8]) -> serde_json::Value {
    common::json_lines(text).pop().expect("some output")
}

#[test]
fn sigterm_ends_the_run_early_with_a_summary() {
    use std::process::Stdio;
    let server = common::perf_server();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let mut child = engine()
            .args([&server.url("/perf"), "-c", "4", "-d", "30s", "--json"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_secs(1));
        let signalled = std::time::Instant::now();
        // SAFETY: kill only sends a signal to the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        wait_within(&mut child, std::time::Duration::from_secs(3));
        assert!(signalled.elapsed() < std::time::Duration::from_secs(3));
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "signal {signal}");
        let summary = last_json_line(&out.stdout);
        assert_eq!(summary["type"], "summary");
        assert_eq!(summary["stopped_early"], true);
        assert!(summary["requests"].as_u64().unwrap() > 0);
        assert!(summary["duration_s"].as_f64().unwrap() < 5.0);
    }
}

#[test]
fn runs_that_end_by_plan_are_not_stopped_early() {
    let server = common::perf_server();
    let out = engine()
        .args([&server.url("/perf"), "-n", "20", "-c", "2", "--json"])
        .output()
        .unwrap();
    assert_eq!(last_json_line(&out.stdout)["stopped_early"], false);
}

#[test]
fn sigterm_prints_the_human_summary_too() {
    use std::process::Stdio;
    let server = common::perf_server();
    let mut child = engine()
        .args([&server.url("/perf"), "-c", "2", "-d", "30s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_within(&mut child, std::time::Duration::from_secs(3));
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Requests/sec"), "{text}");
    assert!(text.contains("Stopped early"), "{text}");
}

#[test]
fn sigterm_drops_work_still_in_hand_after_the_grace_period() {
    use std::process::Stdio;
    let silent = common::serve(|mut stream, _| async move {
        let _ = common::read_request(&mut stream).await;
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    });
    let mut child = engine()
        .args([
            &silent.url("/push"),
            "--comet",
            "e1",
            "-c",
            "3",
            "-d",
            "30s",
            "--json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let signalled = std::time::Instant::now();
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_within(&mut child, std::time::Duration::from_secs(3));
    let waited = signalled.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(900),
        "{waited:?}"
    );
    let summary = last_json_line(&child.wait_with_output().unwrap().stdout);
    assert_eq!(summary["stopped_early"], true);
}

#[test]
fn check_judges_every_plan_on_stdin_in_one_process_and_runs_none() {
    use std::io::Write;
    // Port 9 (discard) has no listener: a check that connected would show as an error.
    let plans = concat!(
        r#"{"target": "http://127.0.0.1:9/", "duration_s": 1, "connections": 3}"#,
        "\n",
        r#"{"target": "http://127.0.0.1:9/", "requests": 5, "duration_s": 1}"#,
        "\n",
        r#"{"target": "http://10.1.2.3:9/", "requests": 5}"#,
        "\n",
    );
    let mut child = engine()
        .arg("--check")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plans.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "one refusal: exit 2");
    let verdicts = common::json_lines(&out.stdout);
    assert_eq!(verdicts.len(), 3);
    assert_eq!(verdicts[0]["ok"], true);
    assert_eq!(verdicts[0]["plan"]["connections"], 3);
    assert_eq!(
        verdicts[0]["plan"]["timeout_ms"], 10_000,
        "defaults written out"
    );
    assert_eq!(
        (&verdicts[1]["ok"], &verdicts[1]["field"]),
        (&false.into(), &"duration_s".into())
    );
    assert_eq!(verdicts[2]["field"], "target");
}

#[test]
fn check_of_flags_prints_the_plan_they_make() {
    let out = engine()
        .args(["http://127.0.0.1:9/perf", "-c", "7", "-d", "2s", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let verdict = &common::json_lines(&out.stdout)[0];
    assert_eq!(verdict["plan"]["connections"], 7);
    assert_eq!(verdict["plan"]["duration_s"], 2.0);
}

#[test]
fn a_plan_with_four_mistakes_prints_each_on_its_own_line_and_exits_2() {
    let out = engine()
        .args([
            "http://127.0.0.1:9/",
            "-d",
            "1s",
            "-c",
            "0",
            "--timeout",
            "0s",
        ])
        .args(["-H", "no colon", "--sse", "a b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("serverlab-load: plan refused: ")),
        "{stderr}"
    );
    for said in [
        "timeout must be positive",
        "connection count must be positive",
    ] {
        assert!(lines.iter().any(|l| l.ends_with(said)), "{said}: {stderr}");
    }
    assert!(
        lines.iter().any(|l| l.contains("event name \"a b\"")),
        "{stderr}"
    );
    assert!(lines.iter().any(|l| l.contains("bad header")), "{stderr}");
    assert_eq!(lines.len(), 4, "{stderr}");
}
