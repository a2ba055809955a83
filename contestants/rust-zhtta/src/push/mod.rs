//! Server push (spec §6), the seed 004 Event Manager and Request Manager. Each held push
//! request keeps its connection thread (blocking IO, as the seed's tasks did); each active
//! event has one emitter thread that writes deliveries straight to the subscribers' sockets.

mod event;
pub mod request;
mod session;
mod subscriber;

pub use session::serve;

use crate::clock::lock;
use crate::stats::{GaugeGuard, Stats};
use event::{Event, EventStats, StopSignal};
use request::PushRequest;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;
use subscriber::Subscriber;

const EMITTER_STACK: usize = 256 * 1024;

pub struct PushHub {
    events: Mutex<HashMap<String, Arc<Event>>>,
    next_subscriber: AtomicU64,
    stats: &'static Stats,
}

/// A subscriber's place in its events' lists; dropping it takes the request out of every
/// list and out of `open_push`, whichever way the request ends.
pub struct Registration {
    pub subscriber: Arc<Subscriber>,
    events: Vec<Arc<Event>>,
    _open: GaugeGuard<'static>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        for event in &self.events {
            event.unsubscribe(self.subscriber.id);
        }
    }
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

    pub fn subscribe(
        &self,
        request: PushRequest,
        stream: Arc<TcpStream>,
        keep_alive: bool,
    ) -> Registration {
        let (open, start_connections) = GaugeGuard::raise(&self.stats.open_push);
        let id = self.next_subscriber.fetch_add(1, Ordering::Relaxed);
        let mut names = request.events.clone();
        names.sort();
        names.dedup();
        let subscriber = Arc::new(Subscriber::new(
            id,
            request,
            stream,
            keep_alive,
            start_connections,
        ));
        let events: Vec<Arc<Event>> = names.iter().map(|name| self.event(name)).collect();
        for event in &events {
            event.subscribe(&subscriber);
        }
        Registration {
            subscriber,
            events,
            _open: open,
        }
    }

    /// Every event ever set, for `/stats`.
    pub fn event_stats(&self) -> BTreeMap<String, EventStats> {
        let events: Vec<Arc<Event>> = lock(&self.events).values().cloned().collect();
        events
            .iter()
            .filter(|event| event.was_ever_set())
            .map(|event| (event.name.clone(), event.stats()))
            .collect()
    }

    pub fn stats(&self) -> &'static Stats {
        self.stats
    }
}
