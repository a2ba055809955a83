//! Real servers on loopback for the integration tests: a hyper server for plain requests
//! and raw tokio servers for push, syslog and hostile behaviour. Each binds port 0.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serverlab_load::{Outcome, Plan, Summary};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const PERF_BODY: &str =
    "serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n";

#[derive(Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub body_bytes: AtomicU64,
    pub open: AtomicI64,
    pub max_open: AtomicI64,
}

impl ServerStats {
    fn opened(&self) {
        let now = self.open.fetch_add(1, SeqCst) + 1;
        self.max_open.fetch_max(now, SeqCst);
        self.connections.fetch_add(1, SeqCst);
    }
    fn closed(&self) {
        self.open.fetch_sub(1, SeqCst);
    }
    pub fn get(v: &AtomicU64) -> u64 {
        v.load(SeqCst)
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub stats: Arc<ServerStats>,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Accepts connections on a thread of its own and runs `handler` for each.
pub fn serve<F, Fut>(handler: F) -> TestServer
where
    F: Fn(TcpStream, Arc<ServerStats>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let stats = Arc::new(ServerStats::default());
    let server_stats = stats.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            let handler = Arc::new(handler);
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let stats = server_stats.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    stats.opened();
                    handler(stream, stats.clone()).await;
                    stats.closed();
                });
            }
        });
    });
    TestServer { addr, stats }
}

/// A hyper HTTP/1.1 server answering every request with the 84-byte /perf body; request
/// bodies are read and counted.
pub fn perf_server() -> TestServer {
    serve(|stream, stats| async move {
        let service = service_fn(move |req: Request<hyper::body::Incoming>| {
            let stats = stats.clone();
            async move {
                let body = req
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                stats.body_bytes.fetch_add(body.len() as u64, SeqCst);
                stats.requests.fetch_add(1, SeqCst);
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                    PERF_BODY.as_bytes(),
                ))))
            }
        });
        let _ = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await;
    })
}

/// Reads one request (head and Content-Length body); None when the client went away.
pub async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

pub async fn write_json_answer(stream: &mut TcpStream, json: &str) -> std::io::Result<()> {
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    );
    stream.write_all(answer.as_bytes()).await
}

pub fn delivery(seq: u64) -> String {
    delivery_created(seq, unix_ms())
}

/// A delivery stamped `created` (ms since the epoch on the server's clock).
pub fn delivery_created(seq: u64, created: u64) -> String {
    format!(
        r#"{{"response":{{"event":{{"name":"e1","seq":{seq},"timings":{{"duration":0,"sent":{created},"created":{created}}},"connections":{{"total":1,"place":1}}}}}},"request":{{}},"timings":{{"duration":1,"sent":{created},"created":{created}}},"connections":{{"start":1,"finish":1}}}}"#
    )
}

/// This host's clock, in whole milliseconds since the epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

pub const TIMEOUT_ANSWER: &str = r#"{"response":{"timeout":true},"request":{},"timings":{"duration":1,"sent":1,"created":0},"connections":{"start":1,"finish":1}}"#;

/// Both socket loops: each plain closed-loop test runs on each.
pub const BACKENDS: [&str; 2] = ["io_uring", "epoll"];

/// Runs a plan given as JSON (target filled in) and returns its summary.
pub fn run_plan(json: serde_json::Value) -> Summary {
    run_plan_outcome(json).summary
}

/// Runs a plan given as JSON and returns its emit records and summary.
pub fn run_plan_outcome(json: serde_json::Value) -> Outcome {
    let plan = Plan::from_value(json).expect("test plan deserializes");
    serverlab_load::run(plan.validate().expect("test plan is valid")).expect("run completes")
}

/// The engine's `--json` output, one value per line.
pub fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
        .collect()
}
