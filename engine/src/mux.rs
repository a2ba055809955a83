//! Protocol: HTTP/2 between the drivers and the behaviours. The `h2` crate does the framing,
//! HPACK, flow control and stream bookkeeping; it needs an `AsyncRead + AsyncWrite`, which
//! `Wire` is: the engine's own non-blocking socket (`Conn`), under rustls when the target is
//! TLS, polled on the worker's loop exactly as the HTTP/1.1 paths poll it. Each connection's
//! `h2` driver is a task on that same loop, so there is still one loop per worker and no
//! thread of h2's own. A `Group` is one connection that `streams` clients share (h2load's
//! `-m`): they each send their next request on it as soon as their last one is answered.
//! `open` sends one stream's request and `Opened::read` hands its answer's body to a sink
//! as HTTP/1.1's reader does, for plain requests and push subscriptions alike.

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::Reason;
use http::{HeaderMap, HeaderName, HeaderValue, Request};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::client::Client;
use crate::conn::Conn;
use crate::h2watch::{Watch, HEADER_BLOCK_LIMIT};
use crate::http::ParseError;
use crate::inbox::Answer;
use crate::shared::WorkerCtx;
use crate::stats::ErrorKind;
use crate::tls::Tls;

/// Each stream's receive window: large, as h2load's default, so that flow control never
/// paces a body the server is sending (the window is a promise, not memory held).
const STREAM_WINDOW: u32 = 1 << 24;
/// The connection's receive window, for `streams` bodies at once.
const CONNECTION_WINDOW: u32 = 1 << 28;

// The limits the engine sets on what a server may send it, so that it survives the servers
// it measures: what one connection holds stays bounded, whatever the server sends.
/// The largest header list (SETTINGS_MAX_HEADER_LIST_SIZE) the engine takes, as HTTP/1.1's
/// reader takes a head of 64 KiB at most. `h2` bounds the CONTINUATION frames of a block by
/// it too: at most 5 of 16 KiB. Past either, the connection ends (`h2_limit`).
const MAX_HEADER_LIST: u32 = 64 << 10;
/// The largest frame (SETTINGS_MAX_FRAME_SIZE): the protocol's own minimum, 16 KiB.
const MAX_FRAME: u32 = 16 << 10;
/// Streams the server may open (SETTINGS_MAX_CONCURRENT_STREAMS): none, push is off.
const SERVER_STREAMS: u32 = 0;

/// The bytes of one HTTP/2 connection: the engine's socket, under TLS or not, counted in
/// the worker's ledger as they pass (frames and records included, as HTTP/1.1's are).
struct Wire {
    conn: Conn,
    tls: Option<Tls>,
    ctx: Rc<WorkerCtx>,
    /// The server's frames as they come: header blocks that never end, floods.
    watch: Watch,
    fate: Rc<Fate>,
}

impl Wire {
    /// Ends the connection for `kind`, which its streams are then counted as.
    fn breach(&self, kind: ErrorKind) -> io::Error {
        self.fate.breach.set(Some(kind));
        io::Error::other(kind.wire_name())
    }
}

