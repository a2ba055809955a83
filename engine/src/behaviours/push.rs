//! Behaviours stage: what the push behaviours (long poll, comet, SSE, WebSocket) share: the
//! subscription request, the wire types of a delivery, and the per-event sequence check.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;

use crate::emits::Delivery;
use crate::http::build_request;
use crate::ledger::Arrival;
use crate::plan::ValidPlan;
use crate::shared::WorkerCtx;
use crate::stats::Event;

/// The body the spec's `POST /push` takes.
pub(crate) fn push_request(
    plan: &ValidPlan,
    kind: &str,
    events: &[String],
    duration_ms: Option<u64>,
) -> Vec<u8> {
    let mut body = serde_json::json!({ "type": kind, "events": events });
    if let Some(d) = duration_ms {
        body["duration_ms"] = d.into();
    }
    let body = body.to_string().into_bytes();
    build_request(plan, "POST", Some("application/json"), &body, false)
}

#[derive(Deserialize)]
pub(crate) struct PushLine<'a> {
    #[serde(borrow)]
    pub response: PushResponse<'a>,
}

#[derive(Deserialize)]
pub(crate) struct PushResponse<'a> {
    #[serde(default)]
    pub timeout: bool,
    #[serde(borrow, default)]
    pub event: Option<PushEvent<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct PushEvent<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    seq: u64,
    timings: EventTimings,
    #[serde(default)]
    connections: Option<EventPlace>,
    /// An SSE delivery replayed after a reconnect (a cycle of one, so not an emit record).
    #[serde(default)]
    pub replayed: bool,
}

#[derive(Deserialize)]
struct EventTimings {
    created: u64,
    #[serde(default)]
    duration: u64,
}

#[derive(Deserialize)]
struct EventPlace {
    total: u64,
    place: u64,
}

impl<'a> PushEvent<'a> {
    /// A delivery that came as a message of its own (a gRPC `Delivery`) rather than as
    /// JSON; `place` is `(place, total)` when the server said.
    pub fn new(name: &'a str, seq: u64, created: u64, place: Option<(u64, u64)>) -> Self {
        PushEvent {
            name: Cow::Borrowed(name),
            seq,
            timings: EventTimings {
                created,
                duration: 0,
            },
            connections: place.map(|(place, total)| EventPlace { total, place }),
            replayed: false,
        }
    }
}

impl PushEvent<'_> {
    /// The delivery as the emit log keeps it; `arrival` as `Ledger::event` measured it.
    fn delivery(&self, arrival: Arrival) -> Delivery<'_> {
        Delivery {
            event: &self.name,
            seq: self.seq,
            created_ms: self.timings.created,
            duration_ms: self.timings.duration,
            place: self.connections.as_ref().map(|c| (c.place, c.total)),
            arrival_ms: arrival.at_ms,
            delay_us: arrival.delay_us,
            read_delay_us: arrival.read_delay_us,
        }
    }
}

/// What one push answer or comet line was.
#[derive(Debug, PartialEq)]
pub(crate) enum PushKind {
    Timeout,
    Event,
    Unreadable,
}

/// Checks `seq` per event name within one subscription: +1 is in order, a jump is lost
/// events, a repeat is a duplicate, a step back is reordering.
#[derive(Debug, Default)]
pub(crate) struct SeqTracker {
    /// Each name's last seq, allocated to fit: a held subscription tracks one or two names,
    /// and room for four `(String, u64)` entries would cost every held connection ~100 bytes.
    last: Vec<(Box<str>, u64)>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum SeqVerdict {
    First,
    InOrder,
    Lost(u64),
    Duplicate,
    Reordered,
}

impl SeqTracker {
    pub fn observe(&mut self, name: &str, seq: u64) -> SeqVerdict {
        let Some(entry) = self.last.iter_mut().find(|(n, _)| **n == *name) else {
            self.add(name, seq);
            return SeqVerdict::First;
        };
        let last = entry.1;
        entry.1 = entry.1.max(seq);
        match seq {
            s if s == last + 1 => SeqVerdict::InOrder,
            s if s > last => SeqVerdict::Lost(s - last - 1),
            s if s == last => SeqVerdict::Duplicate,
            _ => SeqVerdict::Reordered,
        }
    }

    /// Takes `seq` as the last one seen of `name` unless one was seen already (where a
    /// stream says it stands before its first delivery).
    pub fn seed(&mut self, name: &str, seq: u64) {
        if !self.last.iter().any(|(n, _)| **n == *name) {
            self.add(name, seq);
        }
    }

