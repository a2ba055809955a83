//! Broken and hostile servers: each failure is counted by kind and the run goes on.

mod common;

use common::{read_request, serve};
use serde_json::json;
use tokio::io::AsyncWriteExt;

/// Runs 6 requests on 2 connections with each socket loop; checks `check` on each summary.
fn run_against(
    server: &common::TestServer,
    timeout_ms: u64,
    check: impl Fn(&serverlab_load::Summary),
) {
    for io in common::BACKENDS {
        let s = common::run_plan(
            json!({"target": server.url("/perf"), "requests": 6, "connections": 2,
            "timeout_ms": timeout_ms, "io": io}),
        );
        assert_eq!(s.io_backend, io);
        check(&s);
        // A failed attempt is an error by kind and never adds to the rate.
        let failed: u64 = s.errors.total() - s.errors.status;
        assert_eq!(
            s.attempts.answered,
            s.attempts.requests - failed,
            "{io}: {:?}",
            s.errors
        );
        // `duration_s` is printed to the millisecond, `rps` from the exact duration.
        let answered = s.attempts.answered as f64;
        let (fast, slow) = ((s.duration_s - 0.0005).max(1e-9), s.duration_s + 0.0005);
        assert!(
            s.rps <= answered / fast + 0.001,
            "{io}: {} {}",
            s.rps,
            s.duration_s
        );
        assert!(
            s.rps >= answered / slow - 0.001,
            "{io}: {} {}",
            s.rps,
            s.duration_s
        );
    }
}

#[test]
fn garbage_is_a_parse_error() {
    let server = serve(|mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            let _ = stream
                .write_all(b"\x00\x01garbage that is not HTTP\r\n\r\n")
                .await;
        }
    });
    run_against(&server, 2000, |s| {
        assert_eq!((s.attempts.requests, s.errors.parse), (6, 6));
    });
}

#[test]
fn truncated_chunked_body_is_a_closed_error() {
    let server = serve(|mut stream, _| async move {
        if read_request(&mut stream).await.is_some() {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly-part")
                .await;
        }
    });
    run_against(&server, 2000, |s| {
        assert_eq!(
            (s.attempts.requests, s.errors.closed),
            (6, 6),
            "{:?}",
            s.errors
        );
    });
}

#[test]
fn megabyte_header_is_refused() {
    let server = serve(|mut stream, _| async move {
        if read_request(&mut stream).await.is_some() {
            let mut answer = b"HTTP/1.1 200 OK\r\nX-Huge: ".to_vec();
            answer.resize(1 << 20, b'h');
            answer.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
            let _ = stream.write_all(&answer).await;
        }
    });
    run_against(&server, 2000, |s| {
        assert_eq!(
            (s.attempts.requests, s.errors.parse),
            (6, 6),
            "{:?}",
            s.errors
        );
    });
}

#[test]
fn reset_mid_body_is_a_reset() {
    let server = serve(|mut stream, _| async move {
        if read_request(&mut stream).await.is_some() {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
                .await;
            let _ = stream.flush().await;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            // SO_LINGER 0 makes close send RST instead of FIN.
            let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
            drop(stream);
        }
    });
    run_against(&server, 2000, |s| {
        assert_eq!(
            (s.attempts.requests, s.errors.reset),
            (6, 6),
            "{:?}",
            s.errors
        );
    });
}

#[test]
fn silent_server_times_out() {
    let server =
        serve(|mut stream, _| async move { while read_request(&mut stream).await.is_some() {} });
    run_against(&server, 150, |s| {
        assert_eq!(
            (s.attempts.requests, s.errors.timeout),
            (6, 6),
            "{:?}",
            s.errors
        );
    });
}

#[test]
fn refused_connections_are_connect_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for io in common::BACKENDS {
        let s = common::run_plan(
            json!({"target": format!("http://127.0.0.1:{port}/"), "requests": 5,
            "connections": 1, "io": io}),
        );
        assert_eq!((s.attempts.requests, s.errors.connect), (5, 5), "{io}");
        assert_eq!(
            (s.attempts.answered, s.rps, s.floor_us),
            (0, 0.0, None),
            "{io}"
        );
    }
}

#[test]
fn error_statuses_are_counted_but_answered() {
    let server = serve(|mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            let body = r#"{"error":"nope"}"#;
            let answer = format!(
                "HTTP/1.1 503 Busy\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    run_against(&server, 2000, |s| {
        assert_eq!(
            (s.attempts.requests, s.attempts.ok, s.errors.status),
            (6, 0, 6)
        );
        assert_eq!(s.attempts.answered, 6, "an error status is still an answer");
        assert_eq!(s.status["5xx"], 6);
    });
}

