//! The real server binary on loopback, driven over real sockets.

mod common;

use common::{Server, big_file, json, post_on, read_response, wait_until};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

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

/// The body of a chunked response read to its end.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap(), 16);
        let size = size.unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[line_end + 2..line_end + 2 + size]);
        body = &body[line_end + 4 + size..];
    }
}

/// One SSE message: its fields by name (a comment is ":").
type SseMessage = Vec<(String, String)>;

/// Opens `/sse` with the query and Last-Event-ID given, and reads the stream to its end.
fn read_sse(server: &Server, query: &str, last_event_id: &str) -> Vec<SseMessage> {
    let mut stream = server.connect();
    let id = if last_event_id.is_empty() {
        String::new()
    } else {
        format!("Last-Event-ID: {last_event_id}\r\n")
    };
    write!(
        stream,
        "GET /sse?{query} HTTP/1.1\r\n{id}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Content-Type: text/event-stream") && head.contains("no-cache"));
    let text = String::from_utf8(dechunk(&response[split + 4..])).unwrap();
    let messages = text.strip_suffix("\n\n").unwrap().split("\n\n");
    messages
        .map(|message| {
            let field = |line: &str| match line.strip_prefix(':') {
                Some(_) => (":".to_owned(), String::new()),
                None => {
                    let (name, value) = line.split_once(": ").unwrap();
                    (name.to_owned(), value.to_owned())
                }
            };
            message.lines().map(field).collect()
        })
        .collect()
}

