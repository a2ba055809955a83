//! Slow clients and the syslog flood against raw loopback servers.

mod common;

use common::{perf_server, read_request, serve, ServerStats};
use serde_json::json;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn slow_upload_takes_about_size_over_rate() {
    let server = perf_server();
    let s = common::run_plan(
        json!({"target": server.url("/upload"), "requests": 2, "connections": 2,
        "method": "POST", "behaviour": {"kind": "slow-upload", "bytes": 3000, "bytes_per_s": 6000}}),
    );
    assert_eq!((s.attempts.requests, s.attempts.ok), (2, 2));
    assert_eq!(ServerStats::get(&server.stats.body_bytes), 6000);
    let seconds = s.timings.service_us.p50 as f64 / 1e6;
    assert!((0.45..0.75).contains(&seconds), "took {seconds} s");
}

#[test]
fn slow_reader_paces_its_reads() {
    const BODY: usize = 64 * 1024;
    let server = serve(|mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {BODY}\r\n\r\n");
            let mut answer = head.into_bytes();
            answer.resize(answer.len() + BODY, b'z');
            if stream.write_all(&answer).await.is_err() {
                return;
            }
        }
    });
    let s = common::run_plan(
        json!({"target": server.url("/files/big"), "requests": 1, "connections": 1,
        "behaviour": {"kind": "slow-reader", "rcvbuf": 4096, "read_bytes": 8192, "read_interval_ms": 20}}),
    );
    assert_eq!(s.attempts.ok, 1);
    // At least 64 KiB / 8 KiB = 8 reads, each after a 20 ms pause.
    let seconds = s.timings.service_us.p50 as f64 / 1e6;
    assert!(seconds >= 0.16, "took {seconds} s");
}

/// A message's number, from RFC 5424's `[meta sequenceId="N"]`.
fn seq_of(msg: &[u8]) -> u64 {
    let text = std::str::from_utf8(msg).expect("every message is UTF-8");
    assert!(text.starts_with('<') && !text.contains('\n'), "{text}");
    let after = text.split("[meta sequenceId=\"").nth(1).unwrap();
    after[..after.find('"').unwrap()].parse().unwrap()
}

/// Counts newline- or octet-framed syslog messages per the spec's framing rule.
fn count_frames(data: &[u8]) -> (u64, Vec<u64>) {
    let mut count = 0;
    let mut seqs = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let msg: &[u8];
        if rest[0].is_ascii_digit() && rest[0] != b'0' {
            let space = rest.iter().position(|&b| b == b' ').unwrap();
            let len: usize = std::str::from_utf8(&rest[..space])
                .unwrap()
                .parse()
                .unwrap();
            msg = &rest[space + 1..space + 1 + len];
            rest = &rest[space + 1 + len..];
        } else {
            let nl = rest.iter().position(|&b| b == b'\n').unwrap();
            msg = &rest[..nl];
            rest = &rest[nl + 1..];
        }
        seqs.push(seq_of(msg));
        count += 1;
    }
    (count, seqs)
}

/// 1000 messages over TCP: every number from the first (1 unless `seq_start` says) sent once.
fn syslog_tcp_run(framing: &str, seq_start: Option<u64>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = serve(move |mut stream, _| {
        let tx = tx.clone();
        async move {
            let mut all = Vec::new();
            let _ = stream.read_to_end(&mut all).await;
            let _ = tx.send(all);
        }
    });
    let mut behaviour = json!({"kind": "syslog", "syslog_framing": framing, "message_bytes": 120});
    if let Some(first) = seq_start {
        behaviour["seq_start"] = first.into();
    }
    let s = common::run_plan(
        json!({"target": format!("tcp://{}", server.addr), "requests": 1000,
        "connections": 3, "behaviour": behaviour}),
    );
    assert_eq!(s.attempts.requests, 1000);
    // A slot whose share of the budget is empty never connects, so read until all arrived.
    let mut seqs = Vec::new();
    while seqs.len() < 1000 {
        let data = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        seqs.extend(count_frames(&data).1);
    }
    seqs.sort_unstable();
    let first = seq_start.unwrap_or(1);
    assert_eq!(
        seqs,
        (first..first + 1000).collect::<Vec<u64>>(),
        "each number sent once"
    );
}

#[test]
fn syslog_tcp_newline_counts_match() {
    syslog_tcp_run("newline", None);
}

#[test]
fn syslog_tcp_octet_counts_match() {
    syslog_tcp_run("octet", None);
}

#[test]
fn syslog_numbers_start_at_seq_start() {
    // A second generator of a split run numbers after the first one's 1,000,000 messages.
    syslog_tcp_run("octet", Some(1_000_001));
}

#[test]
fn a_timed_flood_counts_as_sent_every_message_the_receiver_got() {
    // A slow reader keeps batches in flight when the run's end comes: each must finish (and
    // count) rather than be cut, or the receiver would hold messages never counted as sent.
    let (tx, rx) = std::sync::mpsc::channel();
    let server = serve(move |mut stream, _| {
        let tx = tx.clone();
        async move {
            let mut all = Vec::new();
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let _ = tx.send(all);
        }
    });
    let s = common::run_plan(json!({"target": format!("tcp://{}", server.addr),
        "duration_s": 1, "connections": 2, "behaviour": {"kind": "syslog"}}));
    let mut received = 0;
    for _ in 0..2 {
        let data = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        received += count_frames(&data).0;
    }
    assert!(s.attempts.answered > 1000, "{}", s.attempts.answered);
    assert_eq!(
        received, s.attempts.answered,
        "sent = received, nothing cut at the end"
    );
}

#[test]
fn syslog_udp_sends_numbered_datagrams() {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut seqs = Vec::new();
        while let Ok(n) = socket.recv(&mut buf) {
            // One message per datagram, without a newline.
            seqs.push(seq_of(&buf[..n]));
            if seqs.len() == 200 {
                break;
            }
        }
        seqs
    });
    let s = common::run_plan(
        json!({"target": format!("udp://{addr}"), "requests": 200, "connections": 1,
        "pacer": {"kind": "open", "rate": 2000.0},
        "behaviour": {"kind": "syslog", "transport": "udp", "message_bytes": 120}}),
    );
    assert_eq!(s.attempts.requests, 200);
    let mut seqs = receiver.join().unwrap();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=200).collect::<Vec<u64>>());
    let _ = SeqCst;
}
