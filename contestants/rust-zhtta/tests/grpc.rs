//! The gRPC service (spec §16) on tonic's own ports, from a client written from the spec on
//! h2: each message framed by hand, statuses read from the head or the trailers as they
//! come, so that what is checked is what goes over the wire.

mod common;

#[allow(dead_code, clippy::all, clippy::pedantic)]
mod lab {
    include!(concat!(env!("OUT_DIR"), "/serverlab.v1.rs"));
}

use bytes::{Buf, Bytes, BytesMut};
use common::{Server, json};
use h2::RecvStream;
use h2::client::{ResponseFuture, SendRequest};
use lab::{Delivery, EchoMessage, PerfReply, SubscribeRequest};
use prost::Message;
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::timeout;

const LIMIT: usize = 4 * 1024 * 1024;
const WAIT: Duration = Duration::from_secs(10);

/// The test's own runtime: the client side of every call.
fn run<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// An HTTP/2 connection with prior knowledge to the gRPC port.
async fn connect(server: &Server) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, server.grpc_port))
        .await
        .unwrap();
    handshake(tcp).await
}

async fn handshake<T>(io: T) -> SendRequest<Bytes>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

/// One message in gRPC's framing: uncompressed, its length in 4 big-endian bytes.
fn framed(message: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.extend_from_slice(&[0]);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    frame.freeze()
}

/// Starts a call to `path` (`/serverlab.v1.Lab/<method>`); its request body stays open.
fn start(
    send: &mut SendRequest<Bytes>,
    path: &str,
    grpc_timeout: Option<&str>,
) -> (ResponseFuture, h2::SendStream<Bytes>) {
    let mut request = http::Request::post(format!("http://127.0.0.1{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(value) = grpc_timeout {
        request = request.header("grpc-timeout", value);
    }
    send.send_request(request.body(()).unwrap(), false).unwrap()
}

/// A call's answer as it arrives: its messages, then its status.
struct Answer {
    body: Option<RecvStream>,
    buffer: BytesMut,
    /// `grpc-status` and `grpc-message`, from a trailers-only head or the trailers.
    status: Option<(String, String)>,
}

impl Answer {
    async fn read(response: ResponseFuture) -> Answer {
        let response = timeout(WAIT, response).await.unwrap().unwrap();
        assert_eq!(response.status(), 200);
        let status = grpc_status(response.headers());
        Answer {
            body: status.is_none().then(|| response.into_body()),
            buffer: BytesMut::new(),
            status,
        }
    }

    /// The next message, or `None` once the call ended (`status` then says how).
    async fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if self.buffer.len() >= 5 {
                let length = u32::from_be_bytes(self.buffer[1..5].try_into().unwrap()) as usize;
                if self.buffer.len() >= 5 + length {
                    assert_eq!(self.buffer[0], 0, "an uncompressed message");
                    self.buffer.advance(5);
                    return Some(self.buffer.split_to(length).to_vec());
                }
            }
            let body = self.body.as_mut()?;
            match timeout(WAIT, body.data()).await.unwrap() {
                Some(data) => {
                    let data = data.unwrap();
                    let _ = body.flow_control().release_capacity(data.len());
                    self.buffer.extend_from_slice(&data);
                }
                None => {
                    let trailers = timeout(WAIT, body.trailers()).await.unwrap().unwrap();
                    self.status = trailers.as_ref().and_then(grpc_status);
                    self.body = None;
                    assert!(self.buffer.is_empty(), "a message cut short");
                }
            }
        }
    }

    /// Reads to the end: every message left, and the status code.
    async fn finish(mut self) -> (Vec<Vec<u8>>, String, String) {
        let mut messages = Vec::new();
        while let Some(message) = self.next().await {
            messages.push(message);
        }
        let (code, message) = self.status.expect("every call ends with grpc-status");
        (messages, code, message)
    }
}

fn grpc_status(head: &http::HeaderMap) -> Option<(String, String)> {
    let text = |name| head.get(name).map(|v| v.to_str().unwrap().to_owned());
    Some((
        text("grpc-status")?,
        text("grpc-message").unwrap_or_default(),
    ))
}

