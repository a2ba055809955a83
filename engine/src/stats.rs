//! Counters a reporter thread may read while the run goes on (relaxed atomics, one set per
//! worker so no cache line is shared between workers), and the latency histograms each worker
//! keeps to itself until the end.

use std::io;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;

use crate::hdr::new_histogram;

/// Why one request (or message, or subscription) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Connect,
    Timeout,
    Reset,
    Closed,
    Status,
    Parse,
    PortsExhausted,
    FdsExhausted,
    Other,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::Connect,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Closed,
        ErrorKind::Status,
        ErrorKind::Parse,
        ErrorKind::PortsExhausted,
        ErrorKind::FdsExhausted,
        ErrorKind::Other,
    ];

    /// The kind's name in the output (`errors.<name>`).
    pub fn wire_name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed",
            ErrorKind::Status => "status",
            ErrorKind::Parse => "parse",
            ErrorKind::PortsExhausted => "ports_exhausted",
            ErrorKind::FdsExhausted => "fds_exhausted",
            ErrorKind::Other => "other",
        }
    }

    /// Resource exhaustion on the client side makes the whole run invalid.
    pub fn invalidates_run(self) -> bool {
        matches!(self, ErrorKind::PortsExhausted | ErrorKind::FdsExhausted)
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
            _ => ErrorKind::Other,
        }
    }
}

impl From<io::Error> for ErrorKind {
    fn from(err: io::Error) -> Self {
        ErrorKind::from_io(&err)
    }
}

/// Live counters of one worker. Every field only grows, except `open_connections`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Finished attempts: answered (any status) or failed.
    pub requests: AtomicU64,
    /// Finished attempts that ended with a valid answer, whatever its status (syslog: messages
    /// sent). Throughput counts these, never failed connects, resets or timeouts.
    pub answered: AtomicU64,
    /// Attempts begun (sent, or the connection for them opened).
    pub started: AtomicU64,
    /// Answers with a status below 400.
    pub ok: AtomicU64,
    pub errors: [AtomicU64; ErrorKind::ALL.len()],
    pub status_classes: [AtomicU64; 5],
    pub open_connections: AtomicI64,
    pub connections_opened: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub events: AtomicU64,
    pub events_lost: AtomicU64,
    pub events_duplicated: AtomicU64,
    pub events_reordered: AtomicU64,
    pub longpoll_event_answers: AtomicU64,
    pub longpoll_timeout_answers: AtomicU64,
    pub comet_timeout_lines: AtomicU64,
    pub heartbeats: AtomicU64,
    pub reconnects: AtomicU64,
    pub replayed: AtomicU64,
    pub gaps: AtomicU64,
    pub sse_timeout_messages: AtomicU64,
    pub publishes: AtomicU64,
    pub published: AtomicU64,
}

impl Counters {
    pub fn error(&self, kind: ErrorKind) {
        self.errors[kind as usize].fetch_add(1, Relaxed);
    }

    pub fn status(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.status_classes[class].fetch_add(1, Relaxed);
        if status < 400 {
            self.ok.fetch_add(1, Relaxed);
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}

/// A point-in-time sum over workers, for interval lines and the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    pub requests: u64,
    pub answered: u64,
    pub started: u64,
    pub ok: u64,
    pub errors: [u64; ErrorKind::ALL.len()],
    pub status_classes: [u64; 5],
    pub open_connections: i64,
    pub connections_opened: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub events: u64,
    pub events_lost: u64,
    pub events_duplicated: u64,
    pub events_reordered: u64,
    pub longpoll_event_answers: u64,
    pub longpoll_timeout_answers: u64,
    pub comet_timeout_lines: u64,
    pub heartbeats: u64,
    pub reconnects: u64,
    pub replayed: u64,
    pub gaps: u64,
    pub sse_timeout_messages: u64,
    pub publishes: u64,
    pub published: u64,
}

impl Snapshot {
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Counters>) -> Snapshot {
        let mut s = Snapshot::default();
        for c in all {
            s.requests += c.requests.load(Relaxed);
            s.answered += c.answered.load(Relaxed);
            s.started += c.started.load(Relaxed);
            s.ok += c.ok.load(Relaxed);
            for (dst, src) in s.errors.iter_mut().zip(&c.errors) {
                *dst += src.load(Relaxed);
            }
            for (dst, src) in s.status_classes.iter_mut().zip(&c.status_classes) {
                *dst += src.load(Relaxed);
            }
            s.open_connections += c.open_connections.load(Relaxed);
            s.connections_opened += c.connections_opened.load(Relaxed);
            s.bytes_read += c.bytes_read.load(Relaxed);
            s.bytes_written += c.bytes_written.load(Relaxed);
            s.events += c.events.load(Relaxed);
            s.events_lost += c.events_lost.load(Relaxed);
            s.events_duplicated += c.events_duplicated.load(Relaxed);
            s.events_reordered += c.events_reordered.load(Relaxed);
            s.longpoll_event_answers += c.longpoll_event_answers.load(Relaxed);
            s.longpoll_timeout_answers += c.longpoll_timeout_answers.load(Relaxed);
            s.comet_timeout_lines += c.comet_timeout_lines.load(Relaxed);
            s.heartbeats += c.heartbeats.load(Relaxed);
            s.reconnects += c.reconnects.load(Relaxed);
            s.replayed += c.replayed.load(Relaxed);
            s.gaps += c.gaps.load(Relaxed);
            s.sse_timeout_messages += c.sse_timeout_messages.load(Relaxed);
            s.publishes += c.publishes.load(Relaxed);
            s.published += c.published.load(Relaxed);
        }
        s
    }

