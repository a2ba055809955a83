//! State shared by the whole run, by one worker, and by one logical client (a session: one
//! connection at a time, its read buffer, its scratch space), plus the HTTP exchange steps
//! every behaviour is built from.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::conn::{Conn, ConnOptions};
use crate::emits::EmitLog;
use crate::http::ParseError;
pub use crate::inbox::Answer;
use crate::inbox::{Inbox, Progress};
use crate::plan::{Stop, ValidPlan};
use crate::stats::{record_us, Counters, ErrorKind, Histograms};

/// What every worker thread sees.
pub struct Shared {
    pub plan: ValidPlan,
    pub addr: SocketAddr,
    pub start: Instant,
    /// When a duration-bound run stops.
    pub end: Option<Instant>,
    pub counters: Vec<Arc<Counters>>,
    issued: AtomicU64,
    source_cursor: AtomicUsize,
    /// Next syslog message number, unique across workers.
    pub syslog_seq: AtomicU64,
    pub stopping: AtomicBool,
    /// After an early stop: when work still in hand is dropped.
    abandon_at: OnceLock<Instant>,
}

impl Shared {
    pub fn new(plan: ValidPlan, start: Instant) -> Shared {
        let end = match plan.stop {
            Stop::Duration(d) => Some(start + d),
            Stop::Requests(_) => None,
        };
        let counters = (0..plan.threads)
            .map(|_| Arc::new(Counters::default()))
            .collect();
        Shared {
            addr: plan.socket_addr(),
            plan,
            start,
            end,
            counters,
            issued: AtomicU64::new(0),
            source_cursor: AtomicUsize::new(0),
            syslog_seq: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
            abandon_at: OnceLock::new(),
        }
    }

    /// Starts no new work from now on and drops what is in hand at `abandon_at`.
    pub fn stop_early(&self, abandon_at: Instant) {
        self.stopping.store(true, Relaxed);
        let _ = self.abandon_at.set(abandon_at);
    }

    /// Whether an early stop's grace period is over.
    pub fn abandon_due(&self, now: Instant) -> bool {
        self.abandon_at.get().is_some_and(|&at| now >= at)
    }

