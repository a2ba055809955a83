//! Protocol: HTTP/2 between the drivers and the behaviours. The `h2` crate does the framing,
//! HPACK, flow control and stream bookkeeping; it needs an `AsyncRead + AsyncWrite`, which
//! `Wire` is: the engine's own non-blocking socket (`Conn`), under rustls when the target is
//! TLS, polled on the worker's loop exactly as the HTTP/1.1 paths poll it. Each connection's
//! `h2` driver is a task on that same loop, so there is still one loop per worker and no
//! thread of h2's own. A `Group` is one connection that `streams` clients share (h2load's
//! `-m`): they each send their next request on it as soon as their last one is answered.

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::client::Client;
use crate::conn::Conn;
use crate::shared::WorkerCtx;
use crate::stats::ErrorKind;
use crate::tls::Tls;

/// Each stream's receive window: large, as h2load's default, so that flow control never
/// paces a body the server is sending (the window is a promise, not memory held).
const STREAM_WINDOW: u32 = 1 << 24;
/// The connection's receive window, for `streams` bodies at once.
const CONNECTION_WINDOW: u32 = 1 << 28;

/// The bytes of one HTTP/2 connection: the engine's socket, under TLS or not, counted in
/// the worker's ledger as they pass (frames and records included, as HTTP/1.1's are).
struct Wire {
    conn: Conn,
    tls: Option<Tls>,
    ctx: Rc<WorkerCtx>,
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let into = buf.initialize_unfilled();
        let n = ready!(match &mut this.tls {
            Some(tls) => tls.poll_read(&this.conn, cx, into),
            None => this
                .conn
                .poll_read_with(cx, |socket| io::Read::read(&mut &*socket, into)),
        })?;
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

/// One HTTP/2 connection as its clients hold it: the handle that opens streams, and whether
/// the connection ended by the server's GOAWAY. h2 fails a stream the GOAWAY left in flight
/// with the connection's end (a broken pipe) rather than the GOAWAY; its driver sees the
/// GOAWAY, and says so here before the streams run again.
#[derive(Clone)]
pub struct Link {
    pub send: SendRequest<Bytes>,
    goaway: Rc<Cell<bool>>,
}

impl Link {
    /// What a stream's error counts as on this connection.
    pub fn error_kind(&self, e: &h2::Error) -> ErrorKind {
        match error_kind(e) {
            ErrorKind::Reset | ErrorKind::Closed | ErrorKind::Other if self.goaway.get() => {
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
    let wire = Wire {
        conn,
        tls,
        ctx: client.ctx.clone(),
    };
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Bytes>(wire)
        .await
        .map_err(|e| error_kind(&e))?;
    // The driver ends when every handle and stream is gone, or the connection fails; its
    // error reaches the streams, where it is counted.
    let goaway = Rc::new(Cell::new(false));
    let seen = goaway.clone();
    tokio::task::spawn_local(async move {
        if let Err(e) = connection.await {
            seen.set(e.is_go_away() && e.is_remote());
        }
    });
    Ok(Link { send, goaway })
}

/// What an h2 error counts as: the server's GOAWAY or RST_STREAM by kind, a socket error as
/// HTTP/1.1's would, a frame the client refused as `parse`.
pub fn error_kind(e: &h2::Error) -> ErrorKind {
    if e.is_go_away() && e.is_remote() {
        ErrorKind::H2Goaway
    } else if e.is_reset() && e.is_remote() {
        ErrorKind::H2Reset
    } else if let Some(io) = e.get_io() {
        ErrorKind::from_io(io)
    } else if e.is_go_away() || e.is_reset() {
        ErrorKind::Parse
    } else {
        ErrorKind::Other
    }
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
pub struct Groups {
    streams: u64,
    seats: Cell<u64>,
    groups: RefCell<Vec<Rc<Group>>>,
}

impl Groups {
    pub fn new(streams: u64) -> Groups {
        Groups {
            streams: streams.max(1),
            seats: Cell::new(0),
            groups: RefCell::default(),
        }
    }

    /// The group of the next seat.
    pub fn seat(&self) -> Rc<Group> {
        let seat = self.seats.get();
        self.seats.set(seat + 1);
        let index = (seat / self.streams) as usize;
        let mut groups = self.groups.borrow_mut();
        while groups.len() <= index {
            groups.push(Rc::default());
        }
        groups[index].clone()
    }
}
