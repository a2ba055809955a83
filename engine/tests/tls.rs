//! TLS under the behaviours (issue 22), against a real rustls server on loopback with a
//! throwaway CA made here by rcgen (no key material is committed): kept-alive and new
//! connections over TLS 1.2 and 1.3, resumption on and off counted against the server's own
//! count, an untrusted certificate refused by kind, and a comet stream over TLS; and against
//! the Python reference server's HTTPS and RFC 5425 ports, comet, long poll, SSE, WebSocket
//! and octet-counted syslog, each counted against what the server sent or received.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{HandshakeKind, ServerConfig, ServerConnection, StreamOwned};
use serde_json::json;

/// A throwaway CA and a server certificate it signed for 127.0.0.1 and localhost; the CA's
/// PEM is written to a file of its own for the plan, and the server's certificate and key to
/// files for a server that reads them (all removed on drop).
struct Keys {
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
    ca_file: PathBuf,
    cert_file: PathBuf,
    key_file: PathBuf,
}

impl Drop for Keys {
    fn drop(&mut self) {
        for file in [&self.ca_file, &self.cert_file, &self.key_file] {
            let _ = std::fs::remove_file(file);
        }
    }
}

fn keys() -> Keys {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, SeqCst);
    let file = |what: &str, pem: String| {
        let path = std::env::temp_dir().join(format!(
            "serverlab-tls-test-{}-{n}-{what}.pem",
            std::process::id()
        ));
        std::fs::write(&path, pem).unwrap();
        path
    };
    Keys {
        chain: vec![cert.der().clone()],
        key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        ca_file: file("ca", ca_cert.pem()),
        cert_file: file("cert", cert.pem()),
        key_file: file("key", key.serialize_pem()),
    }
}

#[derive(Default)]
struct Counts {
    handshakes: AtomicU64,
    resumed: AtomicU64,
    requests: AtomicU64,
}

/// What the server answers to one request head: the bytes to write.
type Answer = fn(&str) -> Vec<u8>;

struct TlsServer {
    addr: SocketAddr,
    counts: Arc<Counts>,
}

/// A rustls server speaking only `version`, a thread per connection, answering each request
/// head with `answer` (keeping the connection unless the request said `Connection: close`).
fn tls_server(
    keys: &Keys,
    version: &'static rustls::SupportedProtocolVersion,
    answer: Answer,
) -> TlsServer {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[version])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            keys.chain.clone(),
            PrivateKeyDer::Pkcs8(keys.key.clone_key()),
        )
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let server_counts = counts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (config, counts) = (config.clone(), server_counts.clone());
            std::thread::spawn(move || {
                let session = ServerConnection::new(config).unwrap();
                let tls = StreamOwned::new(session, stream);
                serve_connection(tls, &counts, answer);
            });
        }
    });
    TlsServer { addr, counts }
}

fn serve_connection(
    tls: StreamOwned<ServerConnection, std::net::TcpStream>,
    counts: &Counts,
    answer: Answer,
) {
    let mut reader = BufReader::new(tls);
    let mut counted = false;
    loop {
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            match reader.read_line(&mut head) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        let tls = reader.get_mut();
        if !counted {
            counted = true;
            counts.handshakes.fetch_add(1, SeqCst);
            if tls.conn.handshake_kind() == Some(HandshakeKind::Resumed) {
                counts.resumed.fetch_add(1, SeqCst);
            }
        }
        counts.requests.fetch_add(1, SeqCst);
        if tls.write_all(&answer(&head)).is_err() {
            return;
        }
        if head.to_ascii_lowercase().contains("connection: close") {
            tls.conn.send_close_notify();
            let _ = tls.flush();
            return;
        }
    }
}

fn perf(_head: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}",
        common::PERF_BODY.len(),
        common::PERF_BODY
    )
    .into_bytes()
}

/// A comet answer: four deliveries in one chunked body, then a timeout line.
fn comet(_head: &str) -> Vec<u8> {
    let mut body: String = (1..=4).map(|s| common::delivery(s) + "\n").collect();
    body.push_str(common::TIMEOUT_ANSWER);
    body.push('\n');
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    )
    .into_bytes()
}

/// Every one of `requests` answered OK, and no error, over `version`.
fn all_answered(
    s: &serverlab_load::Summary,
    requests: u64,
    version: &rustls::SupportedProtocolVersion,
) {
    assert_eq!(
        (s.attempts.ok, s.errors.total()),
        (requests, 0),
        "{version:?} {:?}",
        s.errors
    );
}

