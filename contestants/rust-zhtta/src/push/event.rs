//! An event: its subscriber list in subscription order, its sequence numbers, its emitter
//! thread, and the counters `/stats` reports for it.

use super::subscriber::{Emit, Subscriber};
use crate::clock::{lock, now_ms};
use crate::stats::{Stats, add, bump, read};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Tells an emitter thread to stop, and wakes it if it is sleeping until its next cycle.
#[derive(Default)]
pub struct StopSignal {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl StopSignal {
    pub fn stop(&self) {
        *lock(&self.stopped) = true;
        self.wake.notify_all();
    }

    fn is_stopped(&self) -> bool {
        *lock(&self.stopped)
    }

    /// Sleeps until `deadline`; true if stopped meanwhile.
    fn sleep_until(&self, deadline: Instant) -> bool {
        let mut stopped = lock(&self.stopped);
        while !*stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            stopped = self
                .wake
                .wait_timeout(stopped, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        true
    }
}

#[derive(Serialize)]
pub struct EventStats {
    interval_ms: u64,
    active: bool,
    emits: u64,
    last_seq: u64,
    deliveries: u64,
    last_emit_duration_ms: u64,
    max_emit_duration_ms: u64,
    total_emit_duration_ms: u64,
}

#[derive(Default)]
struct Counters {
    emits: AtomicU64,
    deliveries: AtomicU64,
    last_duration_ms: AtomicU64,
    max_duration_ms: AtomicU64,
    total_duration_ms: AtomicU64,
}

pub struct Event {
    pub name: String,
    /// The newest seq handed out; never reset, so a seq is never reused.
    seq: AtomicU64,
    subscribers: Mutex<BTreeMap<u64, Arc<Subscriber>>>,
    /// The running emitter's stop signal; `Some` while the event is active.
    emitter: Mutex<Option<Arc<StopSignal>>>,
    /// Held for a whole emit cycle so that cycles never overlap, even across a replace.
    cycle: Mutex<()>,
    /// 0 until the event is first set (subscribing alone does not list it in /stats).
    interval_ms: AtomicU64,
    counters: Counters,
}

impl Event {
    pub fn new(name: &str) -> Event {
        Event {
            name: name.to_owned(),
            seq: AtomicU64::new(0),
            subscribers: Mutex::new(BTreeMap::new()),
            emitter: Mutex::new(None),
            cycle: Mutex::new(()),
            interval_ms: AtomicU64::new(0),
            counters: Counters::default(),
        }
    }

    pub fn subscribe(&self, subscriber: &Arc<Subscriber>) {
        lock(&self.subscribers).insert(subscriber.id, Arc::clone(subscriber));
    }

    pub fn unsubscribe(&self, id: u64) {
        lock(&self.subscribers).remove(&id);
    }

    pub fn was_ever_set(&self) -> bool {
        self.interval_ms.load(Ordering::Relaxed) > 0
    }

    pub fn is_active(&self) -> bool {
        lock(&self.emitter).is_some()
    }

    /// Installs a new emitter's stop signal; true if it replaced a running one.
    pub fn replace_emitter(&self, interval_ms: u64, signal: Arc<StopSignal>) -> bool {
        self.interval_ms.store(interval_ms, Ordering::Relaxed);
        let old = lock(&self.emitter).replace(signal);
        old.map(|old| old.stop()).is_some()
    }

    /// Stops the emitter; false if there was none.
    pub fn stop_emitter(&self) -> bool {
        let old = lock(&self.emitter).take();
        old.map(|old| old.stop()).is_some()
    }

    pub fn stats(&self) -> EventStats {
        let counters = &self.counters;
        EventStats {
            interval_ms: self.interval_ms.load(Ordering::Relaxed),
            active: self.is_active(),
            emits: read(&counters.emits),
            last_seq: self.seq.load(Ordering::Relaxed),
            deliveries: read(&counters.deliveries),
            last_emit_duration_ms: read(&counters.last_duration_ms),
            max_emit_duration_ms: read(&counters.max_duration_ms),
            total_emit_duration_ms: read(&counters.total_duration_ms),
        }
    }

    /// The emitter thread: a cycle every interval, the next one at its scheduled time or
    /// when this one ends, whichever is later.
    pub fn run_emitter(&self, interval: Duration, stop: &StopSignal, stats: &Stats) {
        let mut next = Instant::now() + interval;
        loop {
            if stop.sleep_until(next) {
                return;
            }
            let _cycle = lock(&self.cycle);
            if stop.is_stopped() {
                return;
            }
            self.emit_cycle(stats);
            next = (next + interval).max(Instant::now());
        }
    }

    fn emit_cycle(&self, stats: &Stats) {
        let started = Instant::now();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        bump(&self.counters.emits);
        let snapshot: Vec<Arc<Subscriber>> = lock(&self.subscribers)
            .values()
            .filter(|subscriber| !subscriber.is_done())
            .cloned()
            .collect();
        let emit = Emit {
            name: &self.name,
            seq,
            created_ms: now_ms(),
            total: snapshot.len() as u64,
        };
        let mut delivered = 0;
        for (index, subscriber) in snapshot.iter().enumerate() {
            if subscriber.deliver(&emit, index as u64 + 1, stats) {
                delivered += 1;
            }
        }
        add(&self.counters.deliveries, delivered);
        let duration_ms = started.elapsed().as_millis() as u64;
        let counters = &self.counters;
        counters
            .last_duration_ms
            .store(duration_ms, Ordering::Relaxed);
        counters
            .max_duration_ms
            .fetch_max(duration_ms, Ordering::Relaxed);
        add(&counters.total_duration_ms, duration_ms);
    }
}