/// How a connection ended, as its driver and its reader saw it, for its streams to be
/// counted by: `h2` hands a stream the connection's end as a bare I/O error (its kind and
/// text), whatever ended it.
#[derive(Default)]
struct Fate {
    /// The server's GOAWAY.
    goaway: Cell<bool>,
    /// What the reader ended the connection for (the watch's finding), or a TLS error on it.
    breach: Cell<Option<ErrorKind>>,
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.watch.overdue(cx) {
            return Poll::Ready(Err(this.breach(ErrorKind::H2HeaderTimeout)));
        }
        let into = buf.initialize_unfilled();
        let read = ready!(match &mut this.tls {
            Some(tls) => tls.poll_read(&this.conn, cx, into),
            None => this
                .conn
                .poll_read_with(cx, |socket| io::Read::read(&mut &*socket, into)),
        });
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                let kind = ErrorKind::from_io(&e);
                if kind.is_tls() {
                    this.fate.breach.set(Some(kind));
                }
                return Poll::Ready(Err(e));
            }
        };
        if let Err(kind) = this.watch.feed(&into[..n]) {
            return Poll::Ready(Err(this.breach(kind)));
        }
        buf.advance(n);
        this.ctx.ledger.read(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(match &mut this.tls {
            Some(tls) => tls.poll_write(&this.conn, cx, data),
            None => this
                .conn
                .poll_write_with(cx, |socket| io::Write::write(&mut &*socket, data)),
        })?;
        this.ctx.ledger.wrote(n);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.tls {
            Some(tls) => tls.poll_flush(&this.conn, cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(tls) = &mut this.tls {
            tls.close(&this.conn);
        }
        Pin::new(this).poll_flush(cx)
    }
}

/// One HTTP/2 connection as its clients hold it: the handle that opens streams, and how the
/// connection ended. h2 fails a stream the GOAWAY left in flight with the connection's end
/// (a broken pipe) rather than the GOAWAY; its driver sees the GOAWAY, and says so here
/// before the streams run again. So does its reader, of what it ended the connection for.
#[derive(Clone)]
pub struct Link {
    pub send: SendRequest<Bytes>,
    fate: Rc<Fate>,
}

impl Link {
    /// What a stream's error counts as on this connection.
    pub fn error_kind(&self, e: &h2::Error) -> ErrorKind {
        if let Some(kind) = self.fate.breach.get() {
            return kind;
        }
        match error_kind(e) {
            ErrorKind::Reset | ErrorKind::Closed | ErrorKind::Other if self.fate.goaway.get() => {
                ErrorKind::H2Goaway
            }
            kind => kind,
        }
    }
}

/// Opens an HTTP/2 connection through `client` (connect, TLS and ALPN, the h2 preface and
/// settings) and starts its driver on this worker's loop; the link sends its requests.
pub async fn connect(client: &mut Client) -> Result<Link, ErrorKind> {
    let (conn, tls) = client.new_connection().await?;
    if tls.as_ref().is_some_and(|tls| tls.alpn() != Some(b"h2")) {
        // The server did not agree to HTTP/2: a failed negotiation, as a TLS one.
        return Err(ErrorKind::TlsHandshake);
    }
    let fate = Rc::new(Fate::default());
    let timeout = Duration::from_millis(client.ctx.shared.plan.plan.timeout_ms);
    let wire = Wire {
        conn,
        tls,
        ctx: client.ctx.clone(),
        // Half the timeout when that is shorter, so that the block's limit ends it first.
        watch: Watch::new(HEADER_BLOCK_LIMIT.min(timeout / 2)),
        fate: fate.clone(),
    };
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEADER_LIST)
        .max_frame_size(MAX_FRAME)
        .max_concurrent_streams(SERVER_STREAMS)
        .enable_push(false)
        .handshake::<_, Bytes>(wire)
        .await
        .map_err(|e| error_kind(&e))?;
    // The driver ends when every handle and stream is gone, or the connection fails; its
    // error reaches the streams, where it is counted.
    let seen = fate.clone();
    tokio::task::spawn_local(async move {
        if let Err(e) = connection.await {
            seen.goaway.set(e.is_go_away() && e.is_remote());
        }
    });
    Ok(Link { send, fate })
}

/// What an h2 error counts as: the server's GOAWAY or RST_STREAM by kind, a socket error as
/// HTTP/1.1's would, a limit of the engine's that the server broke as `h2_limit`, another
/// frame the client refused as `parse`.
pub fn error_kind(e: &h2::Error) -> ErrorKind {
    if e.is_go_away() && e.is_remote() {
        ErrorKind::H2Goaway
    } else if e.is_reset() && e.is_remote() {
        ErrorKind::H2Reset
    } else if let Some(io) = e.get_io() {
        ErrorKind::from_io(io)
    } else if broke_limit(e) {
        ErrorKind::H2Limit
    } else if e.is_go_away() || e.is_reset() {
        ErrorKind::Parse
    } else {
        ErrorKind::Other
    }
}

/// Whether `h2` ended a stream or the connection (its own error, not the server's) for a
/// limit the engine set: too many CONTINUATION frames (ENHANCE_YOUR_CALM), a frame over the
/// largest size (FRAME_SIZE_ERROR), a header list over the largest (the stream refused).
fn broke_limit(e: &h2::Error) -> bool {
    let limit = matches!(
        e.reason(),
        Some(Reason::ENHANCE_YOUR_CALM | Reason::FRAME_SIZE_ERROR | Reason::REFUSED_STREAM)
    );
    limit && !e.is_remote()
}

/// Whether an error leaves the connection unusable (a reset stream does not).
pub fn breaks_connection(kind: ErrorKind) -> bool {
    !matches!(kind, ErrorKind::H2Reset | ErrorKind::Status)
}