    /// Resolves when an early stop's grace period is over (never without an early stop).
    pub async fn abandoned(&self) {
        const POLL: Duration = Duration::from_millis(20);
        loop {
            if let Some(&at) = self.abandon_at.get() {
                tokio::time::sleep_until(at.into()).await;
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Grants up to `wanted` more requests; 0 means the run is over.
    pub fn take_budget(&self, wanted: u64) -> u64 {
        if self.stopping.load(Relaxed) {
            return 0;
        }
        match self.plan.stop {
            Stop::Requests(limit) => {
                let before = self.issued.fetch_add(wanted, Relaxed);
                limit.saturating_sub(before).min(wanted)
            }
            Stop::Duration(_) => {
                if self.end.is_some_and(|end| Instant::now() >= end) {
                    0
                } else {
                    wanted
                }
            }
        }
    }

    pub fn next_source(&self) -> Option<Ipv4Addr> {
        let sources = &self.plan.sources;
        if sources.is_empty() {
            return None;
        }
        Some(sources[self.source_cursor.fetch_add(1, Relaxed) % sources.len()])
    }
}

/// What the tasks of one worker thread share.
pub struct WorkerCtx {
    pub shared: Arc<Shared>,
    pub counters: Arc<Counters>,
    pub histograms: RefCell<Histograms>,
    pub emits: RefCell<EmitLog>,
}

impl WorkerCtx {
    /// Records the timings of one answered request.
    pub fn record_answer(&self, intended: Option<Instant>, sent: Instant, answer: &Answer) {
        self.record_answer_at(intended, sent, answer, Instant::now());
    }

    /// Records the timings of one request answered completely at `done`.
    pub fn record_answer_at(
        &self,
        intended: Option<Instant>,
        sent: Instant,
        answer: &Answer,
        done: Instant,
    ) {
        let mut h = self.histograms.borrow_mut();
        let service = micros(done - sent);
        record_us(&mut h.service, service);
        record_us(
            &mut h.first_byte,
            micros(answer.first_byte.saturating_duration_since(sent)),
        );
        match intended {
            Some(t) => {
                record_us(&mut h.latency, micros(done.saturating_duration_since(t)));
                record_us(&mut h.lag, micros(sent.saturating_duration_since(t)));
            }
            None => record_us(&mut h.latency, service),
        }
        drop(h);
        self.counters.status(answer.status);
        if answer.status >= 400 {
            self.counters.error(ErrorKind::Status);
        }
    }

    pub fn record_event(&self, created_ms: u64, subscribed: Instant) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut h = self.histograms.borrow_mut();
        record_us(&mut h.event_delay, now_ms.saturating_sub(created_ms) * 1000);
        record_us(&mut h.event_since_subscribe, micros(subscribed.elapsed()));
    }
}

pub fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

/// One logical client.
pub struct Session {
    pub ctx: std::rc::Rc<WorkerCtx>,
    conn: Option<Conn>,
    inbox: Inbox,
    /// Slow reader: at most this many bytes per read, one read per interval.
    pub read_pace: Option<(usize, Duration)>,
    pub recv_buffer: Option<u32>,
    pub no_delay: bool,
    /// Per-session reusable space for behaviours (a body, a line, a batch of messages).
    pub scratch: Vec<u8>,
    pub udp: Option<tokio::net::UdpSocket>,
    /// Event sequence numbers seen by this client's long polls.
    pub seq: crate::behaviour::SeqTracker,
}

impl Session {
    pub fn new(ctx: std::rc::Rc<WorkerCtx>) -> Session {
        Session {
            ctx,
            conn: None,
            inbox: Inbox::default(),
            read_pace: None,
            recv_buffer: None,
            no_delay: true,
            scratch: Vec::new(),
            udp: None,
            seq: Default::default(),
        }
    }

    /// Opens a connection if there is none, timing the connect.
    pub async fn ensure_conn(&mut self) -> Result<(), ErrorKind> {
        if self.conn.is_some() {
            return Ok(());
        }
        let options = ConnOptions {
            source: self.ctx.shared.next_source(),
            recv_buffer: self.recv_buffer,
            no_delay: self.no_delay,
        };
        let began = Instant::now();
        let conn = Conn::connect(self.ctx.shared.addr, &options, self.ctx.counters.clone())
            .await
            .map_err(|e| ErrorKind::from_connect(&e))?;
        record_us(
            &mut self.ctx.histograms.borrow_mut().connect,
            micros(began.elapsed()),
        );
        Counters::add(&self.ctx.counters.connections_opened, 1);
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
        Counters::add(&self.ctx.counters.bytes_written, bytes.len() as u64);
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
            let n = self.read_more().await?;
            progress.first_byte.get_or_insert_with(Instant::now);
            if n == 0 {
                return progress.ended_by_close().ok_or(ErrorKind::Closed);
            }
        }
    }

    async fn read_more(&mut self) -> Result<usize, ErrorKind> {
        let mut limit = None;
        if let Some((bytes, interval)) = self.read_pace {
            tokio::time::sleep(interval).await;
            limit = Some(bytes);
        }
        let conn = self.conn.as_ref().ok_or(ErrorKind::Closed)?;
        let n = conn.read(self.inbox.spare(limit)?).await?;
        self.inbox.filled(n);
        Counters::add(&self.ctx.counters.bytes_read, n as u64);
        Ok(n)
    }

    pub fn record_answer(&self, intended: Option<Instant>, sent: Instant, answer: &Answer) {
        self.ctx.record_answer(intended, sent, answer);
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
            if self.read_more().await? == 0 {
                self.close();
                return Ok(());
            }
        }
    }
}
