//! Server-Sent Events and WebSocket (spec §10, §11) against real servers: the Python
//! reference server (its venv comes from `make build`) for whole runs without loss, and raw
//! tokio servers for what a good server never does (drops, gaps, broken frames, oversize
//! messages, a close mid-message), each of which must be counted by kind, without a hang.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream as StdStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{delivery, read_request, serve};
use serde_json::json;
use serverlab_load::Outcome;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tungstenite::handshake::derive_accept_key;

/// The reference server on a port of its own, stopped when dropped.
struct Reference {
    child: Child,
    port: u16,
    _docroot: tempdir::Dir,
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Reference {
    fn start() -> Reference {
        Reference::spawn(|repo, port, docroot| {
            let mut cmd = Command::new(repo.join(".venv/bin/python"));
            cmd.arg(repo.join("tests/reference_server.py"))
                .args(["--port", &port.to_string(), "--docroot"])
                .arg(docroot);
            cmd
        })
    }

    /// A contestant as `serverlab serve` runs it (built by `make build`).
    fn contestant(name: &str) -> Reference {
        Reference::spawn(|repo, port, _| {
            let mut cmd = Command::new(repo.join(".venv/bin/serverlab"));
            cmd.args(["serve", name, "--port", &port.to_string()])
                .current_dir(repo);
            cmd
        })
    }

    fn spawn(command: impl FnOnce(&PathBuf, u16, &PathBuf) -> Command) -> Reference {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let docroot = std::env::temp_dir().join(format!("streams-docroot-{port}"));
        std::fs::create_dir_all(&docroot).unwrap();
        let child = command(&repo, port, &docroot)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts (make build makes .venv and the contestants)");
        let began = Instant::now();
        while StdStream::connect(("127.0.0.1", port)).is_err() {
            assert!(began.elapsed() < Duration::from_secs(30), "server up");
            std::thread::sleep(Duration::from_millis(50));
        }
        Reference {
            child,
            port,
            _docroot: tempdir::Dir(docroot),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `POST path` with a JSON body; returns the answer's body.
    fn post(&self, path: &str, body: serde_json::Value) -> String {
        let body = body.to_string();
        let mut s = StdStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
    }

    fn emit_every(&self, ms: u64) {
        let set = self.post("/event/set", json!({"name": "e1", "interval_ms": ms}));
        assert!(set.contains("\"e1\""), "{set}");
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        // SIGINT, as Ctrl-C: `serverlab serve` then stops the contestant it started.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let began = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            if began.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Every emit cycle but the last (which the run's end may cut) reached every subscriber the
/// server had, and after the first every client was one.
fn every_emit_reached_everyone(out: &Outcome, clients: u64) {
    let lines = &out.emits;
    assert!(lines.len() >= 5, "{} emit cycles", lines.len());
    for line in &lines[..lines.len() - 1] {
        assert_eq!(line.received, line.total, "seq {}", line.seq);
    }
    for line in &lines[1..lines.len() - 1] {
        assert_eq!(line.total, clients, "seq {}", line.seq);
    }
    let received: u64 = lines.iter().map(|l| l.received).sum();
    assert_eq!(received, out.summary.events.received);
    // Each cycle's own delays, arrivals and drain time (issue 19): every delivery is in its
    // cycle's histogram, and every read of a push stream carries the kernel's stamp.
    for line in lines {
        let delays = serverlab_load::report::decode_histogram(&line.delay_histogram).unwrap();
        assert_eq!(delays.len(), line.received, "seq {}", line.seq);
        assert!(line.first_arrival_ms <= line.last_arrival_ms);
        assert!(
            line.first_arrival_ms >= line.created_ms as f64,
            "seq {}",
            line.seq
        );
        assert_eq!(line.drain_samples, line.received, "seq {}", line.seq);
        assert!(line.drain_us.is_some(), "seq {}", line.seq);
    }
}

#[test]
fn sse_streams_from_the_reference_server_lose_nothing() {
    let server = Reference::start();
    server.emit_every(100);
    let out = common::run_plan_outcome(json!({
        "target": server.url("/sse"), "connections": 10, "duration_s": 2.0, "threads": 1,
        "behaviour": {"kind": "sse", "events": ["e1"], "heartbeat_ms": 50}}));
    let s = &out.summary;
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(
        (s.events.lost, s.events.duplicated, s.events.reordered),
        (0, 0, 0)
    );
    assert_eq!(s.events.reconnects, 0);
    assert!(s.events.heartbeats >= 10 * 10, "{}", s.events.heartbeats);
    assert_eq!(s.timings.handshake_us.count, 10);
    assert_eq!(s.timings.event_delay_us.count, s.events.received);
    every_emit_reached_everyone(&out, 10);
}

#[test]
fn sse_streams_the_server_ends_are_opened_again_where_they_stopped() {
    let server = Reference::start();
    server.emit_every(50);
    let out = common::run_plan_outcome(json!({
        "target": server.url("/sse"), "connections": 5, "duration_s": 2.0, "threads": 1,
        "behaviour": {"kind": "sse", "events": ["e1"], "duration_ms": 300}}));
    let s = &out.summary;
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert!(s.events.reconnects >= 5 * 4, "{}", s.events.reconnects);
    assert!(s.events.sse_timeout_messages >= 5 * 4);
    assert_eq!(
        (s.events.lost, s.events.duplicated, s.events.reordered),
        (0, 0, 0)
    );
    assert_eq!(s.events.gaps, 0);
    // Each client saw every seq from its first on, live or replayed: ~40 emits in 2 s.
    assert!(s.events.received >= 5 * 30, "{}", s.events.received);
}

#[test]
fn websockets_to_the_reference_server_lose_nothing_and_time_publishes() {
    let server = Reference::start();
    server.emit_every(100);
    let out = common::run_plan_outcome(json!({
        "target": server.url("/ws"), "connections": 10, "duration_s": 2.0, "threads": 2,
        "behaviour": {"kind": "websocket", "events": ["e1"],
                      "publish": {"every_ms": 200, "clients": 2}}}));
    let s = &out.summary;
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(
        (s.events.lost, s.events.duplicated, s.events.reordered),
        (0, 0, 0)
    );
    assert_eq!(s.timings.handshake_us.count, 10);
    // Two publishers, one every 200 ms each: about 20, all but those in flight answered.
    assert!(s.events.publishes >= 14, "{}", s.events.publishes);
    assert!(s.events.publishes - s.events.published <= 2);
    assert_eq!(s.timings.broadcast_rtt_us.count, s.events.published);
    every_emit_reached_everyone(&out, 10);
}

#[test]
fn sse_and_websockets_to_node_http_lose_nothing() {
    let server = Reference::contestant("node-http");
    server.emit_every(100);
    for (path, behaviour) in [
        (
            "/sse",
            json!({"kind": "sse", "events": ["e1"], "duration_ms": 400}),
        ),
        (
            "/ws",
            json!({"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 300}}),
        ),
    ] {
        let out = common::run_plan_outcome(json!({
            "target": server.url(path), "connections": 10, "duration_s": 1.5, "threads": 1,
            "behaviour": behaviour}));
        let s = &out.summary;
        assert_eq!(s.errors.total(), 0, "{path}: {:?}", s.errors);
        assert_eq!(
            (s.events.lost, s.events.duplicated, s.events.reordered),
            (0, 0, 0)
        );
        every_emit_reached_everyone(&out, 10);
    }
}

/// A raw SSE server: the first stream sends seqs 1 and 2 and a heartbeat, then closes;
/// the second must name `e1:2` and gets a gap (3 and 4 lost), a replay of 5, a bad line and
/// a live 6, then the end of the stream.
#[test]
fn sse_reconnects_with_the_last_event_id_and_counts_gaps_and_replays() {
    let names = Arc::new(std::sync::Mutex::new(Vec::new()));
    let streams = Arc::new(AtomicU64::new(0));
    let seen = names.clone();
    let server = serve(move |mut stream, _| {
        let (seen, streams) = (seen.clone(), streams.clone());
        async move {
            while let Some((head, _)) = read_request(&mut stream).await {
                let last_id = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Last-Event-ID: "))
                    .unwrap_or("");
                seen.lock().unwrap().push(last_id.to_string());
                let wire = match streams.fetch_add(1, SeqCst) {
                    0 => first_sse_stream(),
                    1 => second_sse_stream(),
                    _ => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string(),
                };
                if stream.write_all(wire.as_bytes()).await.is_err() {
                    return;
                }
                if wire.contains("chunked") {
                    // The first stream breaks off: the server closes it mid-body.
                    return;
                }
            }
        }
    });
    let s = common::run_plan(json!({
        "target": server.url("/sse"), "requests": 2, "connections": 1,
        "behaviour": {"kind": "sse", "events": ["e1"], "duration_ms": 1000}}));
    assert_eq!(*names.lock().unwrap(), ["", "e1:2"]);
    assert_eq!(s.events.reconnects, 1);
    assert_eq!(s.events.heartbeats, 1);
    assert_eq!(s.events.received, 4, "1, 2, replayed 5, 6");
    assert_eq!((s.events.gaps, s.events.lost, s.events.replayed), (1, 2, 1));
    assert_eq!(s.events.sse_timeout_messages, 1);
    assert_eq!(s.errors.parse, 1, "the bad data line");
    assert_eq!(s.errors.closed, 1, "the first stream broke off");
    assert_eq!(s.events.duplicated + s.events.reordered, 0);
}

fn first_sse_stream() -> String {
    let mut body = String::from("id: e1:0\n\n: hb\n\n");
    for seq in [1, 2] {
        body += &format!("id: e1:{seq}\ndata: {}\n\n", delivery(seq));
    }
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n",
        body.len()
    )
}

fn second_sse_stream() -> String {
    let mut body = String::from(
        "event: gap\nid: e1:4\ndata: {\"gap\": {\"name\": \"e1\", \"after\": 2, \"next\": 5}}\n\n",
    );
    let replayed = delivery(5).replace("\"seq\":5,", "\"seq\":5,\"replayed\":true,");
    body += &format!("id: e1:5\ndata: {replayed}\n\n");
    body += "data: not json\n\n";
    body += &format!("id: e1:6\ndata: {}\n\n", delivery(6));
    body += "event: timeout\ndata: {\"response\": {\"timeout\": true}}\n\n";
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Reads the client's upgrade and answers 101; returns false if the client went away.
async fn accept_upgrade(stream: &mut TcpStream) -> bool {
    let Some((head, _)) = read_request(stream).await else {
        return false;
    };
    let key = head
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .expect("a key");
    assert!(
        !head.contains("Sec-WebSocket-Extensions"),
        "no extension offered"
    );
    let accept = derive_accept_key(key.trim().as_bytes());
    let answer = format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n");
    stream.write_all(answer.as_bytes()).await.is_ok()
}

/// Reads one client frame: (opcode, unmasked payload).
async fn client_frame(stream: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut two = [0u8; 2];
    stream.read_exact(&mut two).await.ok()?;
    assert_eq!(two[1] & 0x80, 0x80, "client frames are masked");
    let len = match two[1] & 0x7f {
        126 => u64::from(stream.read_u16().await.ok()?),
        127 => stream.read_u64().await.ok()?,
        n => u64::from(n),
    };
    let mut mask = [0u8; 4];
    stream.read_exact(&mut mask).await.ok()?;
    let mut payload = vec![0u8; len as usize];
    stream.read_exact(&mut payload).await.ok()?;
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    Some((two[0] & 0x0f, payload))
}

fn text_frame(text: &str) -> Vec<u8> {
    let mut frame = vec![0x81];
    match text.len() {
        n if n < 126 => frame.push(n as u8),
        n => {
            frame.push(126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    frame.extend_from_slice(text.as_bytes());
    frame
}

/// A WebSocket server that subscribes the client, sends `script`'s frames after two good
/// deliveries, and records the first close code a client sends.
fn hostile_ws(script: &'static [u8], close_codes: Arc<AtomicU64>) -> common::TestServer {
    serve(move |mut stream, _| {
        let close_codes = close_codes.clone();
        async move {
            if !accept_upgrade(&mut stream).await {
                return;
            }
            let (op, subscribe) = client_frame(&mut stream).await.expect("subscribe");
            assert_eq!(op, 1);
            assert!(String::from_utf8_lossy(&subscribe).contains("\"subscribe\""));
            let mut wire = text_frame(r#"{"type":"subscribed","events":["e1"]}"#);
            wire.extend(text_frame(&delivery(1)));
            wire.extend([0x89, 0x02, b'h', b'i']);
            wire.extend(text_frame(&delivery(2)));
            wire.extend_from_slice(script);
            let _ = stream.write_all(&wire).await;
            if script.is_empty() {
                let (op, pong) = client_frame(&mut stream).await.expect("pong");
                assert_eq!((op, pong.as_slice()), (0xA, &b"hi"[..]));
            }
            while let Some((op, payload)) = client_frame(&mut stream).await {
                if op == 8 && payload.len() >= 2 {
                    let code = u16::from_be_bytes([payload[0], payload[1]]);
                    // The first close: later connections of the closed loop may be
                    // cut by the run's end and say 1000.
                    let _ = close_codes.compare_exchange(0, u64::from(code), SeqCst, SeqCst);
                }
            }
        }
    })
}

/// A closed loop opens a connection again after each failure: every connection but one the
/// run's end cut short failed by the same kind, nothing else failed, and each brought its
/// good deliveries first.
fn every_connection_broke(
    s: &serverlab_load::Summary,
    kind: impl Fn(&serverlab_load::report::Errors) -> u64,
    deliveries_each: u64,
) {
    let opened = s.traffic.connections_opened;
    assert!(opened >= 1);
    let failed = kind(&s.errors);
    assert!(
        failed == opened || failed + 1 == opened,
        "{opened} {:?}",
        s.errors
    );
    assert_eq!(s.errors.total(), failed, "{:?}", s.errors);
    let received = s.events.received;
    assert!(received >= deliveries_each * failed && received <= deliveries_each * opened);
}

fn run_hostile(script: &'static [u8]) -> (serverlab_load::Summary, u64) {
    let close_code = Arc::new(AtomicU64::new(0));
    let server = hostile_ws(script, close_code.clone());
    let began = Instant::now();
    let s = common::run_plan(json!({
        "target": server.url("/ws"), "duration_s": 1.0, "connections": 1,
        "behaviour": {"kind": "websocket", "events": ["e1"]}}));
    assert!(began.elapsed() < Duration::from_secs(5), "no hang");
    // The server's task reads the close frame shortly after the run.
    let waited = Instant::now();
    while close_code.load(SeqCst) == 0 && waited.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    (s, close_code.load(SeqCst))
}

#[test]
fn a_websocket_answers_pings_and_closes_with_1000_at_the_end() {
    let (s, code) = run_hostile(b"");
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(s.events.received, 2);
    assert_eq!(code, 1000);
}

#[test]
fn a_broken_frame_is_a_parse_error_closed_with_1002() {
    // RSV1 set on a text frame: no extension was agreed.
    let (s, code) = run_hostile(&[0xC1, 0x01, b'x']);
    every_connection_broke(&s, |e| e.parse, 2);
    assert_eq!(code, 1002);
}

#[test]
fn an_oversize_message_is_a_parse_error_closed_with_1009() {
    // A text frame claiming 2 MiB.
    let (s, code) = run_hostile(&[0x81, 127, 0, 0, 0, 0, 0, 0x20, 0, 0]);
    every_connection_broke(&s, |e| e.parse, 2);
    assert_eq!(code, 1009);
}

#[test]
fn a_close_mid_message_is_counted_as_closed() {
    // A frame of 100 bytes of which 3 arrive, then the server goes away.
    let server = serve(move |mut stream, _| async move {
        if !accept_upgrade(&mut stream).await {
            return;
        }
        let _ = client_frame(&mut stream).await;
        let mut wire = text_frame(&delivery(1));
        wire.extend_from_slice(&[0x81, 100, b'{', b'"', b'r']);
        let _ = stream.write_all(&wire).await;
    });
    let s = common::run_plan(json!({
        "target": server.url("/ws"), "duration_s": 1.0, "connections": 1,
        "behaviour": {"kind": "websocket", "events": ["e1"]}}));
    every_connection_broke(&s, |e| e.closed, 1);
}
