//! Request counts and pacing against a real hyper server on loopback.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use common::{perf_server, read_request, run_plan, serve, ServerStats, TestServer, BACKENDS};
use serde_json::json;
use tokio::io::AsyncWriteExt;

/// The server's count of accepted connections once it reaches `want`, or after 5 s.
fn accepted(server: &TestServer, want: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let count = || ServerStats::get(&server.stats.connections);
    while count() < want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    count()
}

#[test]
fn keepalive_makes_exactly_n_requests() {
    for io in BACKENDS {
        let server = perf_server();
        let s = run_plan(
            json!({"target": server.url("/perf"), "connections": 7, "requests": 1003,
            "threads": 2, "io": io}),
        );
        assert_eq!(s.io_backend, io);
        assert_eq!(s.attempts.requests, 1003);
        assert_eq!(s.attempts.ok, 1003);
        assert_eq!(s.errors.total(), 0);
        assert_eq!(ServerStats::get(&server.stats.requests), 1003);
        // The server counts a connection in the task its accept spawns, which a loaded
        // machine may run after the engine is done: wait for it, then the count is exact.
        assert_eq!(accepted(&server, 7), 7);
        assert_eq!(
            s.traffic.bytes_read % 1003,
            0,
            "every answer has the same size"
        );
        assert_eq!(s.timings.latency_us.count, 1003);
        assert!(s.valid, "{:?}", s.invalid_reasons);
    }
}

#[test]
fn new_connection_opens_one_connection_per_request() {
    for io in BACKENDS {
        let server = perf_server();
        let s = run_plan(
            json!({"target": server.url("/perf"), "connections": 5, "requests": 200,
            "behaviour": {"kind": "new-connection"}, "io": io}),
        );
        assert_eq!(s.io_backend, io);
        assert_eq!((s.attempts.requests, s.attempts.ok), (200, 200));
        assert_eq!(s.traffic.connections_opened, 200);
        assert_eq!(accepted(&server, 200), 200);
        assert_eq!(s.timings.connect_us.count, 200);
    }
}

#[test]
fn auto_picks_io_uring_for_closed_loops_only() {
    let server = perf_server();
    let closed = run_plan(json!({"target": server.url("/perf"), "requests": 20}));
    assert_eq!(closed.io_backend, "io_uring");
    let open = run_plan(json!({"target": server.url("/perf"), "requests": 20,
        "pacer": {"kind": "open", "rate": 1000.0}}));
    assert_eq!(open.io_backend, "epoll");
}

#[test]
fn sequential_is_one_connection_at_a_time() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "requests": 60,
        "pacer": {"kind": "sequential"}, "behaviour": {"kind": "new-connection"}}));
    assert_eq!(
        s.io_backend, "io_uring",
        "auto takes the ring for sequential plans"
    );
    assert_eq!(s.attempts.requests, 60);
    assert_eq!(accepted(&server, 60), 60);
    assert_eq!(server.stats.max_open.load(SeqCst), 1);
}

/// A server that answers one request saying it closes, and closes `linger` later (never,
/// for `None`: it holds the connection until the client goes).
fn closing_late(linger: Option<Duration>) -> TestServer {
    serve(move |mut stream, stats| async move {
        if read_request(&mut stream).await.is_none() {
            return;
        }
        stats.requests.fetch_add(1, SeqCst);
        let answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
        let _ = stream.write_all(answer).await;
        match linger {
            Some(linger) => tokio::time::sleep(linger).await,
            None => while read_request(&mut stream).await.is_some() {},
        }
    })
}

fn sequential(
    server: &TestServer,
    io: &str,
    requests: u64,
    timeout_ms: u64,
) -> serverlab_load::Summary {
    run_plan(
        json!({"target": server.url("/"), "requests": requests, "io": io,
        "timeout_ms": timeout_ms, "pacer": {"kind": "sequential"},
        "behaviour": {"kind": "new-connection"}}),
    )
}

#[test]
fn a_sequential_attempt_is_timed_at_its_answer_and_ends_at_the_servers_close() {
    const LINGER_MS: u64 = 60;
    let server = closing_late(Some(Duration::from_millis(LINGER_MS)));
    for io in BACKENDS {
        let s = sequential(&server, io, 5, 5_000);
        assert_eq!(s.io_backend, io);
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (5, 0),
            "{io}: {:?}",
            s.errors
        );
        let t = &s.timings;
        assert_eq!((t.latency_us.count, t.connect_us.count), (5, 5), "{io}");
        assert!(
            t.latency_us.p50 < LINGER_MS * 1_000,
            "{io}: timed at the answer, not the close: {:?}",
            t.latency_us
        );
        assert!(
            s.duration_s >= 5.0 * LINGER_MS as f64 / 1e3,
            "{io}: each connection waited for the server's close: {} s",
            s.duration_s
        );
        assert!(
            t.notice_us.count > 0,
            "{io}: a latency-bound plan is stamped"
        );
    }
    assert_eq!(accepted(&server, 10), 10);
    assert_eq!(server.stats.max_open.load(SeqCst), 1);
}

#[test]
fn a_server_that_never_closes_times_a_sequential_attempt_out_on_both_loops() {
    let server = closing_late(None);
    for io in BACKENDS {
        let s = sequential(&server, io, 2, 150);
        assert_eq!(
            (s.attempts.requests, s.errors.timeout),
            (2, 2),
            "{io}: {:?}",
            s.errors
        );
    }
    assert_eq!(ServerStats::get(&server.stats.requests), 4);
}

