//! One worker's book of attempts, kept the same way by both socket loops (the epoll clients
//! and the io_uring driver): an attempt is begun, answered (its timings and status class)
//! and ended (counted, with the kind of error that ended it, if one did); connections are
//! opened, connected and closed; bytes move. The counters are read by the coordinator while
//! the run goes on; the histograms stay with the worker until the end.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::inbox::Answer;
use crate::spin::Steps;
use crate::stats::{micros, Attempt, Counters, ErrorKind, Event, Flow, Histograms, Timing};

/// How long a client starved of ports or descriptors pauses before it tries again: every
/// retry would fail at once, and the pause keeps it from spinning while the run is reported
/// invalid.
pub const STARVED_PAUSE: Duration = Duration::from_millis(10);

/// A connect or a TLS handshake still waiting when the run ends counts as its error
/// (`timeout`, `tls_handshake_timeout`) once it has waited this long: Linux's least
/// retransmission timeout (TCP_RTO_MIN), so on any path of shorter round trip a segment of
/// it was lost or the server left it unanswered (an accept queue overflowed, a server past
/// its capacity, say; a SYN's next try comes a second after the first). A younger one was
/// only cut by the end, as a request in flight then is, and counts as nothing.
pub const STALLED: Duration = Duration::from_millis(200);

pub struct Ledger {
    counters: Arc<Counters>,
    histograms: RefCell<Histograms>,
    /// The server's clock minus this host's (ms), for delays from server timestamps.
    clock_offset_ms: f64,
    /// Steps of the sockets, watched by the spinning wait (epoll loop).
    pub steps: Steps,
    /// How long the bytes of the read being parsed now waited in the kernel (µs), when the
    /// read carried a receive stamp: the deliveries parsed from it carry it to the emit log.
    /// Set by every read of a stamped push stream, before its bytes are parsed and with no
    /// wait between, so no other task's read comes between a read and its deliveries.
    read_delay_us: Cell<Option<u64>>,
    /// The run is over and the worker's tasks are being dropped: a stage dropped now was
    /// still waiting at the end (`Pending`).
    over: Cell<bool>,
}

/// One pushed event's arrival, as `Ledger::event` measured it.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// On the server's clock (this host's plus the plan's offset), Unix milliseconds.
    pub at_ms: f64,
    /// From the server's `created` stamp to the arrival, in whole milliseconds as µs.
    pub delay_us: u64,
    /// How long the bytes waited in the kernel before the engine read them, when stamped.
    pub read_delay_us: Option<u64>,
}

impl Ledger {
    pub fn new(counters: Arc<Counters>, clock_offset_ms: f64) -> Ledger {
        Ledger {
            counters,
            histograms: RefCell::default(),
            clock_offset_ms,
            steps: Steps::default(),
            read_delay_us: Cell::new(None),
            over: Cell::new(false),
        }
    }

    /// The run is over: what is still in hand is about to be dropped.
    pub fn run_over(&self) {
        self.over.set(true);
    }

    /// A stage begun at `began` (a connect, a TLS handshake) was still waiting at the run's
    /// end, `now`: an error of `kind` if it had waited `STALLED` or more (its attempt ends
    /// there).
    pub fn stage_cut(&self, kind: ErrorKind, began: Instant, now: Instant) {
        if now.saturating_duration_since(began) >= STALLED {
            self.end(1, Err(kind));
        }
    }

