//! Behaviours stage: Server-Sent Events (spec §10): a parser of the HTML standard's event-stream format over
//! the engine's own read buffers, and the `sse` behaviour built on it. One exchange is one
//! stream; when it ends (the server's `duration_ms`, a close, an error) the slot opens the
//! next with `Last-Event-ID`, so a stream that drops loses nothing the server can replay.

use std::cell::Cell;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::h2push::Carrier;
use super::push::{observe_push, PushKind, SeqTracker, MAX_PUSH_BODY};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::{build_request_to, ParseError};
use crate::mux::Seat;
use crate::plan::{SseSpec, ValidPlan};
use crate::shared::WorkerCtx;
use crate::stats::{ErrorKind, Event};

/// What the parser found: a comment line, or a dispatched event (its type and data).
#[derive(Debug, PartialEq)]
pub(crate) enum SseItem<'a> {
    Comment,
    Event {
        kind: &'a [u8],
        data: &'a [u8],
    },
    /// A message that only moved the last event ID (no data, so no event is dispatched).
    Id(&'a [u8]),
}

/// The HTML standard's event-stream interpretation, fed in pieces of any size: lines end
/// with CRLF, LF or CR; `field: value` lines fill the event being built, an empty line
/// dispatches it. Lines and data longer than the client accepts are an error.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// A line not yet ended by the piece read so far.
    line: Vec<u8>,
    data: Vec<u8>,
    event: Vec<u8>,
    /// The standard's last event ID buffer, when an `id` field changed it since the last
    /// dispatch; otherwise it equals `last_id`, and is not kept twice (a held stream would
    /// keep two copies of every id).
    id: Option<Vec<u8>>,
    /// The last event ID as of the last dispatch (what a reconnect names).
    pub last_id: Vec<u8>,
    /// The piece before ended with CR: an LF first in this one belongs to it.
    after_cr: bool,
    /// The stream's first line was taken (a BOM before it is skipped).
    started: bool,
}

impl SseParser {
    /// Forgets a stream's partial message, keeping the last event ID for the next stream.
    pub fn new_stream(&mut self) {
        self.line.clear();
        self.data.clear();
        self.event.clear();
        self.id = None;
        self.after_cr = false;
        self.started = false;
    }

    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        on: &mut impl FnMut(SseItem),
    ) -> Result<(), ParseError> {
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let rest = &bytes[end + 1..];
            let crlf = bytes[end] == b'\r' && rest.first() == Some(&b'\n');
            if self.line.is_empty() {
                self.take_line(&bytes[..end], on)?;
            } else {
                self.line.extend_from_slice(&bytes[..end]);
                let line = std::mem::take(&mut self.line);
                self.take_line(&line, on)?;
            }
            self.after_cr = bytes[end] == b'\r' && rest.is_empty();
            bytes = if crlf { &rest[1..] } else { rest };
        }
        if self.line.len() + bytes.len() > MAX_PUSH_BODY {
            return Err(ParseError::BodyTooLarge);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn take_line(&mut self, line: &[u8], on: &mut impl FnMut(SseItem)) -> Result<(), ParseError> {
        // A BOM opening the stream holds no line break, so it is the first line's start.
        let line = match std::mem::replace(&mut self.started, true) {
            false => line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line),
            true => line,
        };
        if line.is_empty() {
            self.dispatch(on);
            return Ok(());
        }
        if line[0] == b':' {
            on(SseItem::Comment);
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() >= MAX_PUSH_BODY {
                    return Err(ParseError::BodyTooLarge);
                }
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => self.id = Some(value.to_vec()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, on: &mut impl FnMut(SseItem)) {
        let moved = match self.id.take() {
            Some(id) => std::mem::replace(&mut self.last_id, id) != self.last_id,
            None => false,
        };
        if self.data.is_empty() {
            self.event.clear();
            if moved {
                on(SseItem::Id(&self.last_id));
            }
            return;
        }
        self.data.pop();
        let kind = if self.event.is_empty() {
            &b"message"[..]
        } else {
            &self.event
        };
        on(SseItem::Event {
            kind,
            data: &self.data,
        });
        // Freed rather than kept: thousands of held streams each keeping a delivery's worth
        // of capacity would cost more memory than the allocation per event costs time.
        self.data = Vec::new();
        self.event.clear();
    }
}

/// `e1:17,e2:4`, the spec's stream position, as (name, seq) pairs; `None` if malformed.
fn position(id: &[u8]) -> Option<Vec<(&str, u64)>> {
    std::str::from_utf8(id)
        .ok()?
        .split(',')
        .map(|pair| {
            let (name, seq) = pair.split_once(':')?;
            Some((name, seq.parse().ok()?))
        })
        .collect()
}

#[derive(Deserialize)]
struct GapMessage<'a> {
    #[serde(borrow)]
    gap: Gap<'a>,
}

