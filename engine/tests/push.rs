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
    assert_eq!(s.attempts.requests, 30);
    assert_eq!(answered.load(SeqCst), 30);
    assert_eq!(s.events.longpoll_timeout_answers, 10);
    assert_eq!(s.events.longpoll_event_answers, 20);
    assert_eq!(s.events.received, 20);
    assert_eq!(s.timings.event_delay_us.count, 20);
    assert_eq!(s.events.duplicated + s.events.reordered, 0);
}

#[test]
fn event_delays_from_a_server_with_another_clock_are_corrected_by_the_plans_offset() {
    // The server's clock is 4 s behind this host's: it stamps each event 4 s "in the past".
    const BEHIND_MS: u64 = 4_000;
    let server = serve(|mut stream, _| async move {
        let mut seq = 0;
        while read_request(&mut stream).await.is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            seq += 1;
            let answer = common::delivery_created(seq, common::unix_ms() - BEHIND_MS);
            if write_json_answer(&mut stream, &answer).await.is_err() {
                return;
            }
        }
    });
    let delay_p50_ms = |clock_offset_ms: f64| {
        let s = common::run_plan(json!({"target": server.url("/push"), "requests": 20,
            "connections": 2, "clock_offset_ms": clock_offset_ms,
            "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 50}}));
        assert_eq!(s.events.received, 20);
        assert_eq!(s.clock_offset_ms, Some(clock_offset_ms));
        s.timings.event_delay_us.p50 as f64 / 1000.0
    };
    let uncorrected = delay_p50_ms(0.0);
    assert!(uncorrected >= BEHIND_MS as f64, "{uncorrected} ms");
    // Created and received within the same few milliseconds, as the server's clock reads.
    let corrected = delay_p50_ms(-(BEHIND_MS as f64));
    assert!(corrected < uncorrected - 3_000.0, "{corrected} ms");
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
    assert_eq!(s.attempts.requests, 1);
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(s.events.received, 8);
    assert_eq!(s.events.lost, 1, "3 → 5 skips 4");
    assert_eq!(s.events.duplicated, 1);
    assert_eq!(s.events.reordered, 1, "4 after 6");
    assert_eq!(s.events.comet_timeout_lines, 1);
    assert_eq!(s.timings.event_since_subscribe_us.count, 8);
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

/// A delivery with the emit-list fields the server chooses: place, total, created, duration.
fn placed_delivery(seq: u64, place: u64, total: u64, created: u64, duration: u64) -> String {
    format!(
        r#"{{"response":{{"event":{{"name":"e1","seq":{seq},"timings":{{"duration":{duration},"sent":{},"created":{created}}},"connections":{{"total":{total},"place":{place}}}}}}},"request":{{}},"timings":{{"duration":1,"sent":1,"created":0}},"connections":{{"start":1,"finish":1}}}}"#,
        created + duration
    )
}

/// Each comet subscription gets the next place in a list of three; it receives seqs 1..=5,
/// created at 1000 + seq, with duration 10 × place + seq, then a timeout line.
fn placed_comet_server() -> common::TestServer {
    let next_place = Arc::new(AtomicU64::new(0));
    serve(move |mut stream, _| {
        let next_place = next_place.clone();
        async move {
            // A slot that finishes early may subscribe again on its kept-alive connection.
            while read_request(&mut stream).await.is_some() {
                let place = next_place.fetch_add(1, SeqCst) % 3 + 1;
                let mut wire: String = (1..=5)
                    .map(|seq| placed_delivery(seq, place, 3, 1000 + seq, 10 * place + seq) + "\n")
                    .collect();
                wire += &format!("{TIMEOUT_ANSWER}\n");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{wire}\r\n0\r\n\r\n",
                    wire.len()
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    })
}

#[test]
fn emit_records_come_before_the_summary() {
    let server = placed_comet_server();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_serverlab-load"))
        .args([&server.url("/push"), "--comet", "e1", "--push-ms", "1000"])
        .args(["-n", "3", "-c", "3", "--json", "--interval", "1h"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines = common::json_lines(&out.stdout);
    let (summary, emits) = lines.split_last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["events"]["received"], 15, "{summary}");
    assert_eq!(emits.len(), 5);
    for (seq, line) in (1u64..).zip(emits) {
        assert_eq!(line["type"], "emit");
        assert_eq!(
            (line["event"].as_str(), line["seq"].as_u64()),
            (Some("e1"), Some(seq))
        );
        assert_eq!(line["total"], 3);
        assert_eq!(line["received"], 3);
        assert_eq!(line["created_ms"], 1000 + seq);
        assert_eq!(
            line["duration_ms"],
            json!({"min": 10 + seq, "max": 30 + seq})
        );
        assert_eq!(
            line["places"],
            json!([[1, 10 + seq], [2, 20 + seq], [3, 30 + seq]])
        );
    }
}

#[test]
fn long_polls_record_emits_too() {
    let server = serve(|mut stream, _| async move {
        let mut seq = 0;
        while read_request(&mut stream).await.is_some() {
            seq += 1;
            let answer = placed_delivery(seq, 2, 4, 5000, 7);
            if write_json_answer(&mut stream, &answer).await.is_err() {
                return;
            }
        }
    });
    let outcome = common::run_plan_outcome(
        json!({"target": server.url("/push"), "requests": 4, "connections": 1,
        "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 50}}),
    );
    let seqs: Vec<u64> = outcome.emits.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    // Four answers, three gaps from an answer to the next poll (the fourth had none after).
    let gap = &outcome.summary.timings.resubscribe_gap_us;
    assert_eq!(gap.count, 3);
    assert!(gap.max < 1_000_000, "{gap:?}");
    assert!(outcome
        .emits
        .iter()
        .all(|e| e.received == 1 && e.total == 4 && e.places == vec![[2, 7]]));
}
