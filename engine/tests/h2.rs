//! HTTP/2 under the request behaviours (issue 22), against a real h2 server on loopback (the
//! `h2` crate's server on tokio; over TLS by tokio-rustls with a throwaway rcgen CA): streams
//! counted by the server equal the engine's requests, `streams` clients share a connection
//! and keep that many streams open at once, and the server's GOAWAY and RST_STREAM are
//! counted by kind. h2c is prior knowledge on an http:// target; h2 is agreed by ALPN. The
//! server also serves the push shapes of spec/SPEC.md as streams (a long poll's answer, a
//! comet stream and an SSE stream of a few numbered events each): every event it sent is
//! an event the engine counted, in order, with `streams` subscriptions to a connection.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use serde_json::{json, Value};
use serverlab_load::Summary;
use tokio::io::{AsyncRead, AsyncWrite};

/// What the server does with each stream.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Answers each stream by its path (`answer`): push shapes, or a small body.
    None,
    /// Resets every stream with REFUSED_STREAM.
    Reset,
    /// Takes the connection's first stream, then ends the connection with GOAWAY
    /// (ENHANCE_YOUR_CALM) without answering it.
    GoAway,
}

#[derive(Default)]
struct Counts {
    connections: AtomicU64,
    streams: AtomicU64,
    /// The most streams one connection had open at once.
    most_at_once: AtomicU64,
    /// Push events sent: long-poll answers, comet lines and SSE messages with an event.
    events_sent: AtomicU64,
    /// Long polls answered (each answer's `seq`).
    polls: AtomicU64,
}

/// Events each comet or SSE stream carries before its timeout message and its end.
const STREAM_EVENTS: u64 = 5;

/// A stream counted as open on its connection until dropped, which a handler does before
/// its last frame: the client's next stream then never finds this one still counted.
struct Open {
    on_connection: Arc<AtomicU64>,
}

impl Open {
    fn new(on_connection: &Arc<AtomicU64>, counts: &Counts) -> Open {
        let now = on_connection.fetch_add(1, SeqCst) + 1;
        counts.most_at_once.fetch_max(now, SeqCst);
        Open {
            on_connection: on_connection.clone(),
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.on_connection.fetch_sub(1, SeqCst);
    }
}

struct H2Server {
    addr: SocketAddr,
    counts: Arc<Counts>,
}

/// An h2 server on its own thread; with `tls`, it speaks TLS and offers only `h2` by ALPN.
fn h2_server(fault: Fault, tls: Option<Arc<rustls::ServerConfig>>) -> H2Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let served = counts.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                let (counts, tls) = (served.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(config) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(config);
                            if let Ok(stream) = acceptor.accept(socket).await {
                                serve_connection(stream, counts, fault).await;
                            }
                        }
                        None => serve_connection(socket, counts, fault).await,
                    }
                });
            }
        });
    });
    H2Server { addr, counts }
}

async fn serve_connection<T>(io: T, counts: Arc<Counts>, fault: Fault)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let Ok(mut connection) = h2::server::handshake(io).await else {
        return;
    };
    counts.connections.fetch_add(1, SeqCst);
    let open = Arc::new(AtomicU64::new(0));
    let mut unanswered = Vec::new();
    while let Some(Ok((request, mut respond))) = connection.accept().await {
        counts.streams.fetch_add(1, SeqCst);
        match fault {
            Fault::Reset => respond.send_reset(Reason::REFUSED_STREAM),
            Fault::GoAway => {
                connection.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                unanswered.push(respond);
            }
            Fault::None => {
                let stream = Open::new(&open, &counts);
                tokio::spawn(answer(request, respond, counts.clone(), stream));
            }
        }
    }
    // A closing server lets its GOAWAY be read before its socket goes: closed at once with
    // the client's last frames unread, the kernel would send a reset that overtakes it.
    if fault == Fault::GoAway {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(unanswered);
}

