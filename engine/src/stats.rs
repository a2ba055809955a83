//! Recording: the counters a reporter thread may read while the run goes on (relaxed atomics,
//! one set per worker so no cache line is shared between workers), and the latency histograms
//! each worker keeps to itself until the end. Both are arrays indexed by the metrics' names
//! (`crate::metrics`), so that summing them is a loop.

use std::io;
use std::ops::{Index, IndexMut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use hdrhistogram::Histogram;

use crate::emits::{Delivery, IntervalCycles};
pub(crate) use crate::hdr::round3;
use crate::hdr::{new_histogram, record_us};
pub use crate::metrics::{
    Attempt, Attempts, ErrorKind, Errors, Event, Events, Flow, Timing, Traffic,
};

impl ErrorKind {
    /// Resource exhaustion on the client side makes the whole run invalid.
    pub fn invalidates_run(self) -> bool {
        matches!(self, ErrorKind::PortsExhausted | ErrorKind::FdsExhausted)
    }

    /// A TLS failure: its kind tells more than the connection's end that follows it.
    pub fn is_tls(self) -> bool {
        matches!(
            self,
            ErrorKind::TlsHandshake | ErrorKind::TlsAlert | ErrorKind::TlsRecord
        )
    }

    /// Classifies a socket error raised while connecting.
    pub fn from_connect(err: &io::Error) -> ErrorKind {
        match err.raw_os_error() {
            Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => ErrorKind::PortsExhausted,
            Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) => {
                ErrorKind::FdsExhausted
            }
            _ if err.kind() == io::ErrorKind::TimedOut => ErrorKind::Timeout,
            _ => ErrorKind::Connect,
        }
    }

    /// Classifies a socket error raised on an established connection.
    pub fn from_io(err: &io::Error) -> ErrorKind {
        use io::ErrorKind as K;
        match err.kind() {
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ErrorKind::Reset,
            K::UnexpectedEof => ErrorKind::Closed,
            K::TimedOut => ErrorKind::Timeout,
            K::InvalidData => match err.get_ref() {
                Some(e) if e.is::<TlsRecordError>() => ErrorKind::TlsRecord,
                Some(e) => match e.downcast_ref() {
                    Some(rustls::Error::AlertReceived(_)) => ErrorKind::TlsAlert,
                    Some(_) => ErrorKind::TlsHandshake,
                    None => ErrorKind::Other,
                },
                None => ErrorKind::Other,
            },
            _ => ErrorKind::Other,
        }
    }
}

/// A TLS error after the handshake ended (a record that is not TLS or does not decrypt: a
/// server writing garbage on an established connection), as the I/O error the TLS layer
/// raises for it: counted `tls_record`, apart from the handshake's failures.
#[derive(Debug)]
pub struct TlsRecordError(pub rustls::Error);

impl std::fmt::Display for TlsRecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS record after the handshake: {}", self.0)
    }
}

impl std::error::Error for TlsRecordError {}

impl From<io::Error> for ErrorKind {
    fn from(err: io::Error) -> Self {
        ErrorKind::from_io(&err)
    }
}

/// Live counters of one worker. Every count only grows, except `open_connections`.
#[derive(Debug, Default)]
pub struct Counters {
    attempts: [AtomicU64; Attempt::N],
    traffic: [AtomicU64; Flow::N],
    events: [AtomicU64; Event::N],
    errors: [AtomicU64; ErrorKind::N],
    status_classes: [AtomicU64; 5],
    pub open_connections: AtomicI64,
    /// The timings of the interval going on, emptied by the coordinator at its end. Only the
    /// coordinator's drain contends for the lock, once an interval.
    window: Mutex<Window>,
    /// Set by the coordinator as a warm-up ends: the worker empties its histograms before it
    /// records the next timing (see `Ledger`), so the summary's cover the measured window.
    restart: AtomicBool,
    /// Nanoseconds this worker spun (polls that found nothing), readable while it runs: a
    /// measured window after a warm-up counts only its own.
    spun_ns: AtomicU64,
}

/// The timings an interval line reads its percentiles from: the latencies of the attempts
/// answered in the interval, and the delays of the push events received in it (µs); and the
/// push emit cycles whose deliveries it received. A worker's window and the coordinator's sum
/// of them are the same type, so that draining is an `add` and a `reset`: the histograms
/// allocate nothing once made; the cycles, an entry per (event, seq) of the interval, at
/// most `MAX_INTERVAL_CYCLES` seqs.
#[derive(Debug, Clone)]
pub struct Window {
    pub latency: Histogram<u64>,
    pub event_delay: Histogram<u64>,
    pub cycles: IntervalCycles,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            latency: new_histogram(),
            event_delay: new_histogram(),
            cycles: IntervalCycles::default(),
        }
    }
}

