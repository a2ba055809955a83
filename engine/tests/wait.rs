//! The wait of the socket loops: spinning when asked, on either loop (its CPU reported
//! apart), sleeping when asked, and `auto` refusing to spin without a CPU to itself; the
//! reading delay of latency-bound plans on the epoll loop, new connections included.

mod common;

use std::process::{Child, Command};

use common::{json_lines, perf_server, run_plan, ServerStats};
use serde_json::json;

#[test]
fn a_spinning_sequential_run_reports_its_spin_apart_from_its_work_on_either_loop() {
    let server = perf_server();
    // `auto` spins on epoll; the ring spins when the plan asks for it.
    for (io, ran) in [("auto", "epoll"), ("io_uring", "io_uring")] {
        for close in ["server", "client"] {
            let what = format!("{io}, close {close}");
            let s = run_plan(json!({"target": server.url("/perf"), "requests": 300,
                "pacer": {"kind": "sequential"}, "io": io, "wait": "spin",
                "behaviour": {"kind": "new-connection", "close": close}}));
            assert_eq!((s.attempts.requests, s.attempts.ok), (300, 300), "{what}");
            assert_eq!(s.io_backend, ran, "{what}");
            assert_eq!(
                (s.wait.as_str(), s.wait_reason.as_str()),
                ("spin", "asked (--wait spin)"),
                "{what}"
            );
            assert!(s.spin_cpu_s > 0.0, "{what}: a spinning loop spins");
            assert!(
                s.spin_cpu_s <= s.client_cpu_s + 0.01,
                "{what}: spinning is part of the engine's CPU: {} of {}",
                s.spin_cpu_s,
                s.client_cpu_s
            );
            // Every connection of a latency-bound plan is stamped: new connections are
            // measured.
            assert!(
                s.timings.notice_us.count > 0,
                "{what}: no reading delay measured"
            );
            let floor = s.floor_us.expect("a run with requests has a floor");
            let own = (s.client_cpu_s - s.spin_cpu_s) * 1e6 / 300.0;
            assert!(
                floor >= own - 0.01,
                "{what}: floor {floor} below own CPU {own}"
            );
        }
    }
    assert_eq!(ServerStats::get(&server.stats.connections), 4 * 300);
}

#[test]
fn a_sleeping_run_spins_not_at_all() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "requests": 200,
        "connections": 1, "wait": "sleep", "io": "epoll"}));
    assert_eq!((s.attempts.requests, s.attempts.ok), (200, 200));
    assert_eq!(
        (s.wait.as_str(), s.wait_reason.as_str()),
        ("sleep", "asked (--wait sleep)")
    );
    assert_eq!(s.spin_cpu_s, 0.0);
    assert!(
        s.timings.notice_us.count > 0,
        "a single connection is latency-bound: stamped"
    );
}

#[test]
fn a_keepalive_spin_takes_the_epoll_loop() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "requests": 200,
        "connections": 1, "wait": "spin"}));
    assert_eq!((s.attempts.requests, s.io_backend.as_str()), (200, "epoll"));
    assert_eq!(s.wait, "spin");
}

#[test]
fn auto_does_not_spin_for_plans_that_are_not_latency_bound() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "requests": 200,
        "connections": 20, "io": "epoll"}));
    assert_eq!(
        (s.wait.as_str(), s.wait_reason.as_str()),
        ("sleep", "not latency-bound")
    );
    assert_eq!(s.spin_cpu_s, 0.0);
    assert_eq!(
        s.timings.notice_us.count, 0,
        "only latency-bound plans are stamped on epoll"
    );
}

/// The summary of a sequential run of the engine as a process of its own, under
/// `taskset -c CPUS`.
fn engine_summary(url: &str, cpus: &str) -> serde_json::Value {
    let out = Command::new("taskset")
        .args(["-c", cpus, env!("CARGO_BIN_EXE_serverlab-load")])
        .args([url, "--sequential", "-n", "20", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    json_lines(&out.stdout).pop().unwrap()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn auto_does_not_spin_on_a_cpu_it_shares() {
    let server = perf_server();
    let url = server.url("/perf");
    // Pinned to every CPU is not pinned: no CPU of its own.
    let all = format!(
        "0-{}",
        std::thread::available_parallelism().unwrap().get() - 1
    );
    let s = engine_summary(&url, &all);
    assert_eq!(s["wait"], "sleep");
    assert_eq!(
        s["wait_reason"],
        "latency-bound, but it is not pinned to a subset of the CPUs"
    );
    if std::thread::available_parallelism().unwrap().get() < 2 {
        return;
    }
    // Pinned to CPU 0 beside another process pinned there (as a server would be).
    let _neighbour = Killed(
        Command::new("taskset")
            .args(["-c", "0", "sleep", "30"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let s = engine_summary(&url, "0");
    assert_eq!(s["wait"], "sleep");
    let reason = s["wait_reason"].as_str().unwrap();
    assert!(reason.contains("is pinned to its CPUs too"), "{reason}");
    assert_eq!(s["requests"], 20);
}
