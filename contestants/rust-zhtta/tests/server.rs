//! The real server binary on loopback, driven over real sockets.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIG_LEN: usize = 3 * 1024 * 1024 + 17;

struct Server {
    child: Child,
    port: u16,
    syslog_port: u16,
    docroot: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(self.docroot.parent().unwrap());
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn big_file() -> Vec<u8> {
    (0..BIG_LEN).map(|i| (i * 7 % 251) as u8).collect()
}

impl Server {
    fn start(name: &str, tunables: &[&str]) -> Server {
        let base = std::env::temp_dir().join(format!("zhtta-it-{name}-{}", std::process::id()));
        let docroot = base.join("www");
        std::fs::create_dir_all(&docroot).unwrap();
        std::fs::write(docroot.join("big.bin"), big_file()).unwrap();
        std::fs::write(docroot.join("small.txt"), b"small\n").unwrap();
        let (port, syslog_port) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_rust-zhtta"))
            .args([
                "--port",
                &port.to_string(),
                "--syslog-port",
                &syslog_port.to_string(),
            ])
            .arg("--docroot")
            .arg(&docroot)
            .args(tunables)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server {
            child,
            port,
            syslog_port,
            docroot,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(Instant::now() < deadline, "server did not start");
            thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    fn get(&self, target: &str) -> (u16, Vec<u8>) {
        let mut stream = self.connect();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        read_response(&mut stream)
    }

    fn post(&self, target: &str, body: &str) -> (u16, Vec<u8>) {
        let mut stream = self.connect();
        post_on(&mut stream, target, body, "");
        read_response(&mut stream)
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::from_slice(&self.get("/stats").1).unwrap()
    }
}

/// `headers`: extra header lines, each ending in CRLF.
fn post_on(stream: &mut TcpStream, target: &str, body: &str, headers: &str) {
    let len = body.len();
    write!(
        stream,
        "POST {target} HTTP/1.1\r\n{headers}Content-Length: {len}\r\n\r\n{body}"
    )
    .unwrap();
}

/// Reads one response with a Content-Length body, leaving the connection usable.
fn read_response(stream: &mut TcpStream) -> (u16, Vec<u8>) {
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

fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap()
}

#[test]
fn every_read_mode_and_the_cache_serve_the_same_bytes() {
    let configs: [(&str, &[&str]); 3] = [
        ("whole", &["--read", "whole"]),
        (
            "chunked",
            &[
                "--read",
                "chunked",
                "--chunk-size",
                "1KB",
                "--responders",
                "3",
            ],
        ),
        (
            "cached",
            &[
                "--read",
                "chunked",
                "--schedule",
                "spt",
                "--cache",
                "8",
                "--responders",
                "4",
            ],
        ),
    ];
    for (name, tunables) in configs {
        let server = Server::start(name, tunables);
        for _ in 0..2 {
            let (status, body) = server.get("/files/big.bin");
            assert_eq!(status, 200, "{name}");
            assert!(body == big_file(), "{name}: wrong bytes");
        }
        assert_eq!(server.get("/files/../secret").0, 403);
        assert_eq!(server.get("/files/nope").0, 404);
    }
}

#[test]
fn concurrent_file_requests_on_many_responders_all_complete() {
    let server = Server::start("concurrent", &["--responders", "2", "--schedule", "spt"]);
    let server = &server;
    thread::scope(|scope| {
        for i in 0..8 {
            scope.spawn(move || {
                let target = if i % 2 == 0 {
                    "/files/big.bin"
                } else {
                    "/files/small.txt"
                };
                let mut stream = server.connect();
                for _ in 0..3 {
                    write!(stream, "GET {target} HTTP/1.1\r\n\r\n").unwrap();
                    assert_eq!(read_response(&mut stream).0, 200);
                }
            });
        }
    });
}

#[test]
fn long_poll_and_comet_receive_an_emit_with_its_seq() {
    let server = Server::start("push", &[]);
    let mut poll = server.connect();
    post_on(
        &mut poll,
        "/push",
        r#"{"type":"longpoll","events":["tick"],"duration_ms":5000}"#,
        "",
    );
    let mut comet = server.connect();
    post_on(
        &mut comet,
        "/push",
        r#"{"type":"comet","events":["tick"],"duration_ms":700}"#,
        // So that the end of the stream is also the end of the connection.
        "Connection: close\r\n",
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats()["requests"]["open_push"] != 2 {
        assert!(Instant::now() < deadline, "push requests not registered");
        thread::sleep(Duration::from_millis(10));
    }
    let (status, body) = server.post("/event/set", r#"{"name":"tick","interval_ms":200}"#);
    assert_eq!(
        (status, json(&body)["replaced"].clone()),
        (200, false.into())
    );
    let (status, body) = read_response(&mut poll);
    let answer = json(&body);
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["event"]["seq"], 1);
    assert_eq!(answer["response"]["event"]["connections"]["total"], 2);
    assert!(!String::from_utf8_lossy(&body).contains("timeout"));
    let mut stream = Vec::new();
    comet.read_to_end(&mut stream).unwrap();
    let text = String::from_utf8_lossy(&stream);
    assert!(text.contains("Transfer-Encoding: chunked"));
    assert!(text.contains(r#""seq":1"#) && text.contains(r#""timeout":true"#));
    assert!(text.ends_with("0\r\n\r\n"));
    let (status, body) = server.post("/event/clear", "");
    assert_eq!(
        (status, json(&body)["cleared"].clone()),
        (200, serde_json::json!(["tick"]))
    );
}

#[test]
fn syslog_messages_over_tcp_and_udp_are_counted() {
    let server = Server::start("syslog", &[]);
    let mut tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, server.syslog_port)).unwrap();
    // Newline-framed, then octet-counted (with a newline inside), then one split in two.
    tcp.write_all(b"<14>one\n11 <14>two\nxxx5 <1").unwrap();
    tcp.write_all(b"4>a").unwrap();
    drop(tcp);
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    udp.send_to(b"<14>udp\n", (Ipv4Addr::LOCALHOST, server.syslog_port))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let syslog = server.stats()["syslog"].clone();
        if syslog["received"] == 4 {
            assert_eq!(syslog["bytes"], 7 + 11 + 5 + 7);
            break;
        }
        assert!(Instant::now() < deadline, "syslog not counted: {syslog}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hostile_input_gets_an_answer_and_the_server_stays_up() {
    let server = Server::start("hostile", &[]);
    let mut garbage = server.connect();
    garbage.write_all(b"\x00\x01 NOT HTTP\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut garbage).0, 400);
    let mut huge = server.connect();
    let filler = "a".repeat(70_000);
    write!(huge, "GET /perf HTTP/1.1\r\nX: {filler}\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut huge).0, 431);
    assert_eq!(server.post("/event/set", "{").0, 400);
    assert_eq!(
        server.post("/push", &format!("{{\"pad\":\"{filler}\"}}")).0,
        413
    );
    let (status, body) = server.get("/perf");
    assert_eq!((status, body.len()), (200, 84));
}

/// One responder, held up writing a file nobody reads yet; meanwhile a large and then a
/// small request queue up. Under SPT the small one is served next, while the large one is
/// still unread (under FIFO the responder would be stuck on the large one and the small
/// one would never come).
#[test]
fn spt_serves_the_small_file_before_an_earlier_large_one() {
    let server = Server::start("spt", &["--schedule", "spt", "--read", "chunked"]);
    let huge = vec![b'h'; 64 * 1024 * 1024];
    std::fs::write(server.docroot.join("huge.bin"), &huge).unwrap();
    let mut first = server.connect();
    write!(first, "GET /files/huge.bin HTTP/1.1\r\n\r\n").unwrap();
    thread::sleep(Duration::from_millis(300));
    let mut large = server.connect();
    write!(large, "GET /files/huge.bin HTTP/1.1\r\n\r\n").unwrap();
    let mut small = server.connect();
    write!(small, "GET /files/small.txt HTTP/1.1\r\n\r\n").unwrap();
    thread::sleep(Duration::from_millis(300));
    let (status, body) = read_response(&mut first);
    assert_eq!((status, body.len()), (200, huge.len()));
    small
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(read_response(&mut small), (200, b"small\n".to_vec()));
    assert_eq!(read_response(&mut large).1.len(), huge.len());
}