/// Serves one stream by its path: `/push` and `/sse` as spec/SPEC.md's push shapes, any
/// other as a small answer after a short wait (so streams overlap).
async fn answer(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    counts: Arc<Counts>,
    open: Open,
) {
    match request.uri().path() {
        "/push" => push(request, respond, counts, open).await,
        "/sse" => sse(request, respond, counts, open).await,
        _ => {
            tokio::time::sleep(Duration::from_millis(3)).await;
            drop(open);
            if let Ok(mut body) = respond.send_response(http::Response::new(()), false) {
                let _ = body.send_data(Bytes::from_static(b"hello over h2"), true);
            }
        }
    }
}

/// A `200` head with `content_type`; the body follows as DATA frames.
fn head(respond: &mut SendResponse<Bytes>, content_type: &str) -> Option<h2::SendStream<Bytes>> {
    let answer = http::Response::builder()
        .header("content-type", content_type)
        .body(())
        .unwrap();
    respond.send_response(answer, false).ok()
}

/// `POST /push`: a long poll is answered by one delivery (the server's next `seq`); a comet
/// stream gets `STREAM_EVENTS` lines numbered from 1, then the timeout line and its end.
/// Anything else is a `400`, which the engine counts as an error.
async fn push(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    counts: Arc<Counts>,
    open: Open,
) {
    let post = request.method() == http::Method::POST;
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    let subscription: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let events = |n| counts.events_sent.fetch_add(n, SeqCst);
    match subscription["type"].as_str().filter(|_| post) {
        Some("longpoll") => {
            tokio::time::sleep(Duration::from_millis(3)).await;
            let seq = counts.polls.fetch_add(1, SeqCst) + 1;
            events(1);
            drop(open);
            if let Some(mut out) = head(&mut respond, "application/json") {
                let _ = out.send_data(common::delivery(seq).into(), true);
            }
        }
        Some("comet") => {
            let Some(mut out) = head(&mut respond, "application/x-ndjson") else {
                return;
            };
            for seq in 1..=STREAM_EVENTS {
                events(1);
                let _ = out.send_data(format!("{}\n", common::delivery(seq)).into(), false);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            drop(open);
            let _ = out.send_data(format!("{}\n", common::TIMEOUT_ANSWER).into(), true);
        }
        _ => {
            let refused = http::Response::builder().status(400).body(()).unwrap();
            let _ = respond.send_response(refused, true);
        }
    }
}

/// `GET /sse`: the opening message at the position `Last-Event-ID` names (`e1:0` without
/// one), `STREAM_EVENTS` event messages numbered on from there, the timeout message, the end.
async fn sse(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    counts: Arc<Counts>,
    open: Open,
) {
    let last: u64 = request
        .headers()
        .get("last-event-id")
        .and_then(|id| id.to_str().ok()?.strip_prefix("e1:")?.parse().ok())
        .unwrap_or(0);
    let Some(mut out) = head(&mut respond, "text/event-stream") else {
        return;
    };
    let _ = out.send_data(format!("id: e1:{last}\n\n").into(), false);
    for seq in last + 1..=last + STREAM_EVENTS {
        counts.events_sent.fetch_add(1, SeqCst);
        let message = format!("id: e1:{seq}\ndata: {}\n\n", common::delivery(seq));
        let _ = out.send_data(message.into(), false);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(open);
    let timeout = format!("event: timeout\ndata: {}\n\n", common::TIMEOUT_ANSWER);
    let _ = out.send_data(timeout.into(), true);
}

fn h2c_plan(server: &H2Server, extra: Value) -> Value {
    let mut plan = json!({"target": format!("http://{}/perf", server.addr), "requests": 200,
        "connections": 2, "threads": 1, "timeout_ms": 3000,
        "http2": {"mode": "h2c", "streams": 4}});
    plan.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    plan
}

#[test]
fn every_stream_the_server_saw_is_a_request_of_the_engine_and_streams_share_connections() {
    let server = h2_server(Fault::None, None);
    let s = common::run_plan(h2c_plan(&server, json!({})));
    assert_eq!(
        (s.attempts.ok, s.errors.total()),
        (200, 0),
        "{:?}",
        s.errors
    );
    assert_eq!(server.counts.streams.load(SeqCst), s.attempts.requests);
    assert_eq!(
        server.counts.connections.load(SeqCst),
        2,
        "4 streams to each of 2"
    );
    assert_eq!(s.traffic.connections_opened, 2);
    assert_eq!(
        server.counts.most_at_once.load(SeqCst),
        4,
        "--streams 4 at once"
    );
    assert_eq!(s.timings.latency_us.count, 200, "a latency per stream");
}

#[test]
fn a_warm_up_phase_keeps_its_connections_and_leaves_its_streams_out_of_the_summary() {
    let server = h2_server(Fault::None, None);
    let plan = h2c_plan(
        &server,
        json!({"requests": null, "duration_s": 0.5, "interval_ms": 250, "warmup_max_s": 0.5}),
    );
    let s = common::run_plan(plan);
    assert_eq!(s.warmup.as_ref().map(|w| w.by.as_str()), Some("cap"));
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(
        server.counts.connections.load(SeqCst),
        2,
        "the measured window goes on over the warm-up's connections"
    );
    assert_eq!(
        s.traffic.connections_opened, 0,
        "none opened in the measured window"
    );
    let streams = server.counts.streams.load(SeqCst);
    assert!(
        0 < s.attempts.requests && s.attempts.requests < streams,
        "{} of {streams} streams in the measured window",
        s.attempts.requests
    );
}

#[test]
fn a_new_connection_per_request_carries_one_stream_each() {
    let server = h2_server(Fault::None, None);
    let plan = h2c_plan(
        &server,
        json!({"requests": 20, "behaviour": {"kind": "new-connection"},
               "http2": {"mode": "h2c"}}),
    );
    let s = common::run_plan(plan);
    assert_eq!((s.attempts.ok, s.errors.total()), (20, 0), "{:?}", s.errors);
    assert_eq!(server.counts.connections.load(SeqCst), 20);
    assert_eq!(server.counts.streams.load(SeqCst), 20);
}

#[test]
fn streams_the_server_resets_are_counted_as_rst_stream_and_keep_the_connection() {
    let server = h2_server(Fault::Reset, None);
    let plan = h2c_plan(&server, json!({"requests": 30, "connections": 1}));
    let s = common::run_plan(plan);
    assert_eq!(s.errors.h2_reset, 30, "{:?}", s.errors);
    assert_eq!(s.errors.total(), 30);
    assert_eq!(server.counts.streams.load(SeqCst), 30);
    assert_eq!(server.counts.connections.load(SeqCst), 1);
}

#[test]
fn a_goaway_ending_a_stream_is_counted_as_goaway_and_the_client_connects_again() {
    let server = h2_server(Fault::GoAway, None);
    let plan = h2c_plan(
        &server,
        json!({"requests": 6, "connections": 1, "http2": {"mode": "h2c"}}),
    );
    let s = common::run_plan(plan);
    assert_eq!(s.errors.h2_goaway, 6, "{:?}", s.errors);
    assert_eq!(s.errors.total(), 6);
    assert_eq!(server.counts.connections.load(SeqCst), 6, "one per GOAWAY");
}

/// A throwaway CA's file and a server configuration for 127.0.0.1 offering only `h2`.
fn tls_config() -> (Arc<rustls::ServerConfig>, PathBuf) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    // One file per call: the tests of this binary run at once, in one process.
    static MADE: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "serverlab-h2-test-{}-{}.pem",
        std::process::id(),
        MADE.fetch_add(1, SeqCst)
    );
    let ca_file = std::env::temp_dir().join(name);
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key.into())
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    (Arc::new(config), ca_file)
}