#[derive(Deserialize)]
struct Gap<'a> {
    name: &'a str,
    after: u64,
    next: u64,
}

/// The `sse` behaviour: one stream per exchange.
pub(crate) struct Sse {
    /// The request's header section without its closing empty line (a reconnect adds
    /// `Last-Event-ID` there).
    head: Vec<u8>,
    timeout: Option<Duration>,
    carrier: Carrier,
}

impl Sse {
    pub fn new(plan: &ValidPlan, spec: &SseSpec) -> Sse {
        let SseSpec {
            events,
            heartbeat_ms,
            duration_ms,
        } = spec;
        let mut path = format!("{}?events={}", plan.target.path, events.join(","));
        if plan.target.path.contains('?') {
            path = path.replacen("?events", "&events", 1);
        }
        if let Some(h) = heartbeat_ms {
            path += &format!("&heartbeat_ms={h}");
        }
        if let Some(d) = duration_ms {
            path += &format!("&duration_ms={d}");
        }
        let mut head = build_request_to(plan, &path, "GET", None, &[], false);
        head.truncate(head.len() - 2);
        head.extend_from_slice(b"Accept: text/event-stream\r\n");
        Sse {
            head,
            timeout: duration_ms.map(|d| Duration::from_millis(d + plan.plan.timeout_ms)),
            carrier: Carrier::new(plan),
        }
    }
}

/// One SSE client across its streams: the parser (with the last event ID), the seq check
/// and whether a stream was opened before; over HTTP/2, the connection's seat.
#[derive(Default)]
pub(crate) struct SseState {
    parser: SseParser,
    seq: SeqTracker,
    opened: bool,
    seat: Seat,
}

impl super::Loop for SseSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(Sse::new(plan, self))
    }
}

impl Behaviour for Sse {
    type State = SseState;

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut SseState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let mut request = self.head.clone();
        if !state.parser.last_id.is_empty() {
            request.extend_from_slice(b"Last-Event-ID: ");
            request.extend_from_slice(&state.parser.last_id);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"\r\n");
        if std::mem::replace(&mut state.opened, true) {
            c.ledger().counters().add(Event::Reconnects, 1);
        }
        state.parser.new_stream();
        let sent = self.carrier.send(c, &mut state.seat, &request).await?;
        drop(request);
        let (ctx, at) = (c.ctx.clone(), sent.at());
        let is_stream = Cell::new(false);
        let (parser, seq) = (&mut state.parser, &mut state.seq);
        let answer = sent
            .read(
                c,
                &mut |data: &[u8]| {
                    if !is_stream.get() {
                        return Ok(());
                    }
                    parser.feed(data, &mut |item| judge(&ctx, item, seq, at))
                },
                &mut |status| {
                    is_stream.set(status == 200);
                    ctx.ledger.handshake(at.elapsed());
                },
            )
            .await?;
        c.record_answer(attempt.intended, at, &answer);
        c.finish(&answer, true);
        Ok(())
    }
}