impl Window {
    /// Adds `other`'s counts into this window.
    pub fn add(&mut self, other: &Window) {
        self.latency
            .add(&other.latency)
            .expect("histograms share bounds");
        self.event_delay
            .add(&other.event_delay)
            .expect("histograms share bounds");
        self.cycles
            .absorb(other.cycles.ticks(), other.cycles.unlisted);
    }

    pub fn reset(&mut self) {
        self.latency.reset();
        self.event_delay.reset();
        self.cycles.clear();
    }
}

/// A count's name finds its cell among a worker's live counters.
pub trait Counted: Copy {
    fn cell(self, counters: &Counters) -> &AtomicU64;
}

impl Counted for Attempt {
    fn cell(self, counters: &Counters) -> &AtomicU64 {
        &counters.attempts[self as usize]
    }
}

impl Counted for Flow {
    fn cell(self, counters: &Counters) -> &AtomicU64 {
        &counters.traffic[self as usize]
    }
}

impl Counted for Event {
    fn cell(self, counters: &Counters) -> &AtomicU64 {
        &counters.events[self as usize]
    }
}

impl Counted for ErrorKind {
    fn cell(self, counters: &Counters) -> &AtomicU64 {
        &counters.errors[self as usize]
    }
}

impl Counters {
    /// Adds `n` to the count `counted` names.
    #[inline]
    pub fn add(&self, counted: impl Counted, n: u64) {
        counted.cell(self).fetch_add(n, Relaxed);
    }

    pub fn error(&self, kind: ErrorKind) {
        self.add(kind, 1);
    }

    /// Records an answered attempt's latency (µs) in the interval's window.
    #[inline]
    pub fn window_latency(&self, us: u64) {
        record_us(&mut self.window_lock().latency, us);
    }

    /// Records a received push event's delay (µs) in the interval's window, and, when it is
    /// a delivery of an emit cycle (`None`: a replayed event), the cycle's: under one lock.
    #[inline]
    pub fn window_event(&self, delay_us: u64, cycle: Option<&Delivery>) {
        let mut window = self.window_lock();
        record_us(&mut window.event_delay, delay_us);
        if let Some(d) = cycle {
            window.cycles.observe(d);
        }
    }

    /// Moves this worker's window into `into` (added) and empties it: the interval's end.
    pub fn drain_window(&self, into: &mut Window) {
        let mut window = self.window_lock();
        into.add(&window);
        window.reset();
    }

    fn window_lock(&self) -> std::sync::MutexGuard<'_, Window> {
        // A worker that panicked while holding the lock left whole counts: keep reading them.
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `d` to the time this worker spun.
    #[inline]
    pub fn spun(&self, d: std::time::Duration) {
        self.spun_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// The time this worker has spun so far.
    pub fn spun_so_far(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.spun_ns.load(Relaxed))
    }

    /// The measured window begins: this worker's histograms start again.
    pub fn restart_histograms(&self) {
        self.restart.store(true, Relaxed);
    }

    /// Whether the histograms must start again (once: the flag is cleared).
    #[inline]
    pub fn take_restart(&self) -> bool {
        self.restart.load(Relaxed) && self.restart.swap(false, Relaxed)
    }

    pub fn status(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.status_classes[class].fetch_add(1, Relaxed);
        if status < 400 {
            self.add(Attempt::Ok, 1);
        }
    }
}

fn load<const N: usize>(cells: &[AtomicU64; N]) -> [u64; N] {
    std::array::from_fn(|k| cells[k].load(Relaxed))
}

/// A point-in-time sum over workers, for interval lines and the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    pub attempts: Attempts,
    pub traffic: Traffic,
    pub events: Events,
    pub errors: Errors,
    pub status_classes: [u64; 5],
    pub open_connections: i64,
}

