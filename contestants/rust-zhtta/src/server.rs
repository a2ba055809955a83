//! The listener and the connection threads. The listener accepts; each connection gets a
//! thread with a small stack that parses its requests, queues `/files` requests for the
//! responders, and serves every other endpoint itself.

use crate::app::App;
use crate::control;
use crate::http::{Conn, HeadError, LimitedBodyError, Request, Sent, read_limited};
use crate::push::{self, request::parse_push};
use crate::stats::{GaugeGuard, bump};
use crate::stream::Stream;
use crate::upload;
use rustls::ServerConfig;
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

/// Small stacks so that 20,000 held push connections cost little memory; the deepest
/// use is serde_json's bounded recursion over a 64 KiB body.
const CONNECTION_STACK: usize = 256 * 1024;
const MAX_JSON_BODY: usize = 64 * 1024;
/// How long a closing connection waits for the client to stop sending, so that unread
/// input does not turn the close into a reset that destroys the error answer.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 1 << 20;
/// A client that takes no bytes for this long is given up on, so that it cannot hold a
/// responder or an emit cycle forever. Slow readers that make progress are unaffected.
const WRITE_STALL_LIMIT: Duration = Duration::from_secs(60);

pub const PERF_BODY: &[u8] =
    b"serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n";

#[derive(Clone, Copy)]
enum Endpoint {
    Perf,
    Upload,
    Timestamp,
    Stats,
    Logging,
    EventSet,
    EventClear,
    Push,
    Sse,
    WebSocket,
}

impl Endpoint {
    fn find(path: &str) -> Option<(Endpoint, &'static str)> {
        Some(match path {
            "/perf" => (Endpoint::Perf, "GET"),
            "/upload" => (Endpoint::Upload, "POST"),
            "/timestamp" => (Endpoint::Timestamp, "GET"),
            "/stats" => (Endpoint::Stats, "GET"),
            "/logging" => (Endpoint::Logging, "POST"),
            "/event/set" => (Endpoint::EventSet, "POST"),
            "/event/clear" => (Endpoint::EventClear, "POST"),
            "/push" => (Endpoint::Push, "POST"),
            "/sse" => (Endpoint::Sse, "GET"),
            "/ws" => (Endpoint::WebSocket, "GET"),
            _ => return None,
        })
    }

    fn loopback_only(self) -> bool {
        matches!(
            self,
            Endpoint::Logging | Endpoint::EventSet | Endpoint::EventClear
        )
    }
}

/// A listening socket: the HTTP port, or the HTTPS port with its TLS configuration.
pub struct Listener {
    pub tcp: TcpListener,
    pub tls: Option<Arc<ServerConfig>>,
}

/// Accepts on every listener, each on its own thread but the last, which keeps this one.
pub fn accept_loops(app: &'static App, mut listeners: Vec<Listener>) -> io::Result<()> {
    let Some(last) = listeners.pop() else {
        return Ok(());
    };
    for listener in listeners {
        thread::Builder::new()
            .name("accept".into())
            .spawn(move || accept_loop(app, &listener))?;
    }
    accept_loop(app, &last);
    Ok(())
}

