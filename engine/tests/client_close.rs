//! `close = "client"` against a real server: the engine closes a connection of one request
//! once the answer is complete (its Content-Length, or the chunked terminator), never
//! before, on both socket loops. The server sends each answer in pieces with pauses between
//! them, never closes a connection itself, and records when the client's FIN arrives
//! against its last byte written.

mod common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{read_request, serve, TestServer, BACKENDS};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Pause between two pieces of an answer: long enough that a close after any piece but the
/// last arrives before the next piece is written.
const PAUSE: Duration = Duration::from_millis(15);

/// Content-Length framing, the last piece two bytes of the body.
const LENGTH: [&[u8]; 4] = [
    b"HTTP/1.1 200 OK\r\nContent-Le",
    b"ngth: 11\r\n\r\nhello",
    b" wor",
    b"ld",
];
/// Chunked framing, the last piece the terminator's final CRLF.
const CHUNKED: [&[u8]; 4] = [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    b"lo\r\n6\r\n world\r\n",
    b"0\r\n",
    b"\r\n",
];

/// What the server saw of the client's ends.
#[derive(Default)]
struct Ends {
    /// FINs that came after the answer's last byte was written.
    after_answer: AtomicU64,
    /// FINs (or resets) that came while the answer was still being written.
    early: AtomicU64,
    /// Connections the client reset rather than closed.
    resets: AtomicU64,
    /// Requests that asked the server to close (`Connection: close`).
    asked_close: AtomicU64,
    /// The longest wait from the last byte written to the client's FIN, in µs.
    longest_wait_us: AtomicU64,
}

/// A server that answers one request per connection with `pieces`, `PAUSE` apart, and then
/// waits for the client's end; it never closes first.
fn piecewise(pieces: [&'static [u8]; 4], ends: Arc<Ends>) -> TestServer {
    serve(move |mut stream, _| {
        let ends = ends.clone();
        async move {
            let Some((head, _)) = read_request(&mut stream).await else {
                return;
            };
            if head.to_ascii_lowercase().contains("connection: close") {
                ends.asked_close.fetch_add(1, SeqCst);
            }
            let (mut read, mut write) = stream.into_split();
            let end = tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let seen = read.read(&mut buf).await;
                (seen, Instant::now())
            });
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(PAUSE).await;
                }
                if end.is_finished() {
                    ends.early.fetch_add(1, SeqCst);
                    return;
                }
                if write.write_all(piece).await.is_err() {
                    ends.early.fetch_add(1, SeqCst);
                    return;
                }
            }
            let last_byte = Instant::now();
            let Ok((seen, at)) = end.await else { return };
            match seen {
                Ok(0) => {
                    ends.after_answer.fetch_add(1, SeqCst);
                    let waited = at.saturating_duration_since(last_byte).as_micros() as u64;
                    ends.longest_wait_us.fetch_max(waited, SeqCst);
                }
                Ok(_) => {}
                Err(_) => {
                    ends.resets.fetch_add(1, SeqCst);
                }
            }
        }
    })
}

fn run(server: &TestServer, io: &str, pacer: Value, close: &str) -> serverlab_load::Summary {
    let connections = if pacer["kind"] == "closed" { 2 } else { 1 };
    common::run_plan(json!({"target": server.url("/x"), "requests": 4, "io": io,
        "connections": connections, "threads": 1, "timeout_ms": 5_000, "pacer": pacer,
        "behaviour": {"kind": "new-connection", "close": close}}))
}

/// The pacers that make a connection per request, each with the loops that drive it.
fn pacers() -> Vec<(Value, &'static str)> {
    let mut runs = Vec::new();
    for io in BACKENDS {
        runs.push((json!({"kind": "sequential"}), io));
        runs.push((json!({"kind": "closed"}), io));
    }
    runs.push((json!({"kind": "open", "rate": 50.0}), "epoll"));
    runs
}

#[test]
fn the_engine_closes_after_the_last_byte_of_an_answer_sent_in_pieces_and_never_before() {
    for (name, pieces) in [("content-length", LENGTH), ("chunked", CHUNKED)] {
        let ends = Arc::new(Ends::default());
        let server = piecewise(pieces, ends.clone());
        let mut requests = 0;
        for (pacer, io) in pacers() {
            let s = run(&server, io, pacer.clone(), "client");
            let what = format!("{name}, {pacer}, {io}");
            assert_eq!(s.io_backend, io, "{what}");
            assert_eq!(
                (s.attempts.ok, s.errors.total()),
                (4, 0),
                "{what}: {:?}",
                s.errors
            );
            requests += 4;
            // The server's task sees the FIN a moment after the engine's summary is made.
            wait_for(|| ends.after_answer.load(SeqCst) + ends.early.load(SeqCst) >= requests);
            assert_eq!(ends.early.load(SeqCst), 0, "{what}: closed mid-answer");
            assert_eq!(ends.after_answer.load(SeqCst), requests, "{what}");
        }
        assert_eq!(ends.resets.load(SeqCst), 0, "{name}: closed, not reset");
        assert_eq!(
            ends.asked_close.load(SeqCst),
            0,
            "{name}: no request asked the server to close"
        );
        // A server that never closes first: an engine waiting for its close would have
        // timed out (5 s) rather than answered.
        let waited = Duration::from_micros(ends.longest_wait_us.load(SeqCst));
        assert!(waited < Duration::from_secs(5), "{name}: {waited:?}");
    }
}

#[test]
fn with_the_server_closing_each_request_asks_it_to() {
    let ends = Arc::new(Ends::default());
    let server = piecewise(LENGTH, ends.clone());
    for io in BACKENDS {
        let s = run(&server, io, json!({"kind": "closed"}), "server");
        assert_eq!((s.attempts.ok, s.errors.total()), (4, 0), "{io}");
    }
    assert_eq!(ends.asked_close.load(SeqCst), 8);
}

/// Waits up to 5 s for `done`, then goes on (the assertions after it say what was missing).
fn wait_for(done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !done() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
}