    /// A stage `S` begun at `began`, in hand until `Pending::done`.
    pub fn pending<S: Stage>(&self, began: Instant) -> Pending<'_, S> {
        Pending {
            ledger: self,
            began,
            stage: PhantomData,
        }
    }

    /// The live counters, for what only one behaviour counts (push events).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// An attempt of `units` requests (syslog: messages) begins.
    #[inline]
    pub fn begin(&self, units: u64) {
        self.counters.add(Attempt::Started, units);
    }

    /// An attempt of `units` ends, answered (whatever the status) or failed with `kind`.
    #[inline]
    pub fn end(&self, units: u64, result: Result<(), ErrorKind>) {
        self.counters.add(Attempt::Requests, units);
        self.steps.step();
        match result {
            Ok(()) => self.counters.add(Attempt::Answered, units),
            Err(kind) => self.counters.error(kind),
        }
    }

    /// An answer complete at `done` to a request sent at `sent` (scheduled for `intended` in
    /// open loop): its timings and status class; a status of 400 or more also counts as a
    /// `status` error, while the attempt still ends answered.
    #[inline]
    pub fn answered(
        &self,
        intended: Option<Instant>,
        sent: Instant,
        answer: &Answer,
        done: Instant,
    ) {
        let mut h = self.book();
        let service = micros(done - sent);
        h.record(Timing::Service, service);
        h.record(
            Timing::FirstByte,
            micros(answer.first_byte.saturating_duration_since(sent)),
        );
        let latency = match intended {
            Some(t) => {
                h.record(Timing::Lag, micros(sent.saturating_duration_since(t)));
                micros(done.saturating_duration_since(t))
            }
            None => service,
        };
        h.record(Timing::Latency, latency);
        drop(h);
        self.counters.window_latency(latency);
        self.counters.status(answer.status);
        if answer.status >= 400 {
            self.counters.error(ErrorKind::Status);
        }
    }

    /// A connection counted as open until the returned guard is dropped.
    pub fn opened(&self) -> OpenConnection {
        self.counters.open_connections.fetch_add(1, Relaxed);
        self.steps.step();
        OpenConnection(self.counters.clone())
    }

    /// A connect that took `took` succeeded.
    pub fn connected(&self, took: Duration) {
        self.book().record(Timing::Connect, micros(took));
        self.counters.add(Flow::ConnectionsOpened, 1);
        self.steps.step();
    }

    #[inline]
    pub fn read(&self, bytes: usize) {
        self.counters.add(Flow::BytesRead, bytes as u64);
        self.steps.step();
    }

    #[inline]
    pub fn wrote(&self, bytes: usize) {
        self.counters.add(Flow::BytesWritten, bytes as u64);
        self.steps.step();
    }

    /// `n` HTTP/2 streams opened by the engine's own frames.
    pub fn streams_opened(&self, n: u64) {
        self.counters.add(Flow::StreamsOpened, n);
    }

    /// Answer bytes waited `waited` in the kernel before the loop read them.
    pub fn noticed(&self, waited: Duration) {
        self.book().record(Timing::Notice, micros(waited));
    }

    /// A push stream's read: its bytes waited `waited` in the kernel (`None`: the read had
    /// no stamp). Recorded in `notice_us` too, and kept for the deliveries parsed from it.
    pub fn push_read(&self, waited: Option<Duration>) {
        if let Some(waited) = waited {
            self.noticed(waited);
        }
        self.read_delay_us.set(waited.map(micros));
    }

    /// A pushed event created at `created_ms` (server clock, ms since the epoch) arrived on a
    /// subscription sent at `subscribed`. The arrival is read on the server's clock (this
    /// host's plus the plan's offset); its delay in whole milliseconds, the grain of the
    /// server's stamp. The caller records it in the interval's window
    /// (`Counters::window_event`), with its emit cycle when it has one.
    pub fn event(&self, created_ms: u64, subscribed: Instant) -> Arrival {
        let at_ms = (crate::system::unix_ms() + self.clock_offset_ms).max(0.0);
        let delay_us = (at_ms as u64).saturating_sub(created_ms) * 1000;
        let mut h = self.book();
        h.record(Timing::EventDelay, delay_us);
        h.record(Timing::EventSinceSubscribe, micros(subscribed.elapsed()));
        Arrival {
            at_ms,
            delay_us,
            read_delay_us: self.read_delay_us.get(),
        }
    }

    /// A long poll was sent again `gap` after the last answer arrived.
    pub fn resubscribed(&self, gap: Duration) {
        self.book().record(Timing::Resubscribe, micros(gap));
    }

    /// A stream's handshake (connect to response head, or to the `101`) took `took`.
    pub fn handshake(&self, took: Duration) {
        self.book().record(Timing::Handshake, micros(took));
    }

    /// A TLS handshake ended after `took`, resuming a session or not.
    pub fn tls_handshake(&self, took: Duration, resumed: bool) {
        self.book().record(Timing::TlsHandshake, micros(took));
        self.counters.add(Flow::TlsHandshakes, 1);
        self.counters.add(Flow::TlsResumed, resumed as u64);
    }

    /// A WebSocket publish was acknowledged `took` after it was sent.
    pub fn broadcast_rtt(&self, took: Duration) {
        self.book().record(Timing::BroadcastRtt, micros(took));
        self.counters.add(Event::Published, 1);
    }

    /// The histograms to record into: emptied first when the measured window has begun since
    /// the last record (the warm-up's timings are not the measurement's).
    fn book(&self) -> std::cell::RefMut<'_, Histograms> {
        let mut histograms = self.histograms.borrow_mut();
        if self.counters.take_restart() {
            *histograms = Histograms::default();
        }
        histograms
    }

    /// The worker's histograms, at the end of its run.
    pub fn take_histograms(&self) -> Histograms {
        if self.counters.take_restart() {
            return Histograms::default();
        }
        self.histograms.take()
    }
}