/// A unary call with one request message.
async fn unary(send: &mut SendRequest<Bytes>, path: &str, message: Bytes) -> Answer {
    let (response, mut body) = start(send, path, None);
    body.send_data(message, true).unwrap();
    Answer::read(response).await
}

fn echo(data: Vec<u8>) -> Bytes {
    framed(&EchoMessage { data }.encode_to_vec())
}

#[test]
fn perf_and_echo_answer_up_to_the_limit_and_refuse_past_it_on_the_same_connection() {
    let server = Server::start("grpc-unary", &[]);
    run(async {
        let mut send = connect(&server).await;
        let (messages, code, _) = unary(&mut send, "/serverlab.v1.Lab/Perf", framed(b""))
            .await
            .finish()
            .await;
        assert_eq!(code, "0");
        let reply = PerfReply::decode(&messages[0][..]).unwrap();
        assert_eq!(reply.body.len(), 84);
        // The largest request served: 4 MiB encoded, the field's tag and length included.
        let data = vec![7; LIMIT - 5];
        assert_eq!(EchoMessage { data: data.clone() }.encoded_len(), LIMIT);
        let (messages, code, _) = unary(&mut send, "/serverlab.v1.Lab/Echo", echo(data.clone()))
            .await
            .finish()
            .await;
        assert_eq!(code, "0");
        assert_eq!(EchoMessage::decode(&messages[0][..]).unwrap().data, data);
        let over = vec![7; LIMIT - 4];
        let (messages, code, message) = unary(&mut send, "/serverlab.v1.Lab/Echo", echo(over))
            .await
            .finish()
            .await;
        assert_eq!(
            (messages.len(), code.as_str()),
            (0, "8"),
            "RESOURCE_EXHAUSTED"
        );
        assert!(!message.is_empty());
        let (_, code, _) = unary(&mut send, "/serverlab.v1.Lab/Echo", echo(b"again".to_vec()))
            .await
            .finish()
            .await;
        assert_eq!(code, "0", "the connection still serves calls");
    });
    let grpc = &server.stats()["grpc"];
    assert_eq!(grpc["calls"], 4);
}

#[test]
fn unknown_methods_and_services_are_unimplemented_with_a_message() {
    let server = Server::start("grpc-unknown", &[]);
    run(async {
        let mut send = connect(&server).await;
        for path in ["/serverlab.v1.Lab/Nope", "/other.v1.Svc/Perf"] {
            let (_, code, message) = unary(&mut send, path, framed(b"")).await.finish().await;
            assert_eq!(code, "12", "{path}");
            assert!(message.contains("unknown method"), "{path}: {message:?}");
        }
    });
}

fn subscribe_request(events: &[&str]) -> Bytes {
    let events = events.iter().map(|e| e.to_string()).collect();
    framed(&SubscribeRequest { events }.encode_to_vec())
}

async fn subscribe(send: &mut SendRequest<Bytes>, events: &[&str], deadline: &str) -> Answer {
    let (response, mut body) = start(send, "/serverlab.v1.Lab/Subscribe", Some(deadline));
    body.send_data(subscribe_request(events), true).unwrap();
    Answer::read(response).await
}

async fn delivery(answer: &mut Answer) -> Delivery {
    Delivery::decode(&answer.next().await.expect("a delivery")[..]).unwrap()
}

