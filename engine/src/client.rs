//! One simulated client on the epoll loop: one connection at a time and its read buffer,
//! with the HTTP exchange steps every behaviour is built from. What a behaviour keeps from
//! one exchange to the next is its own (`Behaviour::State`), not the client's.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::conn::{Conn, ConnOptions};
use crate::http::ParseError;
use crate::inbox::{Answer, Inbox, Progress};
use crate::ledger::{Connecting, Handshaking, Ledger};
use crate::plan::ReadPace;
use crate::shared::WorkerCtx;
use crate::stamps::waited_since;
use crate::stats::ErrorKind;
use crate::tls::Tls;

pub struct Client {
    pub ctx: Rc<WorkerCtx>,
    conn: Option<Conn>,
    /// The connection's TLS state, for a TLS target.
    tls: Option<Tls>,
    inbox: Inbox,
    /// Slow reader: at most this many bytes per read, one read per interval.
    read_pace: Option<ReadPace>,
    no_delay: bool,
    /// Whether answers are stamped by the kernel and their reading delay is recorded
    /// (`notice_us`): latency-bound plans, whose connections are few, and push streams.
    stamps: bool,
    /// Push streams stamp every read, not only an answer's first: each delivery's wait in
    /// the kernel goes to its cycle's drain time (`EmitLine::drain_us`).
    push: bool,
    /// Bytes written, if the socket takes them at once, when the client goes away with its
    /// connection open (a WebSocket's close frame as the run ends).
    farewell: Option<[u8; 8]>,
    /// A TLS handshake is in hand: set while it runs, and left set if the attempt's timeout
    /// drops it, so that the timeout counts by its kind (`Client::timed_out`).
    handshaking: Cell<bool>,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(bytes) = self.farewell {
            self.send_now(&bytes);
        }
        // A TLS connection open as the run ends says goodbye too (see `Tls::close`).
        if let (Some(tls), Some(conn)) = (&mut self.tls, &self.conn) {
            tls.close(conn);
        }
    }
}

