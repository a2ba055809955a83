//! What one request is. Every behaviour is one `exchange` by a client; pacing, budgets,
//! timeouts and the counting of attempts live in the worker loop, once.

use std::borrow::Cow;
use std::io::Write;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::client::Client;
use crate::emits::Delivery;
use crate::http::{build_request, request_head, ParseError};
use crate::inbox::{discard, Answer};
use crate::ledger::Arrival;
pub(crate) use crate::plain::Plain;
use crate::plan::{SyslogFraming, ValidPlan};
use crate::shared::WorkerCtx;
use crate::stats::{ErrorKind, Event};
use crate::syslogmsg::Composer;

pub(crate) trait Behaviour {
    /// What one client keeps from one exchange to the next (buffers, a long poll's sequence
    /// tracker, a UDP socket).
    type State: Default;
    /// Budget units (requests, messages) one exchange uses at most.
    fn units(&self) -> u64 {
        1
    }
    /// Limit on one exchange; `None` for streams that end with the run.
    fn timeout(&self) -> Option<Duration>;
    /// Whether an exchange in flight at the run's end is let finish (within `timeout`)
    /// rather than dropped: a syslog batch cut mid-write would leave messages at the
    /// receiver that the sender never counted, and loss (`sent − received`) below zero.
    fn finishes_at_end(&self) -> bool {
        false
    }
    /// Performs one exchange. Success statistics are recorded here; the caller counts the
    /// attempt and any error.
    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut Self::State,
        attempt: Attempt,
    ) -> Result<(), ErrorKind>;
}

/// One exchange as the pacer granted it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    /// The scheduled send time in open loop (latency is timed from it).
    pub intended: Option<Instant>,
    /// Budget units granted (messages for syslog, else 1).
    pub units: u64,
}

impl Behaviour for Plain {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(Plain::timeout(self))
    }

    async fn exchange(
        &self,
        c: &mut Client,
        _: &mut (),
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = c.open_and_send(self.request(self.pick())).await?;
        let answer = c.read_answer(self.head_request(), &mut discard).await?;
        c.record_answer(attempt.intended, sent, &answer);
        if self.await_close() && answer.close {
            c.await_peer_close().await?;
        }
        c.finish(&answer, self.keep_alive());
        Ok(())
    }
}