#[test]
fn h2_over_tls_is_agreed_by_alpn_and_counts_streams_as_h2c_does() {
    let (config, ca_file) = tls_config();
    let server = h2_server(Fault::None, Some(config));
    let plan = json!({"target": format!("https://{}/perf", server.addr), "requests": 120,
        "connections": 2, "threads": 1, "timeout_ms": 3000,
        "tls": {"ca_file": ca_file}, "http2": {"mode": "h2", "streams": 3}});
    let s = common::run_plan(plan);
    std::fs::remove_file(&ca_file).unwrap();
    assert_eq!(
        (s.attempts.ok, s.errors.total()),
        (120, 0),
        "{:?}",
        s.errors
    );
    assert_eq!(server.counts.streams.load(SeqCst), 120);
    assert_eq!(server.counts.connections.load(SeqCst), 2);
    assert_eq!(s.traffic.tls_handshakes, 2);
    assert_eq!(server.counts.most_at_once.load(SeqCst), 3);
}

/// Runs `behaviour` against a fresh server's `path` over h2c and then over h2 (TLS by ALPN):
/// `requests` subscriptions by 2 connections of `streams` clients each; `check` judges each
/// run's summary beside its server's counts.
fn over_h2c_and_h2(
    fault: Fault,
    path: &str,
    behaviour: Value,
    (requests, streams): (u64, u64),
    check: impl Fn(&Summary, &Counts, &str),
) {
    for mode in ["h2c", "h2"] {
        let (server, tls) = match mode {
            "h2c" => (h2_server(fault, None), None),
            _ => {
                let (config, ca_file) = tls_config();
                (h2_server(fault, Some(config)), Some(ca_file))
            }
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut plan = json!({"target": format!("{scheme}://{}{path}", server.addr),
            "requests": requests, "connections": 2, "threads": 1, "timeout_ms": 3000,
            "behaviour": behaviour.clone(), "http2": {"mode": mode, "streams": streams}});
        if let Some(ca_file) = &tls {
            plan["tls"] = json!({ "ca_file": ca_file });
        }
        let s = common::run_plan(plan);
        if let Some(ca_file) = &tls {
            std::fs::remove_file(ca_file).unwrap();
        }
        check(&s, &server.counts, mode);
    }
}

#[test]
fn long_polls_over_h2_are_streams_and_every_answer_sent_is_counted() {
    let poll = json!({"kind": "longpoll", "events": ["e1"], "duration_ms": 1000});
    over_h2c_and_h2(Fault::None, "/push", poll, (40, 4), |s, server, mode| {
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (40, 0),
            "{mode}: {:?}",
            s.errors
        );
        assert_eq!(server.events_sent.load(SeqCst), 40, "{mode}");
        assert_eq!(s.events.received, 40, "{mode}");
        assert_eq!(s.events.longpoll_event_answers, 40, "{mode}");
        assert_eq!(s.events.duplicated + s.events.reordered, 0, "{mode}");
        assert_eq!(s.timings.event_delay_us.count, 40, "{mode}");
        assert_eq!(server.streams.load(SeqCst), 40, "{mode}: a stream per poll");
        assert_eq!(
            server.connections.load(SeqCst),
            2,
            "{mode}: 4 clients to each of 2"
        );
        assert_eq!(
            server.most_at_once.load(SeqCst),
            4,
            "{mode}: 4 polls held at once"
        );
    });
}