fn accept_loop(app: &'static App, listener: &Listener) {
    for stream in listener.tcp.incoming() {
        match stream {
            Ok(stream) => spawn_connection(app, stream, listener.tls.clone()),
            // Out of descriptors, or a connection reset while queued: keep accepting.
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Counts a connection of either port (spec §12: `/stats` counts both) and gives it a
/// thread, which does the TLS handshake too: a slow one holds up nobody else.
fn spawn_connection(app: &'static App, tcp: TcpStream, tls: Option<Arc<ServerConfig>>) {
    bump(&app.stats.connections_total);
    let (open, _) = GaugeGuard::raise(&app.stats.connections_open);
    // If no thread can be started the closure is dropped: the stream closes and the
    // gauge goes down. That client is refused; the server stays up.
    app.threads.spawn(CONNECTION_STACK, move || {
        let _open = open;
        let _ = tcp.set_nodelay(true);
        let _ = tcp.set_write_timeout(Some(WRITE_STALL_LIMIT));
        let stream = match tls {
            None => Stream::plain(tcp),
            Some(config) => match Stream::tls(tcp, config) {
                Ok(stream) => stream,
                Err(_) => return,
            },
        };
        serve_connection(app, stream);
    });
}

fn serve_connection(app: &'static App, stream: Stream) {
    let loopback = stream
        .peer_addr()
        .map(|peer| peer.ip().is_loopback())
        .unwrap_or(false);
    let mut conn = Conn::new(stream, app.stats);
    let mut request = Request::default();
    loop {
        match conn.read_head(&mut request) {
            Ok(true) => {}
            Ok(false) | Err(HeadError::Io) => return,
            Err(HeadError::TooLarge) => {
                let _ = conn.send_error(431, "header section too large", false);
                return close_gracefully(conn);
            }
            Err(HeadError::Malformed) => {
                let _ = conn.send_error(400, "malformed request", false);
                return close_gracefully(conn);
            }
            Err(HeadError::Framing(refusal)) => {
                let _ = conn.send_error(refusal.status, refusal.reason, false);
                return close_gracefully(conn);
            }
        }
        bump(&app.stats.requests_total);
        let result = route(app, &mut conn, &request, loopback);
        if app.logging.load(Ordering::Relaxed) {
            log_request(&request, &result);
        }
        match result {
            Ok(sent) if sent.keep_alive => {}
            Ok(_) => return close_gracefully(conn),
            Err(_) => return,
        }
    }
}

fn log_request(request: &Request, result: &io::Result<Sent>) {
    match result {
        Ok(sent) => eprintln!("{} {} {}", request.method, request.target, sent.status),
        Err(error) => eprintln!("{} {} failed: {error}", request.method, request.target),
    }
}

/// Half-closes (over TLS, with close_notify first), then reads and drops what the client
/// still sends for a short while.
fn close_gracefully(conn: Conn) {
    let _ = conn.stream.close_write();
    let _ = conn.stream.set_read_timeout(Some(LINGER));
    let mut sink = [0; 8192];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        match (&*conn.stream).read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

fn route(app: &App, conn: &mut Conn, request: &Request, loopback: bool) -> io::Result<Sent> {
    let path = request.path();
    // A body this server will not read makes the connection unusable afterwards.
    let keep_alive = request.keep_alive && !request.has_body();
    if let Some(raw) = path.strip_prefix("/files/") {
        return match request.method.as_str() {
            "GET" | "HEAD" => app.files.handle(conn, request, raw, keep_alive),
            _ => method_not_allowed(conn, "GET, HEAD"),
        };
    }
    let Some((endpoint, method)) = Endpoint::find(path) else {
        return conn.send_error(404, "unknown path", keep_alive);
    };
    if request.method != method {
        return method_not_allowed(conn, method);
    }
    if endpoint.loopback_only() && !loopback {
        let reason = "control endpoints answer loopback clients only";
        return conn.send_error(403, reason, keep_alive);
    }
    match endpoint {
        Endpoint::Perf => conn.send(200, "text/plain", "", PERF_BODY, keep_alive),
        Endpoint::Timestamp => control::timestamp(conn, request, keep_alive),
        Endpoint::Stats => control::stats(app, conn, keep_alive),
        Endpoint::Upload => upload::handle(conn, request),
        Endpoint::Sse => push::serve_sse(&app.push, conn, request, keep_alive),
        Endpoint::WebSocket => push::serve_websocket(&app.push, conn, request),
        Endpoint::Logging | Endpoint::EventSet | Endpoint::EventClear | Endpoint::Push => {
            with_json_body(app, conn, request, endpoint)
        }
    }
}

fn method_not_allowed(conn: &mut Conn, allow: &str) -> io::Result<Sent> {
    let header = format!("Allow: {allow}\r\n");
    conn.send_error_with(405, "method not allowed", &header, false)
}

fn with_json_body(
    app: &App,
    conn: &mut Conn,
    request: &Request,
    endpoint: Endpoint,
) -> io::Result<Sent> {
    let body = match read_limited(conn, request, MAX_JSON_BODY) {
        Ok(body) => body,
        Err(LimitedBodyError::TooLarge) => {
            return conn.send_error(413, "json body over 64 KiB", false);
        }
        Err(LimitedBodyError::Io(error)) if error.kind() == io::ErrorKind::InvalidData => {
            return conn.send_error(400, "malformed chunked body", false);
        }
        Err(LimitedBodyError::Io(error)) => return Err(error),
    };
    let keep_alive = request.keep_alive;
    match endpoint {
        Endpoint::Logging => control::logging(app, conn, &body, keep_alive),
        Endpoint::EventSet => control::set_event(app, conn, &body, keep_alive),
        Endpoint::EventClear => control::clear_event(app, conn, &body, keep_alive),
        _ => match parse_push(&body) {
            Ok(push_request) => push::serve(&app.push, conn, push_request, keep_alive),
            Err(reason) => conn.send_error(400, reason, keep_alive),
        },
    }
}