fn tls_plan(server: &TlsServer, keys: &Keys, behaviour: serde_json::Value) -> serde_json::Value {
    json!({"target": format!("https://{}/perf", server.addr), "requests": 40, "connections": 2,
           "threads": 1, "behaviour": behaviour,
           "tls": {"ca_file": keys.ca_file}})
}

#[test]
fn kept_alive_and_new_connections_run_over_tls_1_2_and_1_3() {
    let keys = keys();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let server = tls_server(&keys, version, perf);
        let s = common::run_plan(tls_plan(&server, &keys, json!({"kind": "keepalive"})));
        all_answered(&s, 40, version);
        assert_eq!(
            s.traffic.tls_handshakes, 2,
            "{version:?}: one per connection"
        );
        assert_eq!(s.timings.tls_handshake_us.count, 2);
        // `--io auto` would take io_uring for cleartext keep-alive; TLS runs on epoll.
        assert_eq!(s.io_backend, "epoll", "{version:?}");
        let server = tls_server(&keys, version, perf);
        let s = common::run_plan(tls_plan(&server, &keys, json!({"kind": "new-connection"})));
        all_answered(&s, 40, version);
        assert_eq!(s.traffic.tls_handshakes, 40, "{version:?}: one per request");
        assert_eq!(server.counts.handshakes.load(SeqCst), 40);
        assert_eq!(server.counts.requests.load(SeqCst), 40);
    }
}

/// An answer of several full records (each read takes at most one record's room), so that a
/// read is cut short with records still waiting in the socket.
fn large(_head: &str) -> Vec<u8> {
    let body = "x".repeat(LARGE_BODY);
    format!("HTTP/1.1 200 OK\r\nContent-Length: {LARGE_BODY}\r\n\r\n{body}").into_bytes()
}
const LARGE_BODY: usize = 50_000;

#[test]
fn kept_alive_answers_larger_than_one_read_arrive_whole_over_tls_1_2_and_1_3() {
    let keys = keys();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let server = tls_server(&keys, version, large);
        let s = common::run_plan(tls_plan(&server, &keys, json!({"kind": "keepalive"})));
        all_answered(&s, 40, version);
        assert_eq!(
            s.traffic.bytes_read,
            40 * large("").len() as u64,
            "{version:?}: every answer whole, nothing more"
        );
        assert_eq!(server.counts.requests.load(SeqCst), 40);
    }
}

#[test]
fn resumed_handshakes_are_counted_and_resumption_can_be_turned_off() {
    let keys = keys();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        for resume in [true, false] {
            let server = tls_server(&keys, version, perf);
            let mut plan = tls_plan(&server, &keys, json!({"kind": "new-connection"}));
            plan["connections"] = json!(1);
            plan["tls"]["resume"] = json!(resume);
            let s = common::run_plan(plan);
            assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
            let server_resumed = server.counts.resumed.load(SeqCst);
            assert_eq!(
                s.traffic.tls_resumed, server_resumed,
                "{version:?} resume={resume}"
            );
            if resume {
                // Every connection after the first resumes the session of one before it.
                assert_eq!(s.traffic.tls_resumed, 39, "{version:?}");
            } else {
                assert_eq!(s.traffic.tls_resumed, 0, "{version:?}");
            }
        }
    }
}

#[test]
fn a_certificate_from_an_untrusted_ca_is_refused_as_a_handshake_error() {
    let (served, trusted) = (keys(), keys());
    let server = tls_server(&served, &rustls::version::TLS13, perf);
    let s = common::run_plan(tls_plan(&server, &trusted, json!({"kind": "keepalive"})));
    assert_eq!(s.attempts.answered, 0);
    assert_eq!(s.errors.tls_handshake, s.errors.total(), "{:?}", s.errors);
    assert!(s.errors.tls_handshake > 0);
    assert_eq!(server.counts.requests.load(SeqCst), 0);
}

#[test]
fn insecure_accepts_any_certificate_and_the_plan_records_it() {
    let (served, other) = (keys(), keys());
    let server = tls_server(&served, &rustls::version::TLS13, perf);
    let mut plan = tls_plan(&server, &other, json!({"kind": "keepalive"}));
    plan["tls"] = json!({"insecure": true, "group": "p256"});
    let s = common::run_plan(plan);
    assert_eq!((s.attempts.ok, s.errors.total()), (40, 0), "{:?}", s.errors);
    let recorded = serde_json::to_value(&s.plan).unwrap();
    assert_eq!(recorded["tls"]["insecure"], true);
}

