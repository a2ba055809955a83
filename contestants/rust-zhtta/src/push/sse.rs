//! `GET /sse` (spec §10): a Server-Sent Events stream is one subscriber of its events, held
//! by its connection thread like a comet stream, with heartbeats between the emitters'
//! writes. Its id is the stream's position, `name:seq` per event; a reconnect with
//! `Last-Event-ID` gets what it missed from each event's replay buffer, or a gap message
//! for what the buffer no longer holds.

use super::event::History;
use super::hub::{PushHub, Subscription};
use super::request::{distinct_names, valid_event_name};
use super::session::{Watched, release, watch};
use super::subscriber::{Emit, Sink, SinkState, Subscriber, Transport, chunk, sse_message};
use crate::http::{Conn, Length, Request, Sent};
use crate::stats::{Stats, bump};
use percent_encoding::percent_decode_str;
use serde_json::json;
use std::cell::OnceCell;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEFAULT_HEARTBEAT_MS: u64 = 15_000;
const MIN_HEARTBEAT_MS: u64 = 10;
const MAX_MS: u64 = 3_600_000;
const MAX_SEQ: u64 = (1 << 53) - 1;

#[derive(Debug)]
struct Query {
    names: Vec<String>,
    /// `None`: no heartbeats.
    heartbeat: Option<Duration>,
    duration: Option<Duration>,
    /// The `request` of the stream's deliveries.
    request: Box<serde_json::value::RawValue>,
}

pub fn serve(
    hub: &PushHub,
    conn: &mut Conn,
    request: &Request,
    keep_alive: bool,
) -> io::Result<Sent> {
    let query = match parse_query(request.query().unwrap_or("")) {
        Ok(query) => query,
        Err(reason) => return conn.send_error(400, reason, keep_alive),
    };
    let Ok(named) = parse_position(request.last_event_id.as_deref().unwrap_or("")) else {
        return conn.send_error(400, "malformed last-event-id", keep_alive);
    };
    let extra = "Cache-Control: no-cache\r\n";
    let content_type = "text/event-stream";
    conn.send_head(200, content_type, Length::Chunked, extra, keep_alive, b"")?;
    let started = Instant::now();
    let stats = hub.stats();
    bump(&stats.sse_total);
    let subscription = Subscription {
        transport: Transport::Sse,
        names: query.names.clone(),
        request: query.request.clone(),
        keep_alive,
    };
    let sink = Sink::new(Arc::clone(&conn.stream));
    let registration = hub.subscribe_then(subscription, sink, |subscriber, sink, histories| {
        open_stream(subscriber, sink, &query.names, &named, histories, stats);
    });
    let ending = hold(conn, &registration.subscriber, started, &query, stats);
    release(conn, registration, ending, keep_alive)
}

/// Writes what comes before the live deliveries: for each event the client is behind on,
/// a gap message if the buffer no longer reaches back, and the replays; then the opening
/// message. Runs while no emitter can write to the stream.
fn open_stream(
    subscriber: &Subscriber,
    sink: &mut Sink,
    names: &[String],
    named: &[(String, u64)],
    histories: &[History],
    stats: &Stats,
) {
    let resumed = |name: &String| named.iter().find(|(n, _)| n == name).map(|(_, seq)| *seq);
    sink.positions = names
        .iter()
        .zip(histories)
        .map(|(name, history)| (name.clone(), resumed(name).unwrap_or(history.last_seq)))
        .collect();
    for (name, history) in names.iter().zip(histories) {
        if let Some(after) = resumed(name) {
            resume(subscriber, sink, name, after, history, stats);
        }
    }
    let opening = format!("id: {}\n\n", sink.position());
    sink.write(&chunk(opening.as_bytes(), false));
}

/// What the stream missed of `name` after seq `after`: a gap message if the buffer no
/// longer holds `after` + 1 (or `after` is from another run of the server), then the
/// buffered cycles as replayed deliveries.
fn resume(
    subscriber: &Subscriber,
    sink: &mut Sink,
    name: &str,
    after: u64,
    history: &History,
    stats: &Stats,
) {
    if after == history.last_seq {
        return;
    }
    let replays: Vec<_> = history.cycles.iter().filter(|c| c.seq > after).collect();
    let next = replays
        .first()
        .map_or(history.last_seq + 1, |cycle| cycle.seq);
    if next > after + 1 || after > history.last_seq {
        sink.move_position(name, next - 1);
        let gap = json!({"gap": {"name": name, "after": after, "next": next}}).to_string();
        let message = sse_message(Some("gap"), Some(&sink.position()), gap.as_bytes());
        if sink.write(&chunk(&message, false)) {
            bump(&stats.sse_gaps);
        }
    }
    for cycle in replays {
        let emit = Emit {
            grpc: OnceCell::new(),
            name,
            seq: cycle.seq,
            created_ms: cycle.created_ms,
            total: 1,
            data: cycle.data.as_deref().map(|raw| &**raw),
            replayed: true,
        };
        let body = subscriber.delivery(&emit, 1, stats);
        sink.move_position(name, cycle.seq);
        let message = sse_message(None, Some(&sink.position()), &body);
        if sink.write(&chunk(&message, false)) {
            bump(&stats.sse_replayed);
        }
    }
}