/// What the comet and SSE runs share: `streams` streams answered without error, every event
/// the server sent counted once and in order, `held` streams at once on each of 2 connections.
fn every_event_in_order(s: &Summary, server: &Counts, mode: &str, streams: u64, held: u64) {
    let answered = (s.attempts.ok, s.errors.total());
    assert_eq!(answered, (streams, 0), "{mode}: {:?}", s.errors);
    let sent = server.events_sent.load(SeqCst);
    assert_eq!(sent, streams * STREAM_EVENTS, "{mode}");
    assert_eq!(s.events.received, sent, "{mode}");
    let anomalies = s.events.lost + s.events.duplicated + s.events.reordered;
    assert_eq!(
        anomalies, 0,
        "{mode}: each stream went on where the last stopped"
    );
    assert_eq!(server.connections.load(SeqCst), 2, "{mode}");
    let at_once = server.most_at_once.load(SeqCst);
    assert_eq!(
        at_once, held,
        "{mode}: streams held at once on a connection"
    );
}

#[test]
fn comet_streams_over_h2_count_every_line_in_order() {
    let comet = json!({"kind": "comet", "events": ["e1"], "duration_ms": 2000});
    over_h2c_and_h2(Fault::None, "/push", comet, (12, 3), |s, server, mode| {
        every_event_in_order(s, server, mode, 12, 3);
        assert_eq!(s.events.comet_timeout_lines, 12, "{mode}");
    });
}

