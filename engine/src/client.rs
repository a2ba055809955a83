//! One simulated client on the epoll loop: one connection at a time and its read buffer,
//! with the HTTP exchange steps every behaviour is built from. What a behaviour keeps from
//! one exchange to the next is its own (`Behaviour::State`), not the client's.

use std::rc::Rc;
use std::time::Instant;

use crate::conn::{Conn, ConnOptions};
use crate::http::ParseError;
use crate::inbox::{Answer, Inbox, Progress};
use crate::ledger::Ledger;
use crate::plan::ReadPace;
use crate::shared::WorkerCtx;
use crate::stats::ErrorKind;
use crate::uring::stamps::waited_since;

pub struct Client {
    pub ctx: Rc<WorkerCtx>,
    conn: Option<Conn>,
    inbox: Inbox,
    /// Slow reader: at most this many bytes per read, one read per interval.
    read_pace: Option<ReadPace>,
    no_delay: bool,
    /// Whether answers are stamped by the kernel and their reading delay is recorded
    /// (`notice_us`): latency-bound plans, whose connections are few.
    stamps: bool,
}

impl Client {
    /// A client as the plan's behaviour wants its sockets (`TCP_NODELAY`, a slow reader's
    /// small receive buffer and paced reads).
    pub fn new(ctx: Rc<WorkerCtx>) -> Client {
        let behaviour = &ctx.shared.plan.plan.behaviour;
        Client {
            read_pace: behaviour.read_pace(),
            no_delay: behaviour.wants_no_delay(),
            stamps: ctx.shared.plan.plan.latency_bound(),
            conn: None,
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
        let options = ConnOptions {
            source: self.ctx.shared.next_source(),
            recv_buffer: self.read_pace.map(|pace| pace.rcvbuf),
            no_delay: self.no_delay,
        };
        let began = Instant::now();
        let conn = Conn::connect(self.ctx.shared.addr, &options, &self.ctx.ledger)
            .await
            .map_err(|e| ErrorKind::from_connect(&e))?;
        self.ctx.ledger.connected(began.elapsed());
        if self.stamps {
            conn.enable_stamps().map_err(|e| ErrorKind::from_io(&e))?;
        }
        self.conn = Some(conn);
        self.inbox.clear();
        Ok(())
    }

    pub fn close(&mut self) {
        self.conn = None;
        self.inbox.clear();
    }

    fn conn(&self) -> Result<&Conn, ErrorKind> {
        self.conn.as_ref().ok_or(ErrorKind::Closed)
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
        self.conn()?.write_all(bytes).await?;
        self.ctx.ledger.wrote(bytes.len());
        Ok(())
    }

    /// Reads one whole answer, handing body bytes to `sink`. Interim 1xx answers are skipped.
    pub async fn read_answer(
        &mut self,
        head_request: bool,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
    ) -> Result<Answer, ErrorKind> {
        let mut progress = Progress::default();
        loop {
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

    /// Reads what is there into the inbox; for the `first` read of an answer on a stamped
    /// connection, records how long its bytes waited in the kernel.
    async fn read_more(&mut self, first: bool) -> Result<usize, ErrorKind> {
        let mut limit = None;
        if let Some(pace) = self.read_pace {
            tokio::time::sleep(pace.interval).await;
            limit = Some(pace.bytes);
        }
        let conn = self.conn.as_ref().ok_or(ErrorKind::Closed)?;
        let n = if self.stamps && first {
            let (n, stamp) = conn.read_stamped(self.inbox.spare(limit)?).await?;
            if let Some(arrived) = stamp {
                self.ctx.ledger.noticed(waited_since(arrived));
            }
            n
        } else {
            conn.read(self.inbox.spare(limit)?).await?
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
            (Some(conn), true) if self.inbox.is_drained() => conn.expect_silence(),
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