impl Snapshot {
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Counters>) -> Snapshot {
        let mut s = Snapshot::default();
        for c in all {
            s.attempts.add(&Attempts::from_counts(&load(&c.attempts)));
            s.traffic.add(&Traffic::from_counts(&load(&c.traffic)));
            s.events.add(&Events::from_counts(&load(&c.events)));
            s.errors.add(&Errors::from_counts(&load(&c.errors)));
            for (dst, src) in s.status_classes.iter_mut().zip(load(&c.status_classes)) {
                *dst += src;
            }
            s.open_connections += c.open_connections.load(Relaxed);
        }
        s
    }

    /// Adds `other`'s counts (another part of the same run) into this snapshot.
    pub fn add(&mut self, other: &Snapshot) {
        self.attempts.add(&other.attempts);
        self.traffic.add(&other.traffic);
        self.events.add(&other.events);
        self.errors.add(&other.errors);
        for (dst, src) in self.status_classes.iter_mut().zip(other.status_classes) {
            *dst += src;
        }
        self.open_connections += other.open_connections;
    }

    /// The counts since `base` (an earlier snapshot of the same run: the measured window's
    /// start); the open connections are this snapshot's own.
    pub fn since(&self, base: &Snapshot) -> Snapshot {
        Snapshot {
            attempts: self.attempts.since(&base.attempts),
            traffic: self.traffic.since(&base.traffic),
            events: self.events.since(&base.events),
            errors: self.errors.since(&base.errors),
            status_classes: std::array::from_fn(|k| {
                self.status_classes[k] - base.status_classes[k]
            }),
            open_connections: self.open_connections,
        }
    }

    pub fn error_count(&self, kind: ErrorKind) -> u64 {
        self.errors.get(kind)
    }

    pub fn total_errors(&self) -> u64 {
        self.errors.total()
    }
}

/// The histograms of one worker, all in microseconds, one per `Timing`.
#[derive(Debug, Clone)]
pub struct Histograms(pub [Histogram<u64>; Timing::N]);

impl Default for Histograms {
    fn default() -> Self {
        Histograms(std::array::from_fn(|_| new_histogram()))
    }
}

impl Index<Timing> for Histograms {
    type Output = Histogram<u64>;
    fn index(&self, timing: Timing) -> &Histogram<u64> {
        &self.0[timing as usize]
    }
}

impl IndexMut<Timing> for Histograms {
    fn index_mut(&mut self, timing: Timing) -> &mut Histogram<u64> {
        &mut self.0[timing as usize]
    }
}

/// A duration in whole microseconds, saturating.
pub fn micros(d: std::time::Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

impl Histograms {
    /// Records `us` microseconds as a `timing`, clamped into the histogram's range.
    pub fn record(&mut self, timing: Timing, us: u64) {
        record_us(&mut self[timing], us);
    }

    pub fn merge(&mut self, other: &Histograms) {
        for (dst, src) in self.0.iter_mut().zip(&other.0) {
            dst.add(src).expect("histograms share bounds");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdr::MAX_US;

    #[test]
    fn connect_errors_classify_exhaustion() {
        let ports = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(ErrorKind::from_connect(&ports), ErrorKind::PortsExhausted);
        let fds = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(ErrorKind::from_connect(&fds), ErrorKind::FdsExhausted);
        let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(ErrorKind::from_connect(&refused), ErrorKind::Connect);
        assert!(ErrorKind::PortsExhausted.invalidates_run());
    }

    #[test]
    fn snapshots_sum_workers() {
        let a = Counters::default();
        let b = Counters::default();
        a.error(ErrorKind::Timeout);
        b.error(ErrorKind::Timeout);
        b.status(503);
        a.status(200);
        a.add(Event::Gaps, 3);
        b.add(Event::Gaps, 4);
        b.add(Flow::BytesRead, 10);
        let s = Snapshot::sum([&a, &b]);
        assert_eq!(s.error_count(ErrorKind::Timeout), 2);
        assert_eq!(
            (s.events.gaps, s.traffic.bytes_read, s.events.received),
            (7, 10, 0)
        );
        assert_eq!(
            (s.attempts.ok, s.status_classes[1], s.status_classes[4]),
            (1, 1, 1)
        );
    }

    #[test]
    fn merged_histograms_keep_every_count() {
        let mut a = Histograms::default();
        let mut b = Histograms::default();
        a.record(Timing::Latency, 100);
        b.record(Timing::Latency, u64::MAX);
        b.record(Timing::Handshake, 7);
        a.merge(&b);
        let latency = &a[Timing::Latency];
        assert_eq!(latency.len(), 2);
        assert_eq!(latency.max(), latency.highest_equivalent(MAX_US));
        assert_eq!(
            (a[Timing::Handshake].len(), a[Timing::Connect].len()),
            (1, 0)
        );
    }
}
