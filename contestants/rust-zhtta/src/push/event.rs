//! An event: its subscriber list in subscription order, its sequence numbers, the replay
//! buffer of its newest cycles, its emitter thread, and the counters `/stats` reports.

use super::subscriber::{Emit, Subscriber};
use crate::clock::{lock, now_ms};
use crate::stats::{Stats, add, bump, read};
use serde::Serialize;
use serde_json::value::RawValue;
use std::cell::OnceCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How many of an event's newest cycles an SSE reconnect can recover (spec §10).
const REPLAY_BUFFER: usize = 64;

/// One emit cycle, as the replay buffer keeps it.
#[derive(Clone)]
pub struct Cycle {
    pub seq: u64,
    pub created_ms: u64,
    /// A publish cycle's data (spec §11); `None` for a timed emit.
    pub data: Option<Arc<Box<RawValue>>>,
}

/// An event's newest seq and its buffered cycles (oldest first), at one instant.
pub struct History {
    pub last_seq: u64,
    pub cycles: Vec<Cycle>,
}

/// What an emit cycle takes at its start, under one lock, so that a subscriber that
/// registers is either in a cycle's snapshot or finds that cycle in the history.
#[derive(Default)]
struct Listing {
    subscribers: BTreeMap<u64, Arc<Subscriber>>,
    history: VecDeque<Cycle>,
}

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
    /// The newest seq handed out; never reset, so a seq is never reused. Changed only
    /// under `listing`'s lock.
    seq: AtomicU64,
    listing: Mutex<Listing>,
    /// The running emitter's stop signal; `Some` while the event is active.
    emitter: Mutex<Option<Arc<StopSignal>>>,
    /// Held for a whole emit cycle so that cycles never overlap, even across a replace,
    /// and a publish cycle waits for a timed one.
    cycle: Mutex<()>,
    /// 0 until the event is first set.
    interval_ms: AtomicU64,
    /// Set or published once: only those are listed in /stats (subscribing alone is not).
    listed: AtomicBool,
    counters: Counters,
}

impl Event {
    pub fn new(name: &str) -> Event {
        Event {
            name: name.to_owned(),
            seq: AtomicU64::new(0),
            listing: Mutex::new(Listing::default()),
            emitter: Mutex::new(None),
            cycle: Mutex::new(()),
            interval_ms: AtomicU64::new(0),
            listed: AtomicBool::new(false),
            counters: Counters::default(),
        }
    }

    pub fn subscribe(&self, subscriber: &Arc<Subscriber>) {
        lock(&self.listing)
            .subscribers
            .insert(subscriber.id, Arc::clone(subscriber));
    }

    /// Subscribes and returns the history at that instant: every later cycle has the
    /// subscriber in its snapshot.
    pub fn subscribe_with_history(&self, subscriber: &Arc<Subscriber>) -> History {
        let mut listing = lock(&self.listing);
        listing
            .subscribers
            .insert(subscriber.id, Arc::clone(subscriber));
        History {
            last_seq: self.seq.load(Ordering::Relaxed),
            cycles: listing.history.iter().cloned().collect(),
        }
    }

    pub fn unsubscribe(&self, id: u64) {
        lock(&self.listing).subscribers.remove(&id);
    }

    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }

    pub fn is_active(&self) -> bool {
        lock(&self.emitter).is_some()
    }

    /// Installs a new emitter's stop signal; true if it replaced a running one.
    pub fn replace_emitter(&self, interval_ms: u64, signal: Arc<StopSignal>) -> bool {
        self.interval_ms.store(interval_ms, Ordering::Relaxed);
        self.listed.store(true, Ordering::Relaxed);
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
            self.emit_cycle(None, stats);
            next = (next + interval).max(Instant::now());
        }
    }

    /// A publish cycle (spec §11): now, out of the emitter's schedule, after any cycle
    /// under way. Returns its seq and the size of its snapshot.
    pub fn publish(&self, data: Arc<Box<RawValue>>, stats: &Stats) -> (u64, u64) {
        self.listed.store(true, Ordering::Relaxed);
        let _cycle = lock(&self.cycle);
        self.emit_cycle(Some(data), stats)
    }

    fn emit_cycle(&self, data: Option<Arc<Box<RawValue>>>, stats: &Stats) -> (u64, u64) {
        let started = Instant::now();
        let created_ms = now_ms();
        let (seq, snapshot) = {
            let mut listing = lock(&self.listing);
            let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
            if listing.history.len() == REPLAY_BUFFER {
                listing.history.pop_front();
            }
            let data = data.clone();
            listing.history.push_back(Cycle {
                seq,
                created_ms,
                data,
            });
            let snapshot: Vec<Arc<Subscriber>> = listing
                .subscribers
                .values()
                .filter(|subscriber| !subscriber.is_done())
                .cloned()
                .collect();
            (seq, snapshot)
        };
        bump(&self.counters.emits);
        let emit = Emit {
            grpc: OnceCell::new(),
            name: &self.name,
            seq,
            created_ms,
            total: snapshot.len() as u64,
            data: data.as_deref().map(|raw| &**raw),
            replayed: false,
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
        (seq, emit.total)
    }
}