impl Client {
    /// A client as the plan's behaviour wants its sockets (`TCP_NODELAY`, a slow reader's
    /// small receive buffer and paced reads).
    pub fn new(ctx: Rc<WorkerCtx>) -> Client {
        let behaviour = ctx.shared.plan.plan.behaviour.kind();
        Client {
            read_pace: behaviour.read_pace(),
            // Not with a new cleartext connection per request, where the request is one write
            // on a fresh connection that never waits for an ACK anyway. Over TLS it does: the
            // handshake's last flight (the client's Finished) is a small segment still unacked
            // when the request's record follows, so Nagle would hold the request until the
            // server's delayed ACK fired, ~40 ms later, on every connection.
            no_delay: !behaviour.new_connection_each() || ctx.shared.plan.tls.is_some(),
            // A TLS record's arrival is not the answer's: no stamps over TLS.
            stamps: ctx.shared.plan.plan.stamps_arrivals() && ctx.shared.plan.tls.is_none(),
            push: behaviour.events().is_some(),
            conn: None,
            tls: None,
            farewell: None,
            handshaking: Cell::new(false),
            inbox: Inbox::default(),
            ctx,
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ctx.ledger
    }

    /// Opens a connection if there is none, timing the connect.
    pub async fn ensure_conn(&mut self) -> Result<(), ErrorKind> {
        if self.conn.is_some() {
            return Ok(());
        }
        let conn = self.connect().await?;
        if self.stamps {
            conn.enable_stamps().map_err(|e| ErrorKind::from_io(&e))?;
        }
        self.tls = match &self.ctx.shared.plan.tls {
            Some(client) => Some(self.shake_hands(client, &conn).await?),
            None => None,
        };
        self.conn = Some(conn);
        self.inbox.clear();
        Ok(())
    }

    /// A TCP connection made, timed and counted.
    async fn connect(&self) -> Result<Conn, ErrorKind> {
        let options = ConnOptions {
            source: self.ctx.shared.next_source(),
            recv_buffer: self.read_pace.map(|pace| pace.rcvbuf),
            no_delay: self.no_delay,
        };
        let began = Instant::now();
        let pending = self.ctx.ledger.pending::<Connecting>(began);
        let made = Conn::connect(self.ctx.shared.addr, &options, &self.ctx.ledger).await;
        pending.done();
        let conn = made.map_err(|e| ErrorKind::from_connect(&e))?;
        self.ctx.ledger.connected(began.elapsed());
        Ok(conn)
    }

    /// A new connection (and its TLS, for a TLS target), connected, shaken hands with and
    /// counted as any other, handed over to a protocol that drives it itself (HTTP/2).
    pub async fn new_connection(&mut self) -> Result<(Conn, Option<Tls>), ErrorKind> {
        self.close();
        self.ensure_conn().await?;
        let conn = self.conn.take().ok_or(ErrorKind::Closed)?;
        Ok((conn, self.tls.take()))
    }

    /// A new connection on which a TLS handshake is begun and left once the server's
    /// ServerHello has come (a handshake flood's); the connection is then dropped, no alert
    /// sent. Within the plan's timeout, as a whole handshake.
    pub async fn hello_then_leave(&mut self) -> Result<(), ErrorKind> {
        self.close();
        let client = self.ctx.shared.plan.tls.as_ref().ok_or(ErrorKind::Other)?;
        let mut tls = Tls::new(client)?;
        let conn = self.connect().await?;
        let limit = Duration::from_millis(self.ctx.shared.plan.plan.timeout_ms);
        let hello = tokio::time::timeout(limit, tls.server_hello(&conn)).await;
        Ok(hello.map_err(|_| ErrorKind::TlsHandshakeTimeout)??)
    }

    /// The TLS handshake on a connection just made, timed and counted. Its limit is the
    /// attempt's own timeout, as any other stage's: a server past its capacity that answers
    /// late is a long latency, as wrk's, ab's and h2load's. One that never answers is counted
    /// by its kind all the same: within the run once the timeout is up (the attempt's own
    /// too, `Client::timed_out`), or at its end if it has waited long enough by then
    /// (`Ledger::stage_cut`).
    async fn shake_hands(
        &self,
        client: &crate::plan::TlsClient,
        conn: &Conn,
    ) -> Result<Tls, ErrorKind> {
        // The guard holds the handshake's start, not kept twice in a held client's task.
        let pending = self.ctx.ledger.pending::<Handshaking>(Instant::now());
        let mut tls = Tls::new(client)?;
        let limit = Duration::from_millis(self.ctx.shared.plan.plan.timeout_ms);
        self.handshaking.set(true);
        let shaken = tokio::time::timeout(limit, tls.handshake(conn)).await;
        self.handshaking.set(false);
        let began = pending.done();
        let resumed = shaken.map_err(|_| ErrorKind::TlsHandshakeTimeout)??;
        self.ctx.ledger.tls_handshake(began.elapsed(), resumed);
        Ok(tls)
    }

    /// What the attempt's timeout, up now, counts as: `tls_handshake_timeout` if it cut a
    /// TLS handshake, else `timeout`.
    pub fn timed_out(&self) -> ErrorKind {
        match self.handshaking.replace(false) {
            true => ErrorKind::TlsHandshakeTimeout,
            false => ErrorKind::Timeout,
        }
    }

    pub fn close(&mut self) {
        self.farewell = None;
        if let (Some(tls), Some(conn)) = (&mut self.tls, &self.conn) {
            tls.close(conn);
        }
        self.tls = None;
        self.conn = None;
        self.inbox.clear();
    }

    /// Ends a TLS connection in order, waiting for the server's close (`Tls::goodbye`): a
    /// sender that must have every record read says goodbye so. A cleartext one just closes.
    pub async fn goodbye(&mut self) {
        if let (Some(tls), Some(conn)) = (&mut self.tls, &self.conn) {
            tls.goodbye(conn).await;
            self.tls = None;
        }
        self.close();
    }

    /// Opens a connection if needed and sends `request`; returns when the attempt began
    /// (so a new connection's latency includes its connect).
    pub async fn open_and_send(&mut self, request: &[u8]) -> Result<Instant, ErrorKind> {
        let began = Instant::now();
        self.ensure_conn().await?;
        self.send(request).await?;
        Ok(began)
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), ErrorKind> {
        let conn = self.conn.as_ref().ok_or(ErrorKind::Closed)?;
        match &mut self.tls {
            Some(tls) => tls.write_all(conn, bytes).await?,
            None => conn.write_all(bytes).await?,
        }
        self.ctx.ledger.wrote(bytes.len());
        Ok(())
    }

    /// Reads one whole answer, handing body bytes to `sink`. Interim 1xx answers are skipped.
    pub async fn read_answer(
        &mut self,
        head_request: bool,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
    ) -> Result<Answer, ErrorKind> {
        self.read_stream(head_request, sink, &mut |_| {}).await
    }

    /// As `read_answer`, telling `on_head` the status as soon as the header section is in
    /// (a stream's handshake ends there, long before its body does).
    pub async fn read_stream(
        &mut self,
        head_request: bool,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
        on_head: &mut impl FnMut(u16),
    ) -> Result<Answer, ErrorKind> {
        let mut progress = Progress::default();
        let mut head_seen = false;
        loop {
            if !head_seen {
                self.inbox.advance_head(&mut progress, head_request)?;
                if let Some(status) = progress.status() {
                    head_seen = true;
                    on_head(status);
                }
            }
            if let Some(answer) = self.inbox.advance(&mut progress, head_request, sink)? {
                return Ok(answer);
            }
            let first = progress.first_byte.is_none();
            let n = self.read_more(first).await?;
            progress.first_byte.get_or_insert_with(Instant::now);
            if n == 0 {
                return progress.ended_by_close().ok_or(ErrorKind::Closed);
            }
        }
    }

    /// Bytes read and not yet consumed (a WebSocket reads its frames from here).
    pub fn unread(&self) -> &[u8] {
        self.inbox.unread()
    }

    /// Marks `n` unread bytes as consumed.
    pub fn consume(&mut self, n: usize) {
        self.inbox.consume(n);
    }

    /// Reads more bytes into the buffer, waiting if none are there; 0 means the peer closed.
    pub async fn fill(&mut self) -> Result<usize, ErrorKind> {
        self.read_more(false).await
    }

    /// Whether the connection may carry HTTP/2: cleartext (prior knowledge), or TLS whose
    /// ALPN agreed `h2`.
    pub fn agreed_h2(&self) -> bool {
        self.tls
            .as_ref()
            .is_none_or(|tls| tls.alpn() == Some(b"h2"))
    }

    /// Writes `bytes` now if the socket takes them without waiting (a goodbye as the run
    /// ends, when there is no time to wait).
    pub fn send_now(&mut self, bytes: &[u8]) -> bool {
        match (&self.conn, &mut self.tls) {
            (Some(conn), Some(tls)) => tls.try_write(conn, bytes),
            (Some(conn), None) => conn.try_write(bytes),
            (None, _) => false,
        }
    }

    /// What to write if the client is dropped with this connection open; cleared when the
    /// connection closes.
    pub fn set_farewell(&mut self, bytes: Option<[u8; 8]>) {
        self.farewell = bytes;
    }

    /// Reads what is there into the inbox; for the `first` read of an answer on a stamped
    /// connection, records how long its bytes waited in the kernel.
    async fn read_more(&mut self, first: bool) -> Result<usize, ErrorKind> {
        let mut limit = None;
        if let Some(pace) = self.read_pace {
            tokio::time::sleep(pace.interval).await;
            limit = Some(pace.bytes);
        }
        let conn = self.conn.as_ref().ok_or(ErrorKind::Closed)?;
        if let Some(tls) = &mut self.tls {
            self.inbox.lend_back();
            tls.readable(conn).await?;
            let n = tls.read_now(self.inbox.spare(limit)?)?;
            self.inbox.filled(n);
            self.ctx.ledger.read(n);
            return Ok(n);
        }
        // No read buffer is held while waiting: a held connection borrows one from the
        // worker only when its bytes have come (a readiness left from the last read may be
        // stale, so a read that finds nothing gives the buffer back and waits again).
        let stamped = self.stamps && (first || self.push);
        let n = loop {
            self.inbox.lend_back();
            conn.readable().await?;
            let spare = self.inbox.spare(limit)?;
            if !stamped {
                if let Some(read) = conn.try_read(spare) {
                    break read?;
                }
            } else if let Some(read) = conn.try_read_stamped(spare) {
                let (n, stamp) = read?;
                let waited = stamp.map(waited_since);
                match waited {
                    _ if self.push => self.ctx.ledger.push_read(waited),
                    Some(waited) => self.ctx.ledger.noticed(waited),
                    None => {}
                }
                break n;
            }
        };
        self.inbox.filled(n);
        self.ctx.ledger.read(n);
        Ok(n)
    }

    /// Records the timings of one answer completed now.
    pub fn record_answer(&self, intended: Option<Instant>, sent: Instant, answer: &Answer) {
        self.ctx
            .ledger
            .answered(intended, sent, answer, Instant::now());
    }

    /// Ends an exchange: keeps the connection for the next one or closes it.
    pub fn finish(&mut self, answer: &Answer, keep: bool) {
        match (&self.conn, keep && !answer.close) {
            // Over TLS the socket may hold records rustls has not taken yet (a read cut
            // short by its room): no edge would come for them, so the readiness is kept.
            (Some(conn), true)
                if self.inbox.is_drained() && self.tls.as_ref().is_none_or(|t| t.caught_up()) =>
            {
                conn.expect_silence()
            }
            (Some(_), true) => {}
            _ => self.close(),
        }
    }

    /// Waits for the server to close (sequential pacing waits for the tear-down).
    pub async fn await_peer_close(&mut self) -> Result<(), ErrorKind> {
        loop {
            self.inbox.clear();
            if self.read_more(false).await? == 0 {
                self.close();
                return Ok(());
            }
        }
    }
}