#[test]
fn sse_streams_over_h2_reconnect_with_their_last_event_id_and_lose_nothing() {
    let sse = json!({"kind": "sse", "events": ["e1"], "duration_ms": 2000});
    over_h2c_and_h2(Fault::None, "/sse", sse, (12, 3), |s, server, mode| {
        every_event_in_order(s, server, mode, 12, 3);
        assert_eq!(s.events.sse_timeout_messages, 12, "{mode}");
        assert_eq!(s.events.reconnects, 12 - 6, "{mode}: 6 clients, 12 streams");
        assert_eq!(
            s.timings.handshake_us.count, 12,
            "{mode}: a head per stream"
        );
    });
}

#[test]
fn push_streams_the_server_resets_or_ends_by_goaway_are_counted_by_kind() {
    let comet = json!({"kind": "comet", "events": ["e1"], "duration_ms": 2000});
    over_h2c_and_h2(Fault::Reset, "/push", comet, (8, 2), |s, _, mode| {
        assert_eq!(
            (s.errors.h2_reset, s.errors.total()),
            (8, 8),
            "{mode}: {:?}",
            s.errors
        );
    });
    let sse = json!({"kind": "sse", "events": ["e1"], "duration_ms": 2000});
    over_h2c_and_h2(Fault::GoAway, "/sse", sse, (4, 1), |s, server, mode| {
        assert_eq!(
            (s.errors.h2_goaway, s.errors.total()),
            (4, 4),
            "{mode}: {:?}",
            s.errors
        );
        assert_eq!(server.connections.load(SeqCst), 4, "{mode}: one per GOAWAY");
    });
}

#[test]
fn a_websocket_over_h2_is_refused_for_want_of_rfc_8441() {
    let plan = json!({"target": "http://127.0.0.1:9/ws", "duration_s": 1, "connections": 1,
        "behaviour": {"kind": "websocket", "events": ["e1"]}, "http2": {"mode": "h2c"}});
    let refused = serverlab_load::Plan::from_value(plan)
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(refused.contains("RFC 8441"), "{refused}");
    let poll = json!({"target": "http://127.0.0.1:9/push", "requests": 1, "connections": 1,
        "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 10},
        "http2": {"mode": "h2c"}});
    let plan = serverlab_load::Plan::from_value(poll).unwrap();
    assert!(plan.validate().is_ok(), "a long poll goes over h2c");
}

/// The engine binary with `args`: its exit code and stderr.
fn engine(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_serverlab-load"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn streams_without_h2_and_every_h2_contradiction_are_refused_in_one_line() {
    let (code, err) = engine(&[
        "http://127.0.0.1:9/",
        "-n",
        "1",
        "-c",
        "1",
        "--streams",
        "4",
    ]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("--streams needs --h2 or --h2c"), "{err}");
    let args = [
        "http://127.0.0.1:9/",
        "-n",
        "1",
        "-c",
        "1",
        "--h2",
        "--streams",
        "0",
        "--new-connection",
        "--io",
        "io_uring",
    ];
    let (code, err) = engine(&args);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    for said in ["https:// target", "streams = 0", "io_uring"] {
        assert!(err.contains(said), "{said} missing from {err}");
    }
}