/// One open connection in the `open_connections` gauge; dropping it closes it there.
pub struct OpenConnection(Arc<Counters>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Relaxed);
    }
}

/// A stage of an attempt the run's end may cut, and the error it counts as then.
pub trait Stage {
    const KIND: ErrorKind;
}

/// A connect: cut, a `timeout`.
pub struct Connecting;

impl Stage for Connecting {
    const KIND: ErrorKind = ErrorKind::Timeout;
}

/// A TLS handshake: cut, a `tls_handshake_timeout`.
pub struct Handshaking;

impl Stage for Handshaking {
    const KIND: ErrorKind = ErrorKind::TlsHandshakeTimeout;
}

/// A stage in hand on the epoll loop. Its task is dropped with the worker's loop when the
/// run ends; dropped then, unfinished, it is counted by `Ledger::stage_cut`. Dropped during
/// the run (its attempt timed out or failed) it counts nothing: the attempt did. Its stage
/// is a type, not a field: a held client's task has no byte to spare (`worker.rs`' size test).
pub struct Pending<'a, S: Stage> {
    ledger: &'a Ledger,
    began: Instant,
    stage: PhantomData<S>,
}

impl<S: Stage> Pending<'_, S> {
    /// The stage finished (done or failed): the attempt counts it. When it began.
    pub fn done(self) -> Instant {
        let began = self.began;
        std::mem::forget(self);
        began
    }
}

impl<S: Stage> Drop for Pending<'_, S> {
    fn drop(&mut self) {
        if self.ledger.over.get() {
            self.ledger.stage_cut(S::KIND, self.began, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Snapshot;

    #[test]
    fn an_attempt_is_counted_once_whether_answered_or_failed() {
        let counters = Arc::new(Counters::default());
        let ledger = Ledger::new(counters.clone(), 0.0);
        let sent = Instant::now();
        for status in [200, 503] {
            ledger.begin(1);
            let answer = Answer {
                status,
                close: false,
                first_byte: sent,
            };
            ledger.answered(None, sent, &answer, sent + Duration::from_micros(50));
            ledger.end(1, Ok(()));
        }
        ledger.begin(64);
        ledger.end(64, Err(ErrorKind::Timeout));
        let s = Snapshot::sum([&*counters]);
        let a = s.attempts;
        assert_eq!((a.started, a.requests, a.answered, a.ok), (66, 66, 2, 1));
        assert_eq!(s.error_count(ErrorKind::Status), 1);
        assert_eq!(s.error_count(ErrorKind::Timeout), 1);
        assert_eq!(ledger.take_histograms()[Timing::Latency].len(), 2);
    }

    #[test]
    fn event_delays_read_the_arrival_on_the_servers_clock() {
        // A server whose clock is 3 s behind this host's stamps its events 3 s "early".
        let created = crate::system::unix_ms() as u64 - 3_000;
        let delay_ms = |offset_ms: f64| {
            let ledger = Ledger::new(Arc::new(Counters::default()), offset_ms);
            ledger.event(created, Instant::now());
            ledger.take_histograms()[Timing::EventDelay].max() as f64 / 1000.0
        };
        let uncorrected = delay_ms(0.0);
        assert!((3_000.0..3_200.0).contains(&uncorrected), "{uncorrected}");
        let corrected = delay_ms(-3_000.0);
        assert!(corrected < 200.0, "{corrected}");
        // A clock ahead of the server's by more than the delay reads no negative delay.
        assert!(delay_ms(-10_000.0) <= 0.001);
    }

    #[test]
    fn an_open_connection_leaves_the_gauge_when_dropped() {
        let counters = Arc::new(Counters::default());
        let ledger = Ledger::new(counters.clone(), 0.0);
        let a = ledger.opened();
        let b = ledger.opened();
        drop(a);
        assert_eq!(counters.open_connections.load(Relaxed), 1);
        drop(b);
        assert_eq!(counters.open_connections.load(Relaxed), 0);
    }
}