    pub fn error_count(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// The histograms of one worker, all in microseconds.
#[derive(Debug, Clone)]
pub struct Histograms {
    /// From the intended send time in open loop, else from the actual send.
    pub latency: Histogram<u64>,
    /// From the actual send to the end of the answer.
    pub service: Histogram<u64>,
    pub connect: Histogram<u64>,
    pub first_byte: Histogram<u64>,
    /// How late the generator sent compared with the schedule (open loop only).
    pub lag: Histogram<u64>,
    /// How long answers waited in the kernel before the loop read them (io_uring loop,
    /// sampled connections only).
    pub notice: Histogram<u64>,
    /// Server push: from the server's `created` timestamp to arrival (wall clocks, ms grain).
    pub event_delay: Histogram<u64>,
    /// Server push: from sending the subscription to the arrival of each event.
    pub event_since_subscribe: Histogram<u64>,
    /// SSE and WebSocket: from the start of the connect to the response head (the 101).
    pub handshake: Histogram<u64>,
    /// WebSocket: from sending a publish to its `published` acknowledgement.
    pub broadcast_rtt: Histogram<u64>,
    /// Long poll: from an answer's arrival to the next poll's request written (the time a
    /// client is not subscribed, in which an emit reaches nobody).
    pub resubscribe: Histogram<u64>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            latency: new_histogram(),
            service: new_histogram(),
            connect: new_histogram(),
            first_byte: new_histogram(),
            lag: new_histogram(),
            notice: new_histogram(),
            event_delay: new_histogram(),
            event_since_subscribe: new_histogram(),
            handshake: new_histogram(),
            broadcast_rtt: new_histogram(),
            resubscribe: new_histogram(),
        }
    }
}

/// A duration in whole microseconds, saturating.
pub fn micros(d: std::time::Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

impl Histograms {
    pub fn merge(&mut self, other: &Histograms) {
        let pairs = [
            (&mut self.latency, &other.latency),
            (&mut self.service, &other.service),
            (&mut self.connect, &other.connect),
            (&mut self.first_byte, &other.first_byte),
            (&mut self.lag, &other.lag),
            (&mut self.notice, &other.notice),
            (&mut self.event_delay, &other.event_delay),
            (
                &mut self.event_since_subscribe,
                &other.event_since_subscribe,
            ),
            (&mut self.handshake, &other.handshake),
            (&mut self.broadcast_rtt, &other.broadcast_rtt),
            (&mut self.resubscribe, &other.resubscribe),
        ];
        for (dst, src) in pairs {
            dst.add(src).expect("histograms share bounds");
        }
    }
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdr::{record_us, MAX_US};

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
        let s = Snapshot::sum([&a, &b]);
        assert_eq!(s.error_count(ErrorKind::Timeout), 2);
        assert_eq!((s.ok, s.status_classes[1], s.status_classes[4]), (1, 1, 1));
    }

    #[test]
    fn merged_histograms_keep_every_count() {
        let mut a = Histograms::default();
        let mut b = Histograms::default();
        record_us(&mut a.latency, 100);
        record_us(&mut b.latency, u64::MAX);
        a.merge(&b);
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.latency.max(), a.latency.highest_equivalent(MAX_US));
    }
}