/// One connection shared by several clients, opened by the first that needs it and again
/// after it broke. Its generation tells a client's stale failure from the current connection.
#[derive(Default)]
pub struct Group {
    held: RefCell<Option<(u64, Link)>>,
    generation: Cell<u64>,
    opening: tokio::sync::Mutex<()>,
}

impl Group {
    /// The group's connection, opened through `client` if there is none; with its generation.
    pub async fn link(&self, client: &mut Client) -> Result<(u64, Link), ErrorKind> {
        if let Some(held) = self.held.borrow().clone() {
            return Ok(held);
        }
        // One client opens it while the others of the group wait for it.
        let _opening = self.opening.lock().await;
        if let Some(held) = self.held.borrow().clone() {
            return Ok(held);
        }
        let link = connect(client).await?;
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        *self.held.borrow_mut() = Some((generation, link.clone()));
        Ok((generation, link))
    }

    /// Drops the connection of `generation` (it broke), unless it was already replaced.
    pub fn forget(&self, generation: u64) {
        let mut held = self.held.borrow_mut();
        if held.as_ref().is_some_and(|(g, _)| *g == generation) {
            *held = None;
        }
    }
}

/// Hands out the groups of one worker: clients in turn take seats, `streams` to a group.
/// The groups are their seats' own: a group and its connection go with its last client (an
/// open-loop arrival's, when it is done), so only the group still taking seats is known here.
pub struct Groups {
    streams: u64,
    seats: Cell<u64>,
    filling: RefCell<Weak<Group>>,
}

impl Groups {
    pub fn new(streams: u64) -> Groups {
        Groups {
            streams: streams.max(1),
            seats: Cell::new(0),
            filling: RefCell::default(),
        }
    }

    /// The group of the next seat.
    pub fn seat(&self) -> Rc<Group> {
        let seat = self.seats.get();
        self.seats.set(seat + 1);
        if !seat.is_multiple_of(self.streams) {
            if let Some(group) = self.filling.borrow().upgrade() {
                return group;
            }
        }
        let group = Rc::new(Group::default());
        *self.filling.borrow_mut() = Rc::downgrade(&group);
        group
    }

    /// The connection of `seat`'s group (the seat is taken at its first stream), opened
    /// through `client` if the group has none.
    pub async fn held(&self, client: &mut Client, seat: &mut Seat) -> Result<Held, ErrorKind> {
        let group = seat.0.get_or_insert_with(|| self.seat()).clone();
        let (generation, link) = group.link(client).await?;
        Ok(Held {
            link,
            shared: Some((group, generation)),
        })
    }
}

/// A client's seat: the group whose connection its streams go on.
#[derive(Default)]
pub struct Seat(Option<Rc<Group>>);

/// The connection one stream goes on; a group's is forgotten when a stream's error breaks it.
pub struct Held {
    link: Link,
    shared: Option<(Rc<Group>, u64)>,
}

impl Held {
    /// A connection of the stream's own (a new connection per request).
    pub fn own(link: Link) -> Held {
        Held { link, shared: None }
    }

    /// Counts a stream's h2 error, dropping the group's connection if the error broke it.
    fn failed(&self, e: &h2::Error) -> ErrorKind {
        let kind = self.link.error_kind(e);
        if let Some((group, generation)) = &self.shared {
            if breaks_connection(kind) {
                group.forget(*generation);
            }
        }
        kind
    }
}

/// A stream whose request is sent, and its answer to come.
pub struct Opened {
    held: Held,
    answer: ResponseFuture,
}

/// Sends `request` as a new stream on `held`'s connection: HEADERS, and `body` (if any) as
/// DATA.
pub async fn open(held: Held, request: Request<()>, body: Bytes) -> Result<Opened, ErrorKind> {
    match send(&held.link, request, body).await {
        Ok(answer) => Ok(Opened { held, answer }),
        Err(e) => Err(held.failed(&e)),
    }
}

async fn send(link: &Link, request: Request<()>, body: Bytes) -> Result<ResponseFuture, h2::Error> {
    let mut send = link.send.clone().ready().await?;
    let bare = body.is_empty();
    let (answer, mut out) = send.send_request(request, bare)?;
    if !bare {
        out.send_data(body, true)?;
    }
    Ok(answer)
}

impl Opened {
    /// Reads the stream's answer: `on_head` is told its status when its HEADERS come, and
    /// `sink` takes its body as its DATA frames come, as the socket's bytes are taken over
    /// HTTP/1.1. A body `sink` refuses ends this stream alone (dropped, h2 resets it).
    pub async fn read(
        self,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
        on_head: &mut impl FnMut(u16),
    ) -> Result<Answer, ErrorKind> {
        Ok(self.read_parts(sink, on_head, false).await?.answer)
    }