    fn add(&mut self, name: &str, seq: u64) {
        self.last.reserve_exact(1);
        self.last.push((name.into(), seq));
    }

    /// The stream says `name`'s next seq is `next` (an SSE gap): returns the seqs skipped
    /// since the last one seen. A `next` at or below it (an id from an earlier run of the
    /// server) skips none and starts the count again there.
    pub fn skip_to(&mut self, name: &str, next: u64) -> u64 {
        let last_wanted = next.saturating_sub(1);
        match self.last.iter_mut().find(|(n, _)| **n == *name) {
            Some(entry) => {
                let skipped = last_wanted.saturating_sub(entry.1);
                entry.1 = last_wanted;
                skipped
            }
            None => {
                self.add(name, last_wanted);
                0
            }
        }
    }
}

/// Reads one delivery or timeout answer and updates the counters.
pub(crate) fn observe_push(
    ctx: &WorkerCtx,
    text: &[u8],
    tracker: &mut SeqTracker,
    subscribed: Instant,
    count_losses: bool,
) -> PushKind {
    match serde_json::from_slice::<PushLine>(text) {
        Ok(line) => observe_response(ctx, line.response, tracker, subscribed, count_losses),
        Err(_) => PushKind::Unreadable,
    }
}

/// Judges one parsed delivery or timeout answer and updates the counters.
pub(crate) fn observe_response(
    ctx: &WorkerCtx,
    response: PushResponse,
    tracker: &mut SeqTracker,
    subscribed: Instant,
    count_losses: bool,
) -> PushKind {
    let event = match (response.timeout, response.event) {
        (true, _) => return PushKind::Timeout,
        (false, Some(event)) => event,
        (false, None) => return PushKind::Unreadable,
    };
    let c = ctx.ledger.counters();
    c.add(Event::Received, 1);
    let arrival = ctx.ledger.event(event.timings.created, subscribed);
    // A replayed event is no emit cycle's delivery.
    let delivery = (!event.replayed).then(|| event.delivery(arrival));
    c.window_event(arrival.delay_us, delivery.as_ref());
    match &delivery {
        Some(d) => ctx.observe_emit(d),
        None => c.add(Event::Replayed, 1),
    }
    match tracker.observe(&event.name, event.seq) {
        SeqVerdict::Lost(n) if count_losses => c.add(Event::Lost, n),
        SeqVerdict::Duplicate => c.add(Event::Duplicated, 1),
        SeqVerdict::Reordered => c.add(Event::Reordered, 1),
        _ => {}
    }
    PushKind::Event
}

pub(crate) const MAX_PUSH_BODY: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_tracker_names_every_anomaly() {
        let mut t = SeqTracker::default();
        assert_eq!(t.observe("e1", 5), SeqVerdict::First);
        assert_eq!(t.observe("e1", 6), SeqVerdict::InOrder);
        assert_eq!(t.observe("e1", 9), SeqVerdict::Lost(2));
        assert_eq!(t.observe("e1", 9), SeqVerdict::Duplicate);
        assert_eq!(t.observe("e1", 7), SeqVerdict::Reordered);
        assert_eq!(t.observe("e1", 10), SeqVerdict::InOrder);
        assert_eq!(t.observe("e2", 1), SeqVerdict::First);
        assert_eq!(t.skip_to("e2", 5), 3, "2, 3 and 4 are lost");
        assert_eq!(t.observe("e2", 5), SeqVerdict::InOrder);
        assert_eq!(t.skip_to("e2", 2), 0, "an earlier run's id");
        assert_eq!(t.observe("e2", 2), SeqVerdict::InOrder);
    }

    #[test]
    fn push_lines_parse_without_the_rest_of_the_shape() {
        let line = br#"{"response":{"event":{"name":"e1","seq":3,"timings":{"created":1,"sent":2,"duration":1},"connections":{"total":1,"place":1}}},"request":{},"timings":{},"connections":{}}"#;
        let parsed: PushLine = serde_json::from_slice(line).unwrap();
        let event = parsed.response.event.unwrap();
        assert_eq!((event.name.as_ref(), event.seq), ("e1", 3));
        let timeout: PushLine =
            serde_json::from_slice(br#"{"response":{"timeout":true},"request":{}}"#).unwrap();
        assert!(timeout.response.timeout);
    }
}