#[test]
fn subscribe_streams_share_each_cycle_and_end_at_their_deadline() {
    let server = Server::start("grpc-subscribe", &[]);
    run(async {
        let mut send = connect(&server).await;
        let (_, code, _) = subscribe(&mut send, &["bad name"], "5S")
            .await
            .finish()
            .await;
        assert_eq!(code, "3", "INVALID_ARGUMENT");
        let mut first = subscribe(&mut send, &["g1"], "2S").await;
        let mut second = subscribe(&mut send, &["g1"], "2S").await;
        wait_open(&server, 2).await;
        let set = server.post("/event/set", r#"{"name": "g1", "interval_ms": 300}"#);
        assert_eq!(set.0, 200);
        let (a, b) = (delivery(&mut first).await, delivery(&mut second).await);
        assert_eq!((a.name.as_str(), a.seq, a.total), ("g1", 1, 2));
        assert_eq!((b.seq, b.total, b.created), (1, 2, a.created));
        let mut places = [a.place, b.place];
        places.sort();
        assert_eq!(places, [1, 2]);
        assert!(a.created <= a.sent && a.data.is_empty());
        assert_eq!(
            delivery(&mut first).await.seq,
            2,
            "seq rises by one a cycle"
        );
        // The deadline (2 s) passes while the event still emits: DEADLINE_EXCEEDED.
        let (_, code, _) = first.finish().await;
        assert_eq!(code, "4");
        let (_, code, _) = second.finish().await;
        assert_eq!(code, "4");
        wait_open(&server, 0).await;
    });
    let stats = server.stats();
    let deliveries = stats["grpc"]["deliveries"].as_u64().unwrap();
    assert!(deliveries >= 4, "{stats}");
    assert_eq!(
        stats["events"]["g1"]["deliveries"].as_u64().unwrap(),
        deliveries
    );
}

/// Waits until `/stats` counts `open` Subscribe streams.
async fn wait_open(server: &Server, open: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while json(&server.get("/stats").1)["grpc"]["open"] != open {
        assert!(Instant::now() < deadline, "grpc.open never reached {open}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn a_cancelled_subscribe_stream_leaves_the_lists_at_once() {
    let server = Server::start("grpc-cancel", &[]);
    run(async {
        let mut send = connect(&server).await;
        let (response, mut body) = start(&mut send, "/serverlab.v1.Lab/Subscribe", None);
        body.send_data(subscribe_request(&["g2"]), true).unwrap();
        let answer = Answer::read(response).await;
        assert!(answer.status.is_none(), "a held stream");
        wait_open(&server, 1).await;
        body.send_reset(h2::Reason::CANCEL);
        wait_open(&server, 0).await;
    });
}

#[test]
fn chat_echoes_every_message_in_order_ends_ok_after_the_client_and_refuses_one_over_the_limit() {
    let server = Server::start("grpc-chat", &[]);
    run(async {
        let mut send = connect(&server).await;
        let (response, mut body) = start(&mut send, "/serverlab.v1.Lab/Chat", Some("10S"));
        let (mut response, mut answer) = (Some(response), None);
        // Each message is read back before the next is sent: echoed as it is read.
        for i in 0..20u8 {
            body.send_data(echo(vec![i; 1 + i as usize * 100]), false)
                .unwrap();
            if let Some(response) = response.take() {
                answer = Some(Answer::read(response).await);
            }
            let answer = answer.as_mut().unwrap();
            let message = EchoMessage::decode(&answer.next().await.unwrap()[..]).unwrap();
            assert_eq!(message.data, vec![i; 1 + i as usize * 100]);
        }
        body.send_data(Bytes::new(), true).unwrap();
        let (rest, code, _) = answer.unwrap().finish().await;
        assert_eq!((rest.len(), code.as_str()), (0, "0"));
        // A message over the limit ends its call RESOURCE_EXHAUSTED, as Echo's does.
        let (response, mut body) = start(&mut send, "/serverlab.v1.Lab/Chat", None);
        body.send_data(echo(vec![1; LIMIT]), true).unwrap();
        let (rest, code, _) = Answer::read(response).await.finish().await;
        assert_eq!((rest.len(), code.as_str()), (0, "8"));
    });
}

#[test]
fn the_tls_port_serves_grpc_by_alpn_h2() {
    let server = Server::start("grpc-tls", &[]);
    let config = common::tls_client(&server, &[&rustls::version::TLS13], &["h2"]);
    run(async {
        let tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, server.grpc_tls_port))
            .await
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&config))
            .connect(name, tcp)
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let mut send = handshake(tls).await;
        let (messages, code, _) = unary(&mut send, "/serverlab.v1.Lab/Perf", framed(b""))
            .await
            .finish()
            .await;
        assert_eq!((messages.len(), code.as_str()), (1, "0"));
    });
}