/// Holds the stream: heartbeats on schedule, the timeout message at the duration, and
/// the end as soon as the client leaves.
fn hold(
    conn: &mut Conn,
    subscriber: &Subscriber,
    started: Instant,
    query: &Query,
    stats: &Stats,
) -> SinkState {
    let deadline = query.duration.map(|duration| started + duration);
    let mut next_beat = query.heartbeat.map(|interval| started + interval);
    loop {
        let due = match (next_beat, deadline) {
            (Some(beat), Some(end)) => Some(beat.min(end)),
            (beat, end) => beat.or(end),
        };
        match watch(conn, subscriber, due) {
            Watched::Due if deadline.is_some_and(|end| Instant::now() >= end) => {
                return subscriber.time_out(stats);
            }
            Watched::Due => {
                subscriber.heartbeat(stats);
                let interval = query.heartbeat.unwrap_or_default();
                // A late thread leaves out the beats it missed rather than bunching them.
                next_beat = next_beat.map(|beat| (beat + interval).max(Instant::now()));
            }
            Watched::Ended => return subscriber.sink().state,
            Watched::ClientGone => return SinkState::Broken,
        }
    }
}

/// The query as `application/x-www-form-urlencoded`.
fn parse_query(query: &str) -> Result<Query, &'static str> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for part in query.split('&').filter(|part| !part.is_empty()) {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        let (key, value) = (form_decode(key)?, form_decode(value)?);
        if pairs.iter().any(|(seen, _)| *seen == key) {
            return Err("a parameter is given twice");
        }
        pairs.push((key, value));
    }
    let value = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let names: Vec<String> = value("events")
        .unwrap_or("")
        .split(',')
        .map(str::to_owned)
        .collect();
    distinct_names(&names)?;
    let mut request = json!({"type": "sse", "events": names});
    let heartbeat_ms = match value("heartbeat_ms") {
        Some(text) => {
            let ms = milliseconds(text).filter(|&ms| ms == 0 || ms >= MIN_HEARTBEAT_MS);
            let ms = ms.ok_or("heartbeat_ms must be 0 or an integer from 10 to 3600000")?;
            request["heartbeat_ms"] = ms.into();
            ms
        }
        None => DEFAULT_HEARTBEAT_MS,
    };
    let duration = match value("duration_ms") {
        Some(text) => {
            let ms = milliseconds(text).filter(|&ms| ms >= 1);
            let ms = ms.ok_or("duration_ms must be an integer from 1 to 3600000")?;
            request["duration_ms"] = ms.into();
            Some(Duration::from_millis(ms))
        }
        None => None,
    };
    Ok(Query {
        names,
        heartbeat: (heartbeat_ms > 0).then(|| Duration::from_millis(heartbeat_ms)),
        duration,
        request: serde_json::value::to_raw_value(&request).map_err(|_| "malformed query")?,
    })
}

fn form_decode(text: &str) -> Result<String, &'static str> {
    let spaced = text.replace('+', " ");
    percent_decode_str(&spaced)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| "malformed query")
}

/// Decimal digits only, up to an hour.
fn milliseconds(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&ms| ms <= MAX_MS)
}

/// A `Last-Event-ID` of the form `name:seq,...`; empty names nothing.
fn parse_position(header: &str) -> Result<Vec<(String, u64)>, ()> {
    let mut named: Vec<(String, u64)> = Vec::new();
    if header.is_empty() {
        return Ok(named);
    }
    for pair in header.split(',') {
        let (name, digits) = pair.split_once(':').ok_or(())?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !valid_event_name(name) || !canonical || named.iter().any(|(n, _)| n == name) {
            return Err(());
        }
        let seq = digits
            .parse()
            .ok()
            .filter(|&seq| seq <= MAX_SEQ)
            .ok_or(())?;
        named.push((name.to_owned(), seq));
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_form_decoded_and_checked() {
        let query = parse_query("events=a%2Cb&heartbeat_ms=0&duration_ms=500&x=1").unwrap();
        assert_eq!(query.names, ["a", "b"]);
        assert_eq!(query.heartbeat, None);
        assert_eq!(query.duration, Some(Duration::from_millis(500)));
        assert_eq!(
            query.request.get(),
            r#"{"duration_ms":500,"events":["a","b"],"heartbeat_ms":0,"type":"sse"}"#
        );
        let plain = parse_query("events=a").unwrap();
        assert_eq!(plain.heartbeat, Some(Duration::from_secs(15)));
        assert_eq!(plain.request.get(), r#"{"events":["a"],"type":"sse"}"#);
        for bad in [
            "",
            "events=",
            "events=a,a",
            "events=a%20b",
            "events=a&heartbeat_ms=5",
            "events=a&heartbeat_ms=1e3",
            "events=a&duration_ms=0",
            "events=a&duration_ms=3600001",
            "events=a&events=b",
            "events=%FF",
        ] {
            assert!(parse_query(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn last_event_id_is_a_position() {
        assert_eq!(parse_position(""), Ok(vec![]));
        assert_eq!(
            parse_position("a:17,b:0"),
            Ok(vec![("a".into(), 17), ("b".into(), 0)])
        );
        for bad in [
            "17",
            "a:017",
            "a:",
            "a:1,a:2",
            "a b:1",
            "a:-1",
            "a:9007199254740992",
        ] {
            assert!(parse_position(bad).is_err(), "{bad}");
        }
        assert!(parse_position("a:9007199254740991").is_ok());
    }
}
