//! Long poll and comet against raw servers that follow the spec's push shapes, including
//! injected sequence faults.

mod common;

use common::{delivery, read_request, serve, write_json_answer, TIMEOUT_ANSWER};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

#[test]
fn long_poll_resubscribes_and_counts_answers() {
    let answered = Arc::new(AtomicU64::new(0));
    let counter = answered.clone();
    let server = serve(move |mut stream, _| {
        let counter = counter.clone();
        async move {
            while let Some((head, body)) = read_request(&mut stream).await {
                assert!(head.starts_with("POST /push "));
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(body["type"], "longpoll");
                assert_eq!(body["duration_ms"], 50);
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
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
    });
    let s = common::run_plan(
        json!({"target": server.url("/push"), "requests": 30, "connections": 2,
        "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 50}}),
    );
    assert_eq!(s.requests, 30);
    assert_eq!(answered.load(SeqCst), 30);
    assert_eq!(s.events.longpoll_timeout_answers, 10);
    assert_eq!(s.events.longpoll_event_answers, 20);
    assert_eq!(s.events.received, 20);
    assert_eq!(s.event_delay_us.count, 20);
    assert_eq!(s.events.duplicated + s.events.reordered, 0);
}

/// Streams the given sequence numbers as comet lines, split awkwardly across chunks, then a
/// timeout line and the end of the body.
fn comet_server(seqs: &'static [u64]) -> common::TestServer {
    serve(move |mut stream, _| async move {
        let Some((head, _)) = read_request(&mut stream).await else {
            return;
        };
        assert!(head.starts_with("POST /push "));
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n";
        let _ = stream.write_all(head.as_bytes()).await;
        let mut lines: Vec<String> = seqs.iter().map(|&s| delivery(s) + "\n").collect();
        lines.push(format!("{TIMEOUT_ANSWER}\n"));
        let wire: String = lines.concat();
        // Chunks of 37 bytes: lines straddle chunks, as a proxy may make them.
        for piece in wire.as_bytes().chunks(37) {
            let chunk = format!(
                "{:x}\r\n{}\r\n",
                piece.len(),
                String::from_utf8_lossy(piece)
            );
            if stream.write_all(chunk.as_bytes()).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        }
        let _ = stream.write_all(b"0\r\n\r\n").await;
        // Keep the connection until the client leaves.
        let _ = read_request(&mut stream).await;
    })
}

#[test]
fn comet_catches_an_injected_gap_and_duplicate() {
    let server = comet_server(&[1, 2, 3, 5, 5, 6, 4, 7]);
    let s = common::run_plan(
        json!({"target": server.url("/push"), "requests": 1, "connections": 1,
        "behaviour": {"kind": "comet", "events": ["e1"], "duration_ms": 1000}}),
    );
    assert_eq!(s.requests, 1);
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(s.events.received, 8);
    assert_eq!(s.events.lost, 1, "3 → 5 skips 4");
    assert_eq!(s.events.duplicated, 1);
    assert_eq!(s.events.reordered, 1, "4 after 6");
    assert_eq!(s.events.comet_timeout_lines, 1);
    assert_eq!(s.event_since_subscribe_us.count, 8);
}

#[test]
fn comet_in_order_stream_is_clean() {
    let server = comet_server(&[10, 11, 12, 13]);
    let s = common::run_plan(
        json!({"target": server.url("/push"), "requests": 1, "connections": 1,
        "behaviour": {"kind": "comet", "events": ["e1"], "duration_ms": 1000}}),
    );
    assert_eq!(s.events.received, 4);
    assert_eq!(s.events.lost + s.events.duplicated + s.events.reordered, 0);
}
