//! TLS (spec §12) and RFC 5425 syslog over TLS (spec §15) on the real server binary, with
//! rustls as the client, trusting only the certificate the harness made for the server.

mod common;

use common::{
    Server, TlsStream, big_file, connect_tls, json, post_on, read_response, read_to_close_notify,
    tls_client, wait_until,
};
use rustls::SupportedProtocolVersion;
use rustls::version::{TLS12, TLS13};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpStream};
use std::thread;
use std::time::Duration;
use tungstenite::Message;

fn https(server: &Server, version: &'static SupportedProtocolVersion) -> TlsStream {
    connect_tls(
        server.tls_port,
        tls_client(server, &[version], &["http/1.1"]),
    )
    .unwrap()
}

fn upload_on(stream: &mut TlsStream, body: &[u8]) -> serde_json::Value {
    let head = format!(
        "POST /upload HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let (status, answer) = read_response(stream);
    assert_eq!(status, 200);
    json(&answer)
}

#[test]
fn every_kind_of_answer_comes_over_tls_12_and_13_and_a_close_sends_close_notify() {
    let server = Server::start(
        "tls-answers",
        &["--read", "chunked", "--chunk-size", "64KB"],
    );
    let before = server.stats();
    let upload = vec![b'u'; 300_000];
    let digest = Sha256::digest(&upload);
    for version in [&TLS12, &TLS13] {
        let mut stream = https(&server, version);
        assert_eq!(stream.conn.protocol_version(), Some(version.version));
        write!(stream, "GET /perf HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut stream).1.len(), 84);
        write!(stream, "GET /files/big.bin HTTP/1.1\r\n\r\n").unwrap();
        assert!(
            read_response(&mut stream).1 == big_file(),
            "file bytes over TLS"
        );
        let answer = upload_on(&mut stream, &upload);
        assert_eq!(answer["bytes"], upload.len());
        assert_eq!(
            answer["sha256"].as_str(),
            Some(digest_hex(&digest).as_str())
        );
        write!(stream, "GET /perf HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut stream).0, 200);
        assert!(read_to_close_notify(&mut stream).unwrap().is_empty());
    }
    // Both ports count (spec §12): 2 TLS connections with 4 requests each, then the
    // cleartext one that asks.
    let after = server.stats();
    let grown = |group: &str| {
        after[group]["total"].as_u64().unwrap() - before[group]["total"].as_u64().unwrap()
    };
    assert_eq!((grown("connections"), grown("requests")), (3, 9));
}

fn digest_hex(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[test]
fn alpn_gives_http_1_1_and_refuses_a_client_that_wants_only_h2() {
    let server = Server::start("tls-alpn", &[]);
    let offered =
        |alpn: &[&str]| connect_tls(server.tls_port, tls_client(&server, &[&TLS13], alpn));
    let both = offered(&["h2", "http/1.1"]).unwrap();
    assert_eq!(both.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut none = offered(&[]).unwrap();
    assert_eq!(none.conn.alpn_protocol(), None);
    write!(none, "GET /perf HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut none).0, 200);
    let error = offered(&["h2"]).expect_err("h2 alone is refused");
    assert!(
        error.to_string().contains("NoApplicationProtocol"),
        "{error}"
    );
}

/// A comet stream and a WebSocket on the TLS port: the emitter thread writes to each while
/// its connection thread waits in a read of the same TLS connection.
#[test]
fn push_deliveries_reach_comet_and_websocket_clients_over_tls() {
    let server = Server::start("tls-push", &[]);
    let mut comet = https(&server, &TLS13);
    let body = r#"{"type":"comet","events":["tick"],"duration_ms":700}"#;
    post_on(&mut comet, "/push", body, "Connection: close\r\n");
    let url = format!("wss://127.0.0.1:{}/ws", server.tls_port);
    let (mut ws, _) = tungstenite::client(url, https(&server, &TLS12)).unwrap();
    ws.send(Message::text(r#"{"type":"subscribe","events":["tick"]}"#))
        .unwrap();
    assert_eq!(receive(&mut ws)["type"], "subscribed");
    wait_until("the comet stream", || {
        server.stats()["requests"]["open_push"] == 1
    });
    server.post("/event/set", r#"{"name":"tick","interval_ms":200}"#);
    assert_eq!(receive(&mut ws)["response"]["event"]["seq"], 1);
    let text = String::from_utf8(read_to_close_notify(&mut comet).unwrap()).unwrap();
    assert!(
        text.contains(r#""seq":1"#) && text.contains(r#""timeout":true"#),
        "{text}"
    );
    assert!(text.ends_with("0\r\n\r\n"));
    server.post("/event/clear", "");
    ws.send(Message::text(r#"{"type":"echo","data":[1]}"#))
        .unwrap();
    loop {
        let message = receive(&mut ws);
        if message["type"] == "echo" {
            assert_eq!(message["data"], serde_json::json!([1]));
            break;
        }
    }
}

fn receive(ws: &mut tungstenite::WebSocket<TlsStream>) -> serde_json::Value {
    loop {
        if let Message::Text(text) = ws.read().unwrap() {
            return json(text.as_bytes());
        }
    }
}

#[test]
fn plaintext_and_a_truncated_hello_get_no_answer_and_others_are_served_meanwhile() {
    let server = Server::start("tls-bad", &[]);
    let mut plain = TcpStream::connect((Ipv4Addr::LOCALHOST, server.tls_port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(plain, "GET /perf HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    plain.read_to_end(&mut answer).unwrap(); // closed; the read timeout would fail it
    assert_eq!(
        answer.first(),
        Some(&0x15),
        "a TLS alert at most: {answer:?}"
    );
    // A handshake record announcing 512 bytes, of which 40 come.
    let mut hung = TcpStream::connect((Ipv4Addr::LOCALHOST, server.tls_port)).unwrap();
    hung.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    hung.write_all(&[&[0x16, 0x03, 0x01, 0x02, 0x00][..], &[0x01; 40]].concat())
        .unwrap();
    let mut other = https(&server, &TLS13);
    write!(other, "GET /perf HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut other).0, 200);
    hung.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    hung.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "no close_notify before a handshake: {rest:?}"
    );
}

/// RFC 5425: `MSG-LEN SP SYSLOG-MSG`.
fn frame(message: &str) -> String {
    format!("{} {message}", message.len())
}

fn syslog_sender(server: &Server) -> TlsStream {
    connect_tls(
        server.syslog_tls_port,
        tls_client(server, &[&TLS13, &TLS12], &[]),
    )
    .unwrap()
}

fn counted(server: &Server) -> (u64, u64) {
    let syslog = server.stats()["syslog"].clone();
    (
        syslog["received"].as_u64().unwrap(),
        syslog["bytes"].as_u64().unwrap(),
    )
}

#[test]
fn rfc_5425_frames_are_counted_however_tls_records_cut_them() {
    for mode in ["count", "parse"] {
        let server = Server::start("syslog-tls", &["--syslog-mode", mode]);
        let messages = [
            "<14>1 - h app - - - one",
            "<14>1 - h app - - - two\nlines",
            "<1>x",
        ];
        let mut sender = syslog_sender(&server);
        sender.write_all(frame(messages[0]).as_bytes()).unwrap();
        // Each write is a TLS record of its own: one cut inside the MSG-LEN, one inside
        // the message.
        for piece in ["2", "9 <14>1 - h app - - - two\nli", "nes", "4 <1>x"] {
            sender.write_all(piece.as_bytes()).unwrap();
            thread::sleep(Duration::from_millis(30));
        }
        let bytes = messages.iter().map(|m| m.len() as u64).sum();
        wait_until("three syslog messages", || counted(&server) == (3, bytes));
        sender.conn.send_close_notify();
        sender.flush().unwrap();
        // The server answers the sender's close_notify with its own (RFC 5425 §4.4).
        assert!(read_to_close_notify(&mut sender).unwrap().is_empty());
        if mode == "parse" {
            assert_eq!(server.stats()["syslog"]["parsed"], 2, "<1>x is malformed");
        }
    }
}

#[test]
fn a_bad_msg_len_ends_the_connection_and_nothing_after_it_is_counted() {
    let server = Server::start("syslog-tls-bad", &[]);
    for bad in [
        "05 <14>x",
        "0 <14>x",
        "<14>1 - h a - - - newline\n",
        "12345678901 <14>x",
    ] {
        let before = counted(&server);
        let mut sender = syslog_sender(&server);
        let good = frame("<14>1 - h app - - - good");
        sender
            .write_all(format!("{good}{bad}{good}").as_bytes())
            .unwrap();
        assert!(
            read_to_close_notify(&mut sender).unwrap().is_empty(),
            "{bad:?}"
        );
        thread::sleep(Duration::from_millis(50));
        assert_eq!(
            counted(&server).0,
            before.0 + 1,
            "{bad:?}: the first frame only"
        );
    }
    let mut other = syslog_sender(&server);
    other
        .write_all(frame("<14>1 - h app - - - after").as_bytes())
        .unwrap();
    wait_until("a sender after the bad ones", || counted(&server).0 == 5);
}