    /// Reads the answer as `read` does, then its trailers: gRPC's status comes in them (or,
    /// in an answer of headers alone, in its headers), which `Finished` keeps both of.
    pub async fn read_with_trailers(
        self,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
        on_head: &mut impl FnMut(u16),
    ) -> Result<Finished, ErrorKind> {
        self.read_parts(sink, on_head, true).await
    }

    async fn read_parts(
        self,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
        on_head: &mut impl FnMut(u16),
        trailers: bool,
    ) -> Result<Finished, ErrorKind> {
        let Opened { held, answer } = self;
        let answer = answer.await.map_err(|e| held.failed(&e))?;
        let first_byte = Instant::now();
        let status = answer.status().as_u16();
        on_head(status);
        let (head, mut body) = answer.into_parts();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| held.failed(&e))?;
            // The window is given back as the bytes are taken, as a reader would.
            let _ = body.flow_control().release_capacity(chunk.len());
            sink(&chunk[..])?;
        }
        let trailers = match trailers {
            true => body.trailers().await.map_err(|e| held.failed(&e))?,
            false => None,
        };
        Ok(Finished {
            answer: Answer {
                status,
                close: false,
                first_byte,
            },
            headers: head.headers,
            trailers,
        })
    }
}

/// A stream whose request stays open (gRPC's bidirectional calls): its messages go out one
/// by one while its answer's body is read as it comes.
pub struct Duplex {
    held: Held,
    out: h2::SendStream<Bytes>,
    answer: Option<ResponseFuture>,
    head: Option<(u16, HeaderMap)>,
    body: Option<h2::RecvStream>,
}

/// Opens a stream on `held`'s connection with `request`'s HEADERS, its body left open.
pub async fn open_duplex(held: Held, request: Request<()>) -> Result<Duplex, ErrorKind> {
    let opened = async {
        let mut send = held.link.send.clone().ready().await?;
        send.send_request(request, false)
    };
    match opened.await {
        Ok((answer, out)) => Ok(Duplex {
            held,
            out,
            answer: Some(answer),
            head: None,
            body: None,
        }),
        Err(e) => Err(held.failed(&e)),
    }
}

impl Duplex {
    /// Sends `data` as DATA on the stream (h2 queues what the window does not yet allow).
    pub fn send(&mut self, data: Bytes) -> Result<(), ErrorKind> {
        self.out
            .send_data(data, false)
            .map_err(|e| self.held.failed(&e))
    }

    /// The answer's next DATA, its HEADERS awaited first; `None` once its body has ended.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ErrorKind> {
        if let Some(answer) = self.answer.take() {
            let (head, body) = answer.await.map_err(|e| self.held.failed(&e))?.into_parts();
            self.head = Some((head.status.as_u16(), head.headers));
            self.body = Some(body);
        }
        let Some(body) = &mut self.body else {
            return Ok(None);
        };
        match body.data().await {
            Some(Ok(chunk)) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                Ok(Some(chunk))
            }
            Some(Err(e)) => Err(self.held.failed(&e)),
            None => Ok(None),
        }
    }

    /// The answer's status, once its HEADERS came.
    pub fn status(&self) -> Option<u16> {
        self.head.as_ref().map(|(status, _)| *status)
    }

    /// The answer as it ended (after `next` said `None`): its header fields and trailers.
    pub async fn finish(mut self) -> Result<Finished, ErrorKind> {
        let trailers = match &mut self.body {
            Some(body) => body.trailers().await.map_err(|e| self.held.failed(&e))?,
            None => None,
        };
        let (status, headers) = self.head.take().unwrap_or_default();
        Ok(Finished {
            answer: Answer {
                status,
                close: false,
                first_byte: Instant::now(),
            },
            headers,
            trailers,
        })
    }
}

/// A stream's whole answer: as `Answer` counts it, with its header fields and trailers.
pub struct Finished {
    pub answer: Answer,
    pub headers: HeaderMap,
    pub trailers: Option<HeaderMap>,
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2) or carries as a pseudo-header (`Host` is
/// `:authority`); a header of these names is left out.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Request headers as HTTP/2 carries them: lower-case names, hop-by-hop ones left out.
pub fn h2_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        // The plan's check let only "Name: value" through; what HTTP/2 cannot carry is left out.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) {
            map.append(name, value);
        }
    }
    map
}
