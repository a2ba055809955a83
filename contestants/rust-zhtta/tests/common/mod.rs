//! The harness of the integration tests: the real server binary, started on free loopback
//! ports with a throwaway certificate (made here, never committed), and a small HTTP client.

// Each test file uses a part of the harness.
#![allow(dead_code)]

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

pub const BIG_LEN: usize = 3 * 1024 * 1024 + 17;

pub struct Server {
    child: Child,
    pub port: u16,
    pub syslog_port: u16,
    /// HTTPS (spec §12) and RFC 5425 syslog (spec §15), with the certificate below.
    pub tls_port: u16,
    pub syslog_tls_port: u16,
    /// tonic's ports (spec §16): gRPC with prior knowledge, and over TLS by ALPN h2.
    pub grpc_port: u16,
    pub grpc_tls_port: u16,
    pub docroot: PathBuf,
    /// The server's self-signed certificate, the only one its TLS clients trust.
    pub certificate: CertificateDer<'static>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(self.docroot.parent().unwrap());
    }
}

/// A loopback port free now and never handed out before in this process. The tests run in
/// parallel, each server on six ports found here and bound later: without the record, two
/// servers could be given one port, and a test could then talk to another test's server
/// (CI once read a reset on `/stats` mid-test: what another test's server, killed as its
/// test ended, would give).
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if handed_out.insert(port) {
            return port;
        }
    }
}

pub fn big_file() -> Vec<u8> {
    (0..BIG_LEN).map(|i| (i * 7 % 251) as u8).collect()
}

impl Server {
    pub fn start(name: &str, tunables: &[&str]) -> Server {
        let base = std::env::temp_dir().join(format!("zhtta-it-{name}-{}", std::process::id()));
        let docroot = base.join("www");
        std::fs::create_dir_all(&docroot).unwrap();
        std::fs::write(docroot.join("big.bin"), big_file()).unwrap();
        std::fs::write(docroot.join("small.txt"), b"small\n").unwrap();
        let certificate = write_certificate(&base);
        let ports = [0; 6].map(|_| free_port());
        let [
            port,
            syslog_port,
            tls_port,
            syslog_tls_port,
            grpc_port,
            grpc_tls_port,
        ] = ports.map(|p| p.to_string());
        let child = Command::new(env!("CARGO_BIN_EXE_rust-zhtta"))
            .args(["--port", &port, "--syslog-port", &syslog_port])
            .args([
                "--tls-port",
                &tls_port,
                "--syslog-tls-port",
                &syslog_tls_port,
            ])
            .args(["--grpc-port", &grpc_port, "--grpc-tls-port", &grpc_tls_port])
            .arg("--tls-cert")
            .arg(base.join("server.pem"))
            .arg("--tls-key")
            .arg(base.join("server.key"))
            .arg("--docroot")
            .arg(&docroot)
            .args(tunables)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server {
            child,
            port: ports[0],
            syslog_port: ports[1],
            tls_port: ports[2],
            syslog_tls_port: ports[3],
            grpc_port: ports[4],
            grpc_tls_port: ports[5],
            docroot,
            certificate,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, server.port)).is_err() {
            assert!(Instant::now() < deadline, "server did not start");
            thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    pub fn get(&self, target: &str) -> (u16, Vec<u8>) {
        let mut stream = self.connect();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        read_response(&mut stream)
    }

    pub fn post(&self, target: &str, body: &str) -> (u16, Vec<u8>) {
        let mut stream = self.connect();
        post_on(&mut stream, target, body, "");
        read_response(&mut stream)
    }

    pub fn stats(&self) -> serde_json::Value {
        serde_json::from_slice(&self.get("/stats").1).unwrap()
    }
}

/// `headers`: extra header lines, each ending in CRLF.
pub fn post_on(stream: &mut impl Write, target: &str, body: &str, headers: &str) {
    let len = body.len();
    write!(
        stream,
        "POST {target} HTTP/1.1\r\n{headers}Content-Length: {len}\r\n\r\n{body}"
    )
    .unwrap();
}

/// Reads one response with a Content-Length body, leaving the connection usable.
pub fn read_response(stream: &mut impl Read) -> (u16, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "connection closed mid-head"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("Content-Length");
    assert!(head.contains("\r\nDate: "));
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    (status, body)
}

pub fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap()
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// A self-signed ECDSA P-256 certificate for 127.0.0.1, as `server.pem` and `server.key`
/// (PKCS#8, as serverlab hands them over) in `folder`.
fn write_certificate(folder: &std::path::Path) -> CertificateDer<'static> {
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let made = rcgen::generate_simple_self_signed(names).unwrap();
    std::fs::write(folder.join("server.pem"), made.cert.pem()).unwrap();
    std::fs::write(folder.join("server.key"), made.signing_key.serialize_pem()).unwrap();
    made.cert.der().clone()
}

pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A TLS client (rustls, ring) trusting only the server's certificate, limited to
/// `versions` and offering `alpn`.
pub fn tls_client(
    server: &Server,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&str],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(server.certificate.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Arc::new(config)
}

/// A TLS connection to `port`, its handshake done (an error if the server refused it).
pub fn connect_tls(port: u16, config: Arc<ClientConfig>) -> std::io::Result<TlsStream> {
    let tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let session = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let mut stream = StreamOwned::new(session, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// Reads to the end; `Ok` only when the server sent close_notify before closing TCP
/// (rustls reports a close without it as an UnexpectedEof error).
pub fn read_to_close_notify(stream: &mut TlsStream) -> std::io::Result<Vec<u8>> {
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest)?;
    Ok(rest)
}