/// The body the spec's `POST /push` takes.
fn push_request(
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
    last: Vec<(String, u64)>,
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
        let Some(entry) = self.last.iter_mut().find(|(n, _)| n == name) else {
            self.last.push((name.to_string(), seq));
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
        if !self.last.iter().any(|(n, _)| n == name) {
            self.last.push((name.to_string(), seq));
        }
    }

    /// The stream says `name`'s next seq is `next` (an SSE gap): returns the seqs skipped
    /// since the last one seen. A `next` at or below it (an id from an earlier run of the
    /// server) skips none and starts the count again there.
    pub fn skip_to(&mut self, name: &str, next: u64) -> u64 {
        let last_wanted = next.saturating_sub(1);
        match self.last.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => {
                let skipped = last_wanted.saturating_sub(entry.1);
                entry.1 = last_wanted;
                skipped
            }
            None => {
                self.last.push((name.to_string(), last_wanted));
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
    if event.replayed {
        c.add(Event::Replayed, 1);
    } else {
        ctx.emits.borrow_mut().observe(&event.delivery(arrival));
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

/// Long poll: one answer per exchange, then the slot re-subscribes at once.
pub(crate) struct LongPoll {
    request: Vec<u8>,
    timeout: Duration,
}

impl LongPoll {
    pub fn new(plan: &ValidPlan, events: &[String], duration_ms: u64) -> LongPoll {
        LongPoll {
            request: push_request(plan, "longpoll", events, Some(duration_ms)),
            timeout: Duration::from_millis(duration_ms + plan.plan.timeout_ms),
        }
    }
}

/// A long-polling client's answer body, the event sequence numbers of all its polls, and
/// when its last answer arrived (the re-subscribe gap runs from there to the next poll).
#[derive(Default)]
pub(crate) struct PollState {
    body: Vec<u8>,
    seq: SeqTracker,
    answered: Option<Instant>,
}

impl Behaviour for LongPoll {
    type State = PollState;

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut PollState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = c.open_and_send(&self.request).await?;
        if let Some(answered) = state.answered.take() {
            c.ledger().resubscribed(answered.elapsed());
        }
        let body = &mut state.body;
        body.clear();
        let answer = c
            .read_answer(false, &mut |d: &[u8]| {
                if body.len() + d.len() > MAX_PUSH_BODY {
                    return Err(ParseError::BodyTooLarge);
                }
                body.extend_from_slice(d);
                Ok(())
            })
            .await?;
        self.judge(c, state, sent, attempt.intended, answer)
    }
}

impl LongPoll {
    fn judge(
        &self,
        c: &mut Client,
        state: &mut PollState,
        sent: Instant,
        intended: Option<Instant>,
        answer: Answer,
    ) -> Result<(), ErrorKind> {
        c.record_answer(intended, sent, &answer);
        c.finish(&answer, true);
        state.answered = Some(Instant::now());
        if answer.status >= 400 {
            return Ok(());
        }
        // A long poll legitimately misses the events emitted while it re-subscribes, so
        // only repeats and steps back are judged, over the whole life of the client.
        let kind = observe_push(&c.ctx, &state.body, &mut state.seq, sent, false);
        let c = c.ledger().counters();
        match kind {
            PushKind::Event => c.add(Event::LongpollEventAnswers, 1),
            PushKind::Timeout => c.add(Event::LongpollTimeoutAnswers, 1),
            PushKind::Unreadable => return Err(ErrorKind::Parse),
        }
        Ok(())
    }
}

/// Comet: one subscription per exchange, its stream read to the end (or to the run's end).
pub(crate) struct Comet {
    request: Vec<u8>,
    timeout: Option<Duration>,
}

impl Comet {
    pub fn new(plan: &ValidPlan, events: &[String], duration_ms: Option<u64>) -> Comet {
        Comet {
            request: push_request(plan, "comet", events, duration_ms),
            timeout: duration_ms.map(|d| Duration::from_millis(d + plan.plan.timeout_ms)),
        }
    }
}

impl Behaviour for Comet {
    /// The line being read (a line may span reads).
    type State = Vec<u8>;

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn exchange(
        &self,
        c: &mut Client,
        line: &mut Vec<u8>,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = c.open_and_send(&self.request).await?;
        let ctx = c.ctx.clone();
        line.clear();
        let mut tracker = SeqTracker::default();
        let answer = c
            .read_answer(false, &mut |data: &[u8]| {
                comet_bytes(&ctx, data, line, &mut tracker, sent)
            })
            .await?;
        c.record_answer(attempt.intended, sent, &answer);
        c.finish(&answer, true);
        Ok(())
    }
}

/// Splits stream bytes into lines (a line may span reads) and judges each complete one.
fn comet_bytes(
    ctx: &WorkerCtx,
    mut data: &[u8],
    line: &mut Vec<u8>,
    tracker: &mut SeqTracker,
    subscribed: Instant,
) -> Result<(), ParseError> {
    while let Some(pos) = data.iter().position(|&b| b == b'\n') {
        // A line whole in this piece is judged where it lies; only a line cut across pieces
        // is gathered, and its buffer freed after (a held stream keeps none).
        let whole = if line.is_empty() {
            &data[..pos]
        } else {
            line.extend_from_slice(&data[..pos]);
            &line[..]
        };
        if !whole.trim_ascii().is_empty() {
            match observe_push(ctx, whole, tracker, subscribed, true) {
                PushKind::Timeout => ctx.ledger.counters().add(Event::CometTimeoutLines, 1),
                PushKind::Unreadable => ctx.ledger.counters().error(ErrorKind::Parse),
                PushKind::Event => {}
            }
        }
        data = &data[pos + 1..];
        *line = Vec::new();
    }
    if line.len() + data.len() > MAX_PUSH_BODY {
        return Err(ParseError::BodyTooLarge);
    }
    line.extend_from_slice(data);
    Ok(())
}

static FILLER: [u8; 16 * 1024] = [b'x'; 16 * 1024];

/// A body of `bytes` bytes written at `bytes_per_s`, then the answer read.
pub(crate) struct SlowUpload {
    head: Vec<u8>,
    bytes: u64,
    bytes_per_s: u64,
    timeout: Duration,
}

/// Pieces are sized so a trickle is written about 50 times a second.
const UPLOAD_TICKS_PER_S: u64 = 50;

impl SlowUpload {
    pub fn new(plan: &ValidPlan, bytes: u64, bytes_per_s: u64) -> SlowUpload {
        let head = request_head(plan, "POST", Some("application/octet-stream"), bytes, false);
        let trickle = Duration::from_secs_f64(bytes as f64 / bytes_per_s as f64);
        SlowUpload {
            head,
            bytes,
            bytes_per_s,
            timeout: trickle + Duration::from_millis(plan.plan.timeout_ms),
        }
    }

    async fn trickle(&self, c: &mut Client) -> Result<(), ErrorKind> {
        let piece = (self.bytes_per_s / UPLOAD_TICKS_PER_S).clamp(1, FILLER.len() as u64);
        let began = Instant::now();
        let mut sent = 0u64;
        while sent < self.bytes {
            let n = piece.min(self.bytes - sent);
            c.send(&FILLER[..n as usize]).await?;
            sent += n;
            let due = Duration::from_secs_f64(sent as f64 / self.bytes_per_s as f64);
            tokio::time::sleep_until((began + due).into()).await;
        }
        Ok(())
    }
}

impl Behaviour for SlowUpload {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        _: &mut (),
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = c.open_and_send(&self.head).await?;
        self.trickle(c).await?;
        let answer = c.read_answer(false, &mut discard).await?;
        c.record_answer(attempt.intended, sent, &answer);
        c.finish(&answer, true);
        Ok(())
    }
}

/// Numbered syslog messages over TCP (a batch per exchange) or UDP (a datagram each),
/// composed as realistic RFC 5424 messages (`crate::syslogmsg`).
pub(crate) struct Syslog {
    framing: SyslogFraming,
    composer: Composer,
    batch: u64,
    udp: bool,
    timeout: Duration,
}

impl Syslog {
    pub fn new(
        plan: &ValidPlan,
        framing: SyslogFraming,
        message_bytes: usize,
        udp: bool,
        batch: u64,
    ) -> Syslog {
        Syslog {
            framing,
            composer: Composer::new(message_bytes),
            batch,
            udp,
            timeout: Duration::from_millis(plan.plan.timeout_ms),
        }
    }

    /// Appends message `seq`, framed: octet counting needs its length first, so it is
    /// composed in `scratch` and copied.
    pub fn frame(&self, out: &mut Vec<u8>, scratch: &mut Vec<u8>, seq: u64, timestamp: &str) {
        if self.framing == SyslogFraming::Octet {
            scratch.clear();
            self.composer.compose(scratch, seq, timestamp);
            let _ = write!(out, "{} ", scratch.len());
            out.extend_from_slice(scratch);
            return;
        }
        self.composer.compose(out, seq, timestamp);
        out.push(b'\n');
    }

    async fn send_udp(
        &self,
        c: &mut Client,
        state: &mut SyslogState,
        first: u64,
        units: u64,
    ) -> Result<(), ErrorKind> {
        if state.udp.is_none() {
            let source = c
                .ctx
                .shared
                .next_source()
                .unwrap_or(std::net::Ipv4Addr::LOCALHOST);
            let socket = tokio::net::UdpSocket::bind((source, 0)).await?;
            socket.connect(c.ctx.shared.addr).await?;
            state.udp = Some(socket);
        }
        let socket = state.udp.as_ref().ok_or(ErrorKind::Other)?;
        let timestamp = Composer::timestamp();
        for seq in first..first + units {
            state.bytes.clear();
            self.composer.compose(&mut state.bytes, seq, &timestamp);
            if let Err(e) = socket.send(&state.bytes).await {
                return Err(ErrorKind::from_connect(&e));
            }
            c.ledger().wrote(state.bytes.len());
        }
        Ok(())
    }
}

/// A syslog client's UDP socket (TCP goes through the client's connection), and the bytes
/// of its next batch or datagram.
#[derive(Default)]
pub(crate) struct SyslogState {
    udp: Option<tokio::net::UdpSocket>,
    bytes: Vec<u8>,
    scratch: Vec<u8>,
}

impl Behaviour for Syslog {
    type State = SyslogState;

    fn units(&self) -> u64 {
        self.batch
    }

    fn finishes_at_end(&self) -> bool {
        true
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut SyslogState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let units = attempt.units;
        let first = c
            .ctx
            .shared
            .syslog_seq
            .fetch_add(units, std::sync::atomic::Ordering::Relaxed);
        if self.udp {
            return self.send_udp(c, state, first, units).await;
        }
        c.ensure_conn().await?;
        let timestamp = Composer::timestamp();
        state.bytes.clear();
        for seq in first..first + units {
            self.frame(&mut state.bytes, &mut state.scratch, seq, &timestamp);
        }
        c.send(&state.bytes).await
    }
}

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
