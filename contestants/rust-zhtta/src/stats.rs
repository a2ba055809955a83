//! Server-wide counters for `GET /stats`. Relaxed atomics: each counter is independent and
//! a reader only needs a recent value, so no ordering between them is paid for.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Default)]
pub struct Stats {
    pub connections_open: AtomicU64,
    pub connections_total: AtomicU64,
    pub requests_total: AtomicU64,
    pub open_push: AtomicU64,
    pub responses_total: AtomicU64,
    pub responses_push: AtomicU64,
    pub responses_timeouts: AtomicU64,
    pub syslog_received: AtomicU64,
    pub syslog_bytes: AtomicU64,
    pub syslog_tcp_connections: AtomicU64,
    /// Spec §7.1: parse each syslog message (`--syslog-mode parse`), set once at start.
    pub syslog_parse_mode: AtomicBool,
    pub syslog_parsed: AtomicU64,
    pub syslog_malformed: AtomicU64,
    pub syslog_rfc3164: AtomicU64,
    pub syslog_sd_elements: AtomicU64,
    pub syslog_msg_bytes: AtomicU64,
    /// Open subscribers of every transport: the `connections` of a delivery (spec §6).
    pub subscribers: AtomicU64,
    pub sse_open: AtomicU64,
    pub sse_total: AtomicU64,
    pub sse_deliveries: AtomicU64,
    pub sse_replayed: AtomicU64,
    pub sse_gaps: AtomicU64,
    pub sse_heartbeats: AtomicU64,
    pub sse_timeouts: AtomicU64,
    pub ws_open: AtomicU64,
    pub ws_total: AtomicU64,
    pub ws_subscribers: AtomicU64,
    pub ws_deliveries: AtomicU64,
    pub ws_echoes: AtomicU64,
    pub ws_publishes: AtomicU64,
    /// Spec §16: gRPC calls started (any method), `Subscribe` streams open, and their
    /// deliveries.
    pub grpc_calls: AtomicU64,
    pub grpc_open: AtomicU64,
    pub grpc_deliveries: AtomicU64,
}

pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub fn add(counter: &AtomicU64, amount: u64) {
    counter.fetch_add(amount, Ordering::Relaxed);
}

pub fn drop_one(counter: &AtomicU64) {
    counter.fetch_sub(1, Ordering::Relaxed);
}

pub fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Keeps a gauge raised while alive, so that every exit path (errors, panics) lowers it.
pub struct GaugeGuard<'a>(&'a AtomicU64);

impl<'a> GaugeGuard<'a> {
    pub fn raise(gauge: &'a AtomicU64) -> (GaugeGuard<'a>, u64) {
        let now = gauge.fetch_add(1, Ordering::Relaxed) + 1;
        (GaugeGuard(gauge), now)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        drop_one(self.0);
    }
}