fn field<'a>(message: &'a SseMessage, name: &str) -> Option<&'a str> {
    message
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn sse_streams_live_events_heartbeats_and_its_timeout() {
    let server = Server::start("sse-live", &[]);
    server.post("/event/set", r#"{"name":"a","interval_ms":20}"#);
    let messages = read_sse(&server, "events=a,b&heartbeat_ms=40&duration_ms=300", "");
    server.post("/event/clear", "");
    let opening = &messages[0];
    let id = field(opening, "id").unwrap();
    assert!(id.starts_with("a:") && id.ends_with(",b:0") && field(opening, "data").is_none());
    let mut seqs = Vec::new();
    let mut beats = 0;
    for message in &messages[1..messages.len() - 1] {
        if field(message, ":").is_some() {
            beats += 1;
            continue;
        }
        let delivery = json(field(message, "data").unwrap().as_bytes());
        let seq = delivery["response"]["event"]["seq"].as_u64().unwrap();
        assert_eq!(field(message, "id").unwrap(), format!("a:{seq},b:0"));
        assert_eq!(
            delivery["request"],
            serde_json::json!({"type": "sse", "events": ["a", "b"], "heartbeat_ms": 40, "duration_ms": 300})
        );
        seqs.push(seq);
    }
    assert!(
        seqs.len() >= 5 && beats >= 3,
        "{seqs:?}, {beats} heartbeats"
    );
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let last = messages.last().unwrap();
    assert_eq!(field(last, "event"), Some("timeout"));
    assert!(field(last, "id").is_none());
    wait_until("sse.open to return to 0", || {
        server.stats()["sse"]["open"] == 0
    });
    let sse = server.stats()["sse"].clone();
    assert_eq!(
        (sse["total"].clone(), sse["timeouts"].clone()),
        (1.into(), 1.into())
    );
    assert_eq!(sse["deliveries"], seqs.len());
    assert_eq!(sse["heartbeats"], beats);
}

#[test]
fn sse_replays_the_newest_64_and_says_what_is_lost() {
    let server = Server::start("sse-replay", &[]);
    server.post("/event/set", r#"{"name":"r","interval_ms":10}"#);
    wait_until("80 emits", || {
        server.stats()["events"]["r"]["last_seq"].as_u64() >= Some(80)
    });
    server.post("/event/clear", "");
    let newest = server.stats()["events"]["r"]["last_seq"].as_u64().unwrap();
    let messages = read_sse(&server, "events=r&heartbeat_ms=0&duration_ms=50", "r:5");
    let gap = &messages[0];
    assert_eq!(field(gap, "event"), Some("gap"));
    assert_eq!(field(gap, "id").unwrap(), format!("r:{}", newest - 64));
    let wanted = serde_json::json!({"gap": {"name": "r", "after": 5, "next": newest - 63}});
    assert_eq!(json(field(gap, "data").unwrap().as_bytes()), wanted);
    for (i, message) in messages[1..65].iter().enumerate() {
        let event = json(field(message, "data").unwrap().as_bytes())["response"]["event"].clone();
        let seq = newest - 63 + i as u64;
        assert_eq!(
            (event["seq"].as_u64(), event["replayed"].as_bool()),
            (Some(seq), Some(true))
        );
        assert_eq!(
            event["connections"],
            serde_json::json!({"total": 1, "place": 1})
        );
        assert_eq!(field(message, "id").unwrap(), format!("r:{seq}"));
    }
    assert_eq!(field(&messages[65], "id").unwrap(), format!("r:{newest}"));
    let ahead = format!("r:{}", newest + 100);
    let messages = read_sse(&server, "events=r&heartbeat_ms=0&duration_ms=50", &ahead);
    let wanted =
        serde_json::json!({"gap": {"name": "r", "after": newest + 100, "next": newest + 1}});
    assert_eq!(
        json(field(&messages[0], "data").unwrap().as_bytes()),
        wanted
    );
    assert_eq!(field(&messages[1], "id").unwrap(), format!("r:{newest}"));
    let sse = server.stats()["sse"].clone();
    assert_eq!(
        (sse["gaps"].clone(), sse["replayed"].clone()),
        (2.into(), 64.into())
    );
    assert_eq!(server.get("/sse?events=r&events=s").0, 400);
}

type Ws = tungstenite::WebSocket<TcpStream>;

fn open_ws(server: &Server) -> Ws {
    let stream = server.connect();
    let url = format!("ws://127.0.0.1:{}/ws", server.port);
    let (socket, response) = tungstenite::client(url, stream).unwrap();
    assert!(response.headers().get("Sec-WebSocket-Extensions").is_none());
    socket
}

fn send(socket: &mut Ws, text: &str) -> serde_json::Value {
    socket.send(tungstenite::Message::text(text)).unwrap();
    receive(socket)
}

fn receive(socket: &mut Ws) -> serde_json::Value {
    loop {
        match socket.read().unwrap() {
            tungstenite::Message::Text(text) => return json(text.as_bytes()),
            tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The code of the server's close frame after `message`.
fn close_code(server: &Server, message: tungstenite::Message) -> u16 {
    let mut socket = open_ws(server);
    socket.send(message).unwrap();
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Close(Some(frame))) => return frame.code.into(),
            Ok(_) => {}
            Err(error) => panic!("no close frame: {error}"),
        }
    }
}

#[test]
fn websocket_echo_subscribe_publish_and_counts() {
    let server = Server::start("ws", &[]);
    let (mut subscriber, mut publisher) = (open_ws(&server), open_ws(&server));
    let echo = send(&mut publisher, r#"{"type":"echo","data":{"n":[1, true]}}"#);
    assert_eq!(
        echo,
        serde_json::json!({"type": "echo", "data": {"n": [1, true]}})
    );
    let filler = "x".repeat(65_536 - r#"{"type":"echo","data":""}"#.len());
    let big = send(
        &mut publisher,
        &format!(r#"{{"type":"echo","data":"{filler}"}}"#),
    );
    assert_eq!(big["data"].as_str().map(str::len), Some(filler.len()));
    let reply = send(&mut subscriber, r#"{"type":"subscribe","events":["p"]}"#);
    assert_eq!(
        reply,
        serde_json::json!({"type": "subscribed", "events": ["p"]})
    );
    let reply = send(
        &mut publisher,
        r#"{"type":"publish","event":"p","data":{"k":1}}"#,
    );
    let wanted = serde_json::json!({"type": "published", "event": "p", "seq": 1, "total": 1});
    assert_eq!(reply, wanted);
    let delivery = receive(&mut subscriber);
    assert_eq!(
        delivery["response"]["event"]["data"],
        serde_json::json!({"k": 1})
    );
    assert_eq!(delivery["request"]["type"], "subscribe");
    // A subscribed publisher gets its own delivery, then its reply.
    let own = send(&mut subscriber, r#"{"type":"publish","event":"p"}"#);
    assert_eq!(own["response"]["event"]["seq"], 2);
    assert_eq!(own["response"]["event"]["data"], serde_json::Value::Null);
    assert_eq!(receive(&mut subscriber)["type"], "published");
    let stats = server.stats();
    let ws = &stats["websocket"];
    assert_eq!(
        (ws["open"].clone(), ws["total"].clone()),
        (2.into(), 2.into())
    );
    assert_eq!(
        (ws["subscribers"].clone(), ws["deliveries"].clone()),
        (1.into(), 2.into())
    );
    assert_eq!(
        (ws["echoes"].clone(), ws["publishes"].clone()),
        (2.into(), 2.into())
    );
    let p = &stats["events"]["p"];
    assert_eq!(
        (p["interval_ms"].clone(), p["emits"].clone()),
        (0.into(), 2.into())
    );
}

#[test]
fn websocket_faults_get_their_close_codes_and_a_gone_client_leaves() {
    use tungstenite::protocol::frame::Frame;
    use tungstenite::protocol::frame::coding::{Data, OpCode};
    let server = Server::start("ws-faults", &[]);
    let not_utf8 = Frame::message(
        b"{\"type\":\"echo\",\"data\":\"\xff\"}".to_vec(),
        OpCode::Data(Data::Text),
        true,
    );
    let cases = [
        (tungstenite::Message::binary(b"{}".to_vec()), 1003),
        (tungstenite::Message::Frame(not_utf8), 1007),
        (tungstenite::Message::text(r#"{"type":"dance"}"#), 1008),
        (tungstenite::Message::text("[1]"), 1008),
        (tungstenite::Message::text(r#"{"type":"publish"}"#), 1008),
        (tungstenite::Message::text(" ".repeat(65_537)), 1009),
    ];
    for (message, code) in cases {
        assert_eq!(close_code(&server, message), code);
    }
    let mut socket = open_ws(&server);
    socket.send(tungstenite::Message::Close(None)).unwrap();
    assert!(matches!(
        socket.read(),
        Ok(tungstenite::Message::Close(None))
    ));
    let mut gone = open_ws(&server);
    send(&mut gone, r#"{"type":"subscribe","events":["g"]}"#);
    assert_eq!(server.stats()["websocket"]["subscribers"], 1);
    drop(gone); // no close frame, as when a client dies
    wait_until("the gone subscriber to leave", || {
        let stats = server.stats();
        stats["websocket"]["subscribers"] == 0 && stats["websocket"]["open"] == 0
    });
}

/// A long poll of a minute on `event`, once the server holds it.
fn hold_long_poll(server: &Server, event: &str, headers: &str) -> TcpStream {
    let mut poll = server.connect();
    let body = format!(r#"{{"type":"longpoll","events":["{event}"],"duration_ms":60000}}"#);
    post_on(&mut poll, "/push", &body, headers);
    wait_until("the long poll", || {
        server.stats()["requests"]["open_push"] == 1
    });
    poll
}

#[test]
fn a_long_poll_whose_client_left_is_noticed_at_once() {
    let server = Server::start("gone-poll", &[]);
    let poll = hold_long_poll(&server, "idle", "");
    drop(poll);
    wait_until("open_push to return to 0", || {
        server.stats()["requests"]["open_push"] == 0
    });
}

#[test]
fn host_adds_a_second_address() {
    let server = Server::start("host", &["--host", "127.0.0.2"]);
    for address in [Ipv4Addr::LOCALHOST, Ipv4Addr::new(127, 0, 0, 2)] {
        let mut stream = TcpStream::connect((address, server.port)).unwrap();
        write!(stream, "GET /perf HTTP/1.1\r\n\r\n").unwrap();
        let (status, body) = read_response(&mut stream);
        assert_eq!((status, body.len()), (200, 84), "{address}");
    }
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    udp.send_to(
        b"<14>two\n",
        (Ipv4Addr::new(127, 0, 0, 2), server.syslog_port),
    )
    .unwrap();
    wait_until("the syslog message on 127.0.0.2", || {
        server.stats()["syslog"]["received"] == 1
    });
}

#[test]
fn a_long_poll_answered_with_connection_close_is_closed_at_once() {
    let server = Server::start("poll-close", &[]);
    let mut poll = hold_long_poll(&server, "c", "Connection: close\r\n");
    server.post("/event/set", r#"{"name":"c","interval_ms":50}"#);
    assert_eq!(read_response(&mut poll).0, 200);
    let mut rest = Vec::new();
    poll.read_to_end(&mut rest).unwrap(); // the server closes; the 10 s read timeout fails
    assert!(rest.is_empty());
}