/// A server answering every request with `head` and a five-byte body, on one socket loop:
/// the run's summary and how many connections the server saw.
fn framed_by(head: &'static str, io: &str) -> (serverlab_load::Summary, u64) {
    let server = serve(move |mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            let answer = format!("HTTP/1.1 200 OK\r\n{head}\r\n\r\nhello");
            if stream.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let s = common::run_plan(
        json!({"target": server.url("/perf"), "requests": 6, "connections": 2,
        "timeout_ms": 2000, "io": io}),
    );
    assert_eq!(s.io_backend, io);
    (s, common::ServerStats::get(&server.stats.connections))
}

#[test]
fn ambiguous_framing_is_a_parse_error_and_ends_the_connection() {
    for head in [
        "Content-Length: 5\r\nContent-Length: 6",
        "Content-Length: 5, 6",
        "Content-Length: 5x",
        "Content-Length: 5\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: gzip",
    ] {
        for io in common::BACKENDS {
            let (s, connections) = framed_by(head, io);
            assert_eq!(
                (s.attempts.requests, s.errors.parse),
                (6, 6),
                "{head:?} {io}"
            );
            assert_eq!(connections, 6, "{head:?} {io}: a connection was used again");
        }
    }
}

#[test]
fn one_length_said_twice_is_read_as_that_length() {
    for io in common::BACKENDS {
        let (s, connections) = framed_by("Content-Length: 5, 5", io);
        assert_eq!(
            (s.attempts.requests, s.attempts.ok, s.errors.total()),
            (6, 6, 0),
            "{io}"
        );
        // Kept alive: no more connections than slots (a slot may find the budget spent
        // before it connects).
        assert!(
            connections <= 2,
            "{io}: {connections} connections for 2 slots"
        );
    }
}

#[test]
fn a_server_that_resets_every_connection_adds_nothing_to_the_rate() {
    // SO_LINGER 0 makes the close an RST, before any answer.
    let server = serve(|stream, _| async move {
        let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
        drop(stream);
    });
    for io in common::BACKENDS {
        let plan = json!({"target": server.url("/perf"), "duration_s": 0.6, "connections": 2,
            "interval_ms": 100, "io": io});
        let plan = serverlab_load::Plan::from_value(plan)
            .unwrap()
            .validate()
            .unwrap();
        let mut intervals = Vec::new();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let outcome = serverlab_load::run_with(plan, &stop, |l| intervals.push(l.clone())).unwrap();
        let s = outcome.summary;
        assert!(s.attempts.requests > 0, "{io}");
        assert_eq!(
            s.errors.total(),
            s.attempts.requests,
            "{io}: {:?}",
            s.errors
        );
        assert!(s.errors.reset + s.errors.closed > 0, "{io}: {:?}", s.errors);
        assert_eq!((s.attempts.answered, s.rps), (0, 0.0), "{io}");
        assert!(s.human().starts_with("NO ANSWER: none of "), "{io}");
        assert!(!intervals.is_empty(), "{io}");
        for line in &intervals {
            assert_eq!((line.answered, line.rps), (0, 0.0), "{io}: {line:?}");
            assert_eq!(line.errors.total(), line.completed, "{io}: {line:?}");
        }
    }
}

/// A listener that never accepts, its accept queue one deep: the first connects complete in
/// the kernel and the rest wait on SYNs the kernel drops. At the run's end those waiting
/// connects are timeouts, counted as errors and as finished attempts, never left out.
#[test]
fn connects_still_waiting_at_the_end_are_timeouts() {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&any.into()).unwrap();
    listener.listen(1).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    for io in common::BACKENDS {
        let s = common::run_plan(json!({
            "target": format!("http://{addr}/perf"), "behaviour": {"kind": "new-connection"},
            "connections": 8, "duration_s": 1.0, "timeout_ms": 5000, "io": io}));
        assert_eq!(s.attempts.answered, 0, "{io}");
        assert!(s.errors.timeout >= 6, "{io}: {:?}", s.errors);
        assert_eq!(
            s.attempts.requests,
            s.errors.total(),
            "{io}: {:?}",
            s.errors
        );
    }
}

/// An attack's text summary states what it cost the client (the amplification's other
/// side): idle connections are answered by nothing, so their cost is the one figure.
#[test]
fn an_attacks_text_summary_states_what_it_cost_the_client() {
    let server = serve(|mut stream, _| async move {
        let _ = read_request(&mut stream).await;
    });
    let s = common::run_plan(json!({
        "target": server.url("/perf"), "behaviour": {"kind": "idle"},
        "connections": 3, "duration_s": 0.5}));
    let text = s.human();
    assert!(
        text.contains("Client cost: 3 connection(s) and 0 HTTP/2 stream(s) opened, 0B written"),
        "{text}"
    );
    assert!(!text.starts_with("NO ANSWER"), "{text}");
}