#[test]
fn a_comet_stream_runs_over_tls() {
    let keys = keys();
    let server = tls_server(&keys, &rustls::version::TLS13, comet);
    let s = common::run_plan(json!({
        "target": format!("https://{}/push", server.addr), "requests": 1, "connections": 1,
        "behaviour": {"kind": "comet", "events": ["e1"], "duration_ms": 1000},
        "tls": {"ca_file": keys.ca_file}}));
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(s.events.received, 4);
    assert_eq!(s.events.comet_timeout_lines, 1);
    assert_eq!(s.events.lost + s.events.duplicated + s.events.reordered, 0);
}

#[test]
fn tls_plans_are_refused_without_a_trust_choice_or_on_io_uring() {
    let plan = |extra: serde_json::Value| {
        let mut p = json!({"target": "https://127.0.0.1:9/", "requests": 10, "connections": 1});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let plan = serverlab_load::Plan::from_value(p).unwrap();
        plan.validate().map(drop).map_err(|e| e.to_string())
    };
    let err = plan(json!({})).unwrap_err();
    assert!(
        err.contains("--tls-ca FILE") && err.contains("--insecure"),
        "{err}"
    );
    let err = plan(json!({"tls": {"insecure": true}, "io": "io_uring"})).unwrap_err();
    assert!(err.contains("io_uring loop carries no TLS"), "{err}");
    let err = plan(json!({"tls": {"insecure": true, "ca_file": "/nonexistent"}})).unwrap_err();
    assert!(err.contains("not both"), "{err}");
    let err = plan(json!({"tls": {"ca_file": "/nonexistent/ca.pem"}})).unwrap_err();
    assert!(err.contains("cannot read TLS CA file"), "{err}");
    let mut cleartext = json!({"target": "http://127.0.0.1:9/", "requests": 10, "connections": 1});
    cleartext["tls"] = json!({"insecure": true});
    let err = serverlab_load::Plan::from_value(cleartext)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("need an https://"), "{err}");
}

