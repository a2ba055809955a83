//! HTTP/2 under the request behaviours (issue 22), against a real h2 server on loopback (the
//! `h2` crate's server on tokio; over TLS by tokio-rustls with a throwaway rcgen CA): streams
//! counted by the server equal the engine's requests, `streams` clients share a connection
//! and keep that many streams open at once, and the server's GOAWAY and RST_STREAM are
//! counted by kind. h2c is prior knowledge on an http:// target; h2 is agreed by ALPN.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};

/// What the server does with each stream.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Answers 200 with a small body after a short wait (so streams overlap).
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
    while let Some(Ok((_request, mut respond))) = connection.accept().await {
        counts.streams.fetch_add(1, SeqCst);
        match fault {
            Fault::Reset => respond.send_reset(Reason::REFUSED_STREAM),
            Fault::GoAway => {
                connection.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                unanswered.push(respond);
            }
            Fault::None => {
                let (counts, open) = (counts.clone(), open.clone());
                tokio::spawn(async move {
                    let now = open.fetch_add(1, SeqCst) + 1;
                    counts.most_at_once.fetch_max(now, SeqCst);
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    open.fetch_sub(1, SeqCst);
                    let answer = http::Response::new(());
                    if let Ok(mut body) = respond.send_response(answer, false) {
                        let _ = body.send_data(Bytes::from_static(b"hello over h2"), true);
                    }
                });
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
    let ca_file =
        std::env::temp_dir().join(format!("serverlab-h2-test-{}.pem", std::process::id()));
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