/// Counts what one parsed item says.
fn judge(ctx: &WorkerCtx, item: SseItem, seq: &mut SeqTracker, subscribed: Instant) {
    let c = ctx.ledger.counters();
    match item {
        SseItem::Comment => c.add(Event::Heartbeats, 1),
        // The opening message says where each event stands, so the first delivery of a
        // stream is judged against it (an event missed before it is lost too).
        SseItem::Id(id) => {
            for (name, at) in position(id).unwrap_or_default() {
                seq.seed(name, at);
            }
        }
        SseItem::Event {
            kind: b"message",
            data,
        } => match observe_push(ctx, data, seq, subscribed, true) {
            PushKind::Event => {}
            PushKind::Timeout | PushKind::Unreadable => c.error(ErrorKind::Parse),
        },
        SseItem::Event {
            kind: b"timeout", ..
        } => c.add(Event::SseTimeoutMessages, 1),
        SseItem::Event { kind: b"gap", data } => match serde_json::from_slice::<GapMessage>(data) {
            Ok(GapMessage { gap }) => {
                c.add(Event::Gaps, 1);
                seq.seed(gap.name, gap.after);
                c.add(Event::Lost, seq.skip_to(gap.name, gap.next));
            }
            Err(_) => c.error(ErrorKind::Parse),
        },
        SseItem::Event { .. } => c.error(ErrorKind::Parse),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(parser: &mut SseParser, pieces: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        for piece in pieces {
            parser
                .feed(piece, &mut |item| {
                    out.push(match item {
                        SseItem::Comment => "comment".to_string(),
                        SseItem::Id(_) => "id".to_string(),
                        SseItem::Event { kind, data } => format!(
                            "{}={}",
                            String::from_utf8_lossy(kind),
                            String::from_utf8_lossy(data)
                        ),
                    })
                })
                .unwrap();
        }
        out
    }

    #[test]
    fn the_standards_examples_dispatch_as_it_says() {
        // HTML Living Standard, 9.2.6 "Interpreting an event stream", its examples.
        let mut p = SseParser::default();
        let stocks = b"data: YHOO\ndata: +2\ndata: 10\n\n";
        assert_eq!(items(&mut p, &[stocks]), ["message=YHOO\n+2\n10"]);
        let mut p = SseParser::default();
        let four = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n";
        assert_eq!(
            items(&mut p, &[four]),
            [
                "comment",
                "message=first event",
                "message=second event",
                "message= third event"
            ]
        );
        assert!(
            p.last_id.is_empty(),
            "an empty id field resets the last event ID"
        );
        let mut p = SseParser::default();
        let two = b"data\n\ndata\ndata\n\ndata:";
        assert_eq!(items(&mut p, &[two]), ["message=", "message=\n"]);
        let mut p = SseParser::default();
        let same = b"data:test\n\ndata: test\n\n";
        assert_eq!(items(&mut p, &[same]), ["message=test", "message=test"]);
    }

    #[test]
    fn any_line_ending_and_any_split_read_the_same() {
        let stream = b"\xef\xbb\xbfevent: gap\r\nid: e1:4\r\ndata: {}\r\n\r\n: hb\r\rid: e1:5\n\n";
        let whole = items(&mut SseParser::default(), &[stream]);
        assert_eq!(whole, ["gap={}", "comment", "id"]);
        for split in 1..stream.len() {
            let mut p = SseParser::default();
            let (a, b) = stream.split_at(split);
            assert_eq!(items(&mut p, &[a, b]), whole, "split at {split}");
            assert_eq!(p.last_id, b"e1:5");
        }
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = SseParser::default();
        let big = vec![b'a'; MAX_PUSH_BODY + 1];
        assert_eq!(p.feed(&big, &mut |_| {}), Err(ParseError::BodyTooLarge));
    }

    #[test]
    fn positions_read_as_pairs() {
        assert_eq!(position(b"e1:17,e2:4"), Some(vec![("e1", 17), ("e2", 4)]));
        assert_eq!(position(b"e1"), None);
    }
}