#[test]
fn the_tls_flags_make_the_plan_and_a_missing_trust_choice_exits_2_with_one_line() {
    let keys = keys();
    let server = tls_server(&keys, &rustls::version::TLS13, perf);
    let bin = env!("CARGO_BIN_EXE_serverlab-load");
    let url = format!("https://localhost:{}/perf", server.addr.port());
    let ca = keys.ca_file.to_str().unwrap();
    let out = std::process::Command::new(bin)
        .args([
            &url, "-n", "20", "-c", "2", "-t", "1", "--json", "--tls-ca", ca,
        ])
        .args(["--tls-resume", "off", "--tls-group", "p256"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = common::json_lines(&out.stdout);
    let summary = lines.last().unwrap();
    assert_eq!(summary["ok"], 20, "{summary}");
    assert_eq!(summary["tls_handshakes"], 2);
    assert_eq!(summary["plan"]["tls"]["resume"], false);
    assert_eq!(summary["plan"]["tls"]["group"], "p256");
    let out = std::process::Command::new(bin)
        .args([&url, "-n", "20", "-c", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--insecure"), "{stderr}");
}

/// The Python reference server (its venv comes from `make build`) serving HTTPS and RFC 5425
/// syslog with `keys`, besides cleartext HTTP for its control calls; stopped when dropped.
struct SecureReference {
    child: std::process::Child,
    port: u16,
    tls_port: u16,
    syslog_tls_port: u16,
    docroot: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl SecureReference {
    fn start(keys: &Keys) -> SecureReference {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let (port, tls_port, syslog_tls_port) = (free_port(), free_port(), free_port());
        let docroot = std::env::temp_dir().join(format!("tls-docroot-{port}"));
        std::fs::create_dir_all(&docroot).unwrap();
        let secure = |port: u16| {
            [
                port.to_string().into(),
                keys.cert_file.clone().into_os_string(),
                keys.key_file.clone().into_os_string(),
            ]
        };
        let child = std::process::Command::new(repo.join(".venv/bin/python"))
            .arg(repo.join("tests/reference_server.py"))
            .args(["--port", &port.to_string(), "--docroot"])
            .arg(&docroot)
            .arg("--tls")
            .args(secure(tls_port))
            .arg("--syslog-tls")
            .args(secure(syslog_tls_port))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("the reference server starts (make build makes .venv)");
        let server = SecureReference {
            child,
            port,
            tls_port,
            syslog_tls_port,
            docroot,
        };
        let began = std::time::Instant::now();
        while [port, tls_port, syslog_tls_port]
            .iter()
            .any(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_err())
        {
            assert!(began.elapsed().as_secs() < 30, "reference server up");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        server
    }

    /// A control call on the cleartext port (`POST` with a JSON body, or `GET`); the body.
    fn call(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let body = if method == "GET" {
            String::new()
        } else {
            body.to_string()
        };
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap()
    }

    fn https(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://127.0.0.1:{}{path}", self.tls_port)
    }
}

impl Drop for SecureReference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.docroot);
    }
}

/// Every emit cycle but the last (which the run's end may cut) reached every subscriber the
/// server counted, every client was one after the first, and nothing was lost, doubled or
/// reordered. (No kernel stamps over TLS, so no drain times to check.)
fn every_event_the_server_sent_arrived(out: &serverlab_load::Outcome, clients: u64, what: &str) {
    let s = &out.summary;
    assert_eq!(s.errors.total(), 0, "{what}: {:?}", s.errors);
    assert_eq!(
        (s.events.lost, s.events.duplicated, s.events.reordered),
        (0, 0, 0),
        "{what}"
    );
    assert_eq!(
        s.traffic.tls_handshakes, s.traffic.connections_opened,
        "{what}"
    );
    let lines = &out.emits;
    assert!(lines.len() >= 5, "{what}: {} emit cycles", lines.len());
    for line in &lines[..lines.len() - 1] {
        assert_eq!(line.received, line.total, "{what}: seq {}", line.seq);
    }
    for line in &lines[1..lines.len() - 1] {
        assert_eq!(line.total, clients, "{what}: seq {}", line.seq);
    }
    let received: u64 = lines.iter().map(|l| l.received).sum();
    assert_eq!(received, s.events.received, "{what}");
}

#[test]
fn comet_long_poll_sse_and_websocket_over_tls_get_every_event_the_server_sent() {
    let keys = keys();
    let server = SecureReference::start(&keys);
    server.call(
        "POST",
        "/event/set",
        json!({"name": "e1", "interval_ms": 100}),
    );
    for (scheme, path, behaviour) in [
        ("https", "/push", json!({"kind": "comet", "events": ["e1"]})),
        (
            "https",
            "/push",
            json!({"kind": "longpoll", "events": ["e1"], "duration_ms": 400}),
        ),
        ("https", "/sse", json!({"kind": "sse", "events": ["e1"]})),
        (
            "wss",
            "/ws",
            json!({"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 300}}),
        ),
    ] {
        let out = common::run_plan_outcome(json!({
            "target": server.https(scheme, path), "connections": 10, "duration_s": 1.5,
            "threads": 1, "behaviour": behaviour, "tls": {"ca_file": keys.ca_file}}));
        let what = behaviour["kind"].as_str().unwrap();
        every_event_the_server_sent_arrived(&out, 10, what);
        assert!(out.summary.traffic.tls_handshakes >= 10, "{what}");
    }
}

#[test]
fn octet_counted_syslog_over_tls_delivers_every_message_the_engine_sent() {
    let keys = keys();
    let server = SecureReference::start(&keys);
    let s = common::run_plan(json!({
        "target": format!("tls://127.0.0.1:{}", server.syslog_tls_port), "requests": 3000,
        "connections": 3, "threads": 1, "tls": {"ca_file": keys.ca_file},
        "behaviour": {"kind": "syslog", "syslog_framing": "octet", "message_bytes": 120}}));
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert_eq!(s.attempts.requests, 3000);
    assert_eq!(s.traffic.tls_handshakes, 3);
    // The receiver counts as it decrypts: wait for the last records to be read.
    let began = std::time::Instant::now();
    let received = loop {
        let stats = server.call("GET", "/stats", json!(null));
        let received = stats["syslog"]["received"].as_u64().unwrap();
        if received >= 3000 || began.elapsed().as_secs() >= 10 {
            break received;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(received, 3000);
}