#[test]
fn open_loop_holds_its_rate_on_a_keepalive_pool() {
    let server = perf_server();
    let s = run_plan(
        json!({"target": server.url("/perf"), "connections": 10, "duration_s": 2.0,
        "pacer": {"kind": "open", "rate": 1000.0}}),
    );
    let expected = 2000.0;
    assert!(
        (s.attempts.requests as f64 - expected).abs() / expected < 0.02,
        "{} requests",
        s.attempts.requests
    );
    assert!((s.intended_rate.unwrap() - 1000.0).abs() < 10.0);
    assert!(
        (s.achieved_rate - 1000.0).abs() / 1000.0 < 0.02,
        "achieved {}",
        s.achieved_rate
    );
    assert_eq!(s.timings.lag_us.count, s.attempts.requests);
    assert_eq!(accepted(&server, 10), 10);
}

#[test]
fn open_loop_per_arrival_makes_k_calls_per_connection() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "requests": 100,
        "pacer": {"kind": "open", "rate": 400.0, "calls_per_connection": 2},
        "behaviour": {"kind": "new-connection"}}));
    assert_eq!(s.attempts.requests, 100);
    assert_eq!(ServerStats::get(&server.stats.requests), 100);
    assert_eq!(accepted(&server, 50), 50);
    // 50 arrivals at 400/s take about 0.125 s.
    assert!(s.duration_s > 0.1 && s.duration_s < 1.0, "{}", s.duration_s);
}

#[test]
fn ramp_rises_to_its_final_rate() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "duration_s": 2.0,
        "pacer": {"kind": "open", "rate": 100.0, "ramp_to_rate": 500.0, "ramp_s": 1.0},
        "behaviour": {"kind": "new-connection"}}));
    // 300 arrivals during the ramp, then 500 in the last second.
    assert!(
        (s.attempts.requests as f64 - 800.0).abs() < 24.0,
        "{} requests",
        s.attempts.requests
    );
}

#[test]
fn users_ramp_up_then_hold() {
    let server = perf_server();
    let s = run_plan(json!({"target": server.url("/perf"), "threads": 2,
        "pacer": {"kind": "users", "users": 6, "ramp_up_s": 0.6, "hold_s": 0.4}}));
    assert!(
        s.attempts.requests > 100,
        "{} requests",
        s.attempts.requests
    );
    assert_eq!(accepted(&server, 6), 6);
    assert!((s.duration_s - 1.0).abs() < 0.1, "{}", s.duration_s);
}

#[test]
fn source_addresses_are_spread() {
    for io in BACKENDS {
        let server = perf_server();
        let s = run_plan(
            json!({"target": server.url("/perf"), "requests": 40, "connections": 4,
            "sources": ["127.0.0.2-127.0.0.5"], "behaviour": {"kind": "new-connection"},
            "io": io}),
        );
        assert_eq!((s.attempts.requests, s.attempts.ok), (40, 40));
    }
}

#[test]
fn bodies_and_headers_are_sent() {
    for io in BACKENDS {
        let server = perf_server();
        let s = run_plan(
            json!({"target": server.url("/perf"), "requests": 10, "connections": 1,
            "method": "POST", "body": "hello", "headers": ["X-Test: 1"], "io": io}),
        );
        assert_eq!(s.attempts.ok, 10);
        assert_eq!(ServerStats::get(&server.stats.body_bytes), 50);
    }
}

#[test]
fn bodies_larger_than_the_socket_buffer_are_sent_whole() {
    let body = "b".repeat(3 << 20);
    for io in BACKENDS {
        let server = perf_server();
        let s = run_plan(
            json!({"target": server.url("/perf"), "requests": 3, "connections": 2,
            "method": "POST", "body": body, "io": io}),
        );
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (3, 0),
            "{io}: {:?}",
            s.errors
        );
        assert_eq!(ServerStats::get(&server.stats.body_bytes), 3 * (3 << 20));
    }
}

/// This process's open sockets whose peer is `port`: the client side of its connections to a
/// server on that port (a descriptor never closed stays here, in CLOSE_WAIT once the server
/// has closed its side).
fn client_sockets(port: u16) -> usize {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let peer = format!(":{port:04X}");
    let inodes: std::collections::HashSet<String> = tcp
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields[2].ends_with(&peer).then(|| fields[9].to_string())
        })
        .collect();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|link| {
            let link = link.to_string_lossy();
            let inode = link
                .strip_prefix("socket:[")
                .and_then(|l| l.strip_suffix(']'));
            inode.is_some_and(|inode| inodes.contains(inode))
        })
        .count()
}

#[test]
fn a_run_closes_every_connection_it_opened() {
    for io in BACKENDS {
        for kind in ["keepalive", "new-connection"] {
            let server = perf_server();
            let s = run_plan(json!({"target": server.url("/perf"), "connections": 5,
                "requests": 200, "threads": 1, "behaviour": {"kind": kind}, "io": io}));
            assert_eq!((s.io_backend.as_str(), s.attempts.ok), (io, 200));
            assert_eq!(client_sockets(server.addr.port()), 0, "{io} {kind}");
        }
    }
}
