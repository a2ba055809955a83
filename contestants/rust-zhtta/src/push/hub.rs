//! The push hub: every event by name, its emitter threads, and the registration of
//! subscribers of any transport with their events.

use super::event::{Event, EventStats, History, StopSignal};
use super::subscriber::{Outlet, Sink, Subscriber, Transport};
use crate::clock::lock;
use crate::stats::{GaugeGuard, Stats};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const EMITTER_STACK: usize = 256 * 1024;

pub struct PushHub {
    events: Mutex<HashMap<String, Arc<Event>>>,
    next_subscriber: AtomicU64,
    stats: &'static Stats,
}

/// A subscriber's place in its events' lists; dropping it takes the subscriber out of
/// every list and out of the open counts, whichever way it ends.
pub struct Registration {
    pub subscriber: Arc<Subscriber>,
    events: Vec<Arc<Event>>,
    _open: [GaugeGuard<'static>; 2],
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.subscriber.abandon();
        for event in &self.events {
            event.unsubscribe(self.subscriber.id);
        }
    }
}

/// What a new subscriber asks for.
pub struct Subscription {
    pub transport: Transport,
    /// Its events, each named once.
    pub names: Vec<String>,
    /// The request as received, re-serialized: the `request` of its deliveries.
    pub request: Box<RawValue>,
    pub keep_alive: bool,
}

impl PushHub {
    pub fn new(stats: &'static Stats) -> PushHub {
        PushHub {
            events: Mutex::new(HashMap::new()),
            next_subscriber: AtomicU64::new(1),
            stats,
        }
    }

    fn event(&self, name: &str) -> Arc<Event> {
        let mut events = lock(&self.events);
        if let Some(event) = events.get(name) {
            return Arc::clone(event);
        }
        let event = Arc::new(Event::new(name));
        events.insert(name.to_owned(), Arc::clone(&event));
        event
    }

    /// Starts (or replaces) the emitter of `name`; returns whether one was replaced.
    pub fn set(&self, name: &str, interval_ms: u64) -> io::Result<bool> {
        let event = self.event(name);
        let signal = Arc::new(StopSignal::default());
        let stats = self.stats;
        let emitter_event = Arc::clone(&event);
        let emitter_signal = Arc::clone(&signal);
        let interval = Duration::from_millis(interval_ms);
        thread::Builder::new()
            .name(format!("emit-{name}"))
            .stack_size(EMITTER_STACK)
            .spawn(move || emitter_event.run_emitter(interval, &emitter_signal, stats))?;
        Ok(event.replace_emitter(interval_ms, signal))
    }

    /// Stops one emitter (`None` if it has none) or, with no name, every running one.
    /// Returns the names stopped, sorted.
    pub fn clear(&self, name: Option<&str>) -> Option<Vec<String>> {
        let events: Vec<Arc<Event>> = {
            let events = lock(&self.events);
            match name {
                Some(name) => vec![Arc::clone(events.get(name)?)],
                None => events.values().cloned().collect(),
            }
        };
        let mut cleared: Vec<String> = events
            .iter()
            .filter(|event| event.stop_emitter())
            .map(|event| event.name.clone())
            .collect();
        if name.is_some() && cleared.is_empty() {
            return None;
        }
        cleared.sort();
        Some(cleared)
    }

    /// Registers a subscriber with each of its events.
    pub fn subscribe(&self, subscription: Subscription, outlet: Outlet) -> Registration {
        let registration = self.register(subscription, outlet);
        for event in &registration.events {
            event.subscribe(&registration.subscriber);
        }
        registration
    }

    /// Registers a subscriber and runs `first` under its sink's lock, with each event's
    /// history as of its registration: what `first` writes precedes every delivery (an SSE
    /// stream's replay, a WebSocket's subscribed reply), and each cycle is either in that
    /// history or delivered live.
    pub fn subscribe_then(
        &self,
        subscription: Subscription,
        sink: Arc<Mutex<Sink>>,
        first: impl FnOnce(&Subscriber, &mut Sink, &[History]),
    ) -> Registration {
        let registration = self.register(subscription, Outlet::Socket(sink));
        let subscriber = &registration.subscriber;
        let mut sink = subscriber.sink();
        let histories: Vec<History> = registration
            .events
            .iter()
            .map(|event| event.subscribe_with_history(subscriber))
            .collect();
        first(subscriber, &mut sink, &histories);
        drop(sink);
        registration
    }

    fn register(&self, subscription: Subscription, outlet: Outlet) -> Registration {
        let gauge = match subscription.transport {
            Transport::LongPoll | Transport::Comet => &self.stats.open_push,
            Transport::Sse => &self.stats.sse_open,
            Transport::WebSocket => &self.stats.ws_subscribers,
            Transport::Grpc => &self.stats.grpc_open,
        };
        let (open, start_connections) = GaugeGuard::raise(&self.stats.subscribers);
        let (transport_open, _) = GaugeGuard::raise(gauge);
        let id = self.next_subscriber.fetch_add(1, Ordering::Relaxed);
        let events = subscription.names.iter().map(|n| self.event(n)).collect();
        let subscriber = Arc::new(Subscriber::new(
            id,
            subscription.transport,
            subscription.request,
            outlet,
            subscription.keep_alive,
            start_connections,
        ));
        Registration {
            subscriber,
            events,
            _open: [open, transport_open],
        }
    }

    /// A publish cycle of `name` (spec §11); its seq and the size of its snapshot.
    pub fn publish(&self, name: &str, data: Box<RawValue>) -> (u64, u64) {
        self.event(name).publish(Arc::new(data), self.stats)
    }

    /// Every event ever set or published, for `/stats`.
    pub fn event_stats(&self) -> BTreeMap<String, EventStats> {
        let events: Vec<Arc<Event>> = lock(&self.events).values().cloned().collect();
        events
            .iter()
            .filter(|event| event.is_listed())
            .map(|event| (event.name.clone(), event.stats()))
            .collect()
    }

    pub fn stats(&self) -> &'static Stats {
        self.stats
    }
}
