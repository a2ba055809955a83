//! One subscriber of any transport: a held `/push` request (long poll or comet stream), an
//! SSE stream, a subscribed WebSocket, or a gRPC `Subscribe` stream. Emitter threads write
//! deliveries straight to a socket, under a per-connection lock (the sink) that also
//! decides, exactly once, which answer ends a long poll, and keeps an SSE stream's
//! position; a gRPC stream's socket belongs to tonic, so its deliveries go to its queue.

use super::grpc::{GrpcCycle, GrpcQueue};
use crate::clock::{lock, now_ms};
use crate::http::{Length, write_head};
use crate::stats::{Stats, bump, read};
use crate::stream::Stream;
use serde::Serialize;
use serde_json::value::RawValue;
use std::cell::OnceCell;
use std::io::Write;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::frame::coding::{Data, OpCode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    LongPoll,
    Comet,
    Sse,
    WebSocket,
    Grpc,
}

/// Where a subscriber's deliveries go.
pub enum Outlet {
    /// A socket that emitter threads write to (every HTTP/1.1 transport).
    Socket(Arc<Mutex<Sink>>),
    /// A gRPC stream's bounded queue, emptied by its task on the gRPC runtime.
    Queue(GrpcQueue),
}

/// What one emit cycle (or, for an SSE replay, one buffered cycle) tells a delivery.
pub struct Emit<'a> {
    pub name: &'a str,
    pub seq: u64,
    pub created_ms: u64,
    pub total: u64,
    /// A publish cycle's data (spec §11).
    pub data: Option<&'a RawValue>,
    /// An SSE replay (spec §10).
    pub replayed: bool,
    /// The cycle as gRPC streams queue it, made once for the whole snapshot.
    pub grpc: OnceCell<Arc<GrpcCycle>>,
}

#[derive(Serialize)]
struct Timings {
    duration: u64,
    sent: u64,
    created: u64,
}

#[derive(Serialize)]
struct Connections {
    start: u64,
    finish: u64,
}

#[derive(Serialize)]
struct Placement {
    total: u64,
    place: u64,
}

#[derive(Serialize)]
struct EventDelivery<'a> {
    name: &'a str,
    seq: u64,
    timings: Timings,
    connections: Placement,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    replayed: bool,
}

#[derive(Serialize)]
struct DeliveryResponse<'a> {
    event: EventDelivery<'a>,
}

#[derive(Serialize)]
struct TimeoutResponse {
    timeout: bool,
}

#[derive(Serialize)]
struct Answer<'a, R: Serialize> {
    response: R,
    request: &'a RawValue,
    timings: Timings,
    connections: Connections,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkState {
    Open,
    /// A long poll was answered, or a stream was ended, and the connection is fine.
    Finished,
    /// A write failed or the client left; the connection is shut down.
    Broken,
}

/// A connection's writing side: whoever writes to it holds this lock, so messages never
/// interleave.
pub struct Sink {
    pub stream: Arc<Stream>,
    pub state: SinkState,
    /// An SSE stream's position: for each of its events, in order, the newest seq sent.
    pub positions: Vec<(String, u64)>,
}

impl Sink {
    pub fn new(stream: Arc<Stream>) -> Arc<Mutex<Sink>> {
        Arc::new(Mutex::new(Sink {
            stream,
            state: SinkState::Open,
            positions: Vec::new(),
        }))
    }

    /// Writes all of `bytes`; a failure marks the connection broken and shuts it down.
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        if self.state == SinkState::Broken {
            return false;
        }
        if (&*self.stream).write_all(bytes).is_ok() {
            return true;
        }
        let _ = self.stream.shutdown(Shutdown::Both);
        self.state = SinkState::Broken;
        false
    }

    /// The position as an SSE id: `name:seq` per event, joined by commas.
    pub fn position(&self) -> String {
        let pairs: Vec<String> = self
            .positions
            .iter()
            .map(|(name, seq)| format!("{name}:{seq}"))
            .collect();
        pairs.join(",")
    }

    pub fn move_position(&mut self, name: &str, seq: u64) {
        if let Some(position) = self.positions.iter_mut().find(|(n, _)| n == name) {
            position.1 = seq;
        }
    }
}

pub struct Subscriber {
    pub id: u64,
    pub transport: Transport,
    request: Box<RawValue>,
    created_ms: u64,
    start_connections: u64,
    keep_alive: bool,
    /// Mirrors `state != Open` so that an emitter can skip it without taking the lock.
    done: AtomicBool,
    outlet: Outlet,
}

impl Subscriber {
    pub fn new(
        id: u64,
        transport: Transport,
        request: Box<RawValue>,
        outlet: Outlet,
        keep_alive: bool,
        start_connections: u64,
    ) -> Subscriber {
        Subscriber {
            id,
            transport,
            request,
            created_ms: now_ms(),
            start_connections,
            keep_alive,
            done: AtomicBool::new(false),
            outlet,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The socket's sink, which only the HTTP/1.1 transports have.
    fn socket(&self) -> Option<&Arc<Mutex<Sink>>> {
        match &self.outlet {
            Outlet::Socket(sink) => Some(sink),
            Outlet::Queue(_) => None,
        }
    }

    /// The sink of a subscriber that writes to a socket; its connection thread asks.
    pub fn sink(&self) -> MutexGuard<'_, Sink> {
        lock(
            self.socket()
                .expect("only a socket's subscriber asks for its sink"),
        )
    }

    fn answer<R: Serialize>(&self, response: R, stats: &Stats) -> Vec<u8> {
        let sent = now_ms();
        let answer = Answer {
            response,
            request: &self.request,
            timings: Timings {
                duration: sent.saturating_sub(self.created_ms),
                sent,
                created: self.created_ms,
            },
            connections: Connections {
                start: self.start_connections,
                finish: read(&stats.subscribers),
            },
        };
        serde_json::to_vec(&answer).expect("answers serialize")
    }

    /// The delivery of `emit` at `place` in its snapshot.
    pub fn delivery(&self, emit: &Emit, place: u64, stats: &Stats) -> Vec<u8> {
        let sent = now_ms();
        let event = EventDelivery {
            name: emit.name,
            seq: emit.seq,
            timings: Timings {
                duration: sent.saturating_sub(emit.created_ms),
                sent,
                created: emit.created_ms,
            },
            connections: Placement {
                total: emit.total,
                place,
            },
            data: emit.data,
            replayed: emit.replayed,
        };
        self.answer(DeliveryResponse { event }, stats)
    }

    /// Delivers one emit; false if this subscriber was already done or the write failed.
    /// A delivery is counted once the socket took all of it.
    pub fn deliver(&self, emit: &Emit, place: u64, stats: &Stats) -> bool {
        let sink = match &self.outlet {
            Outlet::Socket(sink) => sink,
            Outlet::Queue(queue) => return self.enqueue(queue, emit, place, stats),
        };
        let mut sink = lock(sink);
        if sink.state != SinkState::Open {
            return false;
        }
        let body = self.delivery(emit, place, stats);
        let written = match self.transport {
            Transport::Sse => {
                sink.move_position(emit.name, emit.seq);
                let message = sse_message(None, Some(&sink.position()), &body);
                sink.write(&chunk(&message, false))
            }
            Transport::WebSocket => sink.write(&text_frame(body)),
            _ => self.write_push_answer(&mut sink, &body, false, stats),
        };
        let counter = match self.transport {
            Transport::Sse => &stats.sse_deliveries,
            Transport::WebSocket => &stats.ws_deliveries,
            _ => &stats.responses_push,
        };
        if written {
            bump(counter);
        }
        self.settle(&sink);
        written
    }

    /// Queues one emit for a gRPC stream; a stream too far behind to take it is done.
    fn enqueue(&self, queue: &GrpcQueue, emit: &Emit, place: u64, stats: &Stats) -> bool {
        if self.is_done() {
            return false;
        }
        let queued = queue.put(emit, place);
        if queued {
            bump(&stats.grpc_deliveries);
        } else {
            self.done.store(true, Ordering::Release);
        }
        queued
    }

    /// Ends the request with its timeout answer unless something answered it first.
    /// Returns how the request ended.
    pub fn time_out(&self, stats: &Stats) -> SinkState {
        let mut sink = self.sink();
        if sink.state == SinkState::Open {
            let body = self.answer(TimeoutResponse { timeout: true }, stats);
            let (written, counter) = if self.transport == Transport::Sse {
                let message = sse_message(Some("timeout"), None, &body);
                (sink.write(&chunk(&message, true)), &stats.sse_timeouts)
            } else {
                let written = self.write_push_answer(&mut sink, &body, true, stats);
                (written, &stats.responses_timeouts)
            };
            if written {
                bump(counter);
                sink.state = SinkState::Finished;
            }
            self.settle(&sink);
        }
        sink.state
    }

    /// An SSE heartbeat comment, unless the stream ended.
    pub fn heartbeat(&self, stats: &Stats) {
        let mut sink = self.sink();
        if sink.state == SinkState::Open && sink.write(&chunk(b": heartbeat\n\n", false)) {
            bump(&stats.sse_heartbeats);
        }
        self.settle(&sink);
    }

    /// Marks the subscriber gone (its client left, or broke the protocol), so that
    /// emitters skip it.
    pub fn abandon(&self) {
        let Some(sink) = self.socket() else {
            self.done.store(true, Ordering::Release);
            return;
        };
        let mut sink = lock(sink);
        if sink.state == SinkState::Open {
            sink.state = SinkState::Broken;
        }
        self.settle(&sink);
    }

    fn settle(&self, sink: &Sink) {
        if sink.state != SinkState::Open {
            self.done.store(true, Ordering::Release);
        }
    }

    /// Writes one `/push` answer in its framing. A long poll ends with its first answer;
    /// a comet stream with its last (`last`: the timeout line, then the final chunk).
    fn write_push_answer(&self, sink: &mut Sink, body: &[u8], last: bool, stats: &Stats) -> bool {
        let written = if self.transport == Transport::LongPoll {
            let written = sink.write(&long_poll_response(body, self.keep_alive));
            if written {
                bump(&stats.responses_total);
            }
            if written && !self.keep_alive {
                // Wakes the connection thread, which waits in a read, to close at once.
                let _ = sink.stream.shutdown(Shutdown::Read);
            }
            written
        } else {
            let mut line = body.to_vec();
            line.push(b'\n');
            sink.write(&chunk(&line, last))
        };
        if written && (self.transport == Transport::LongPoll || last) {
            sink.state = SinkState::Finished;
        }
        written
    }
}

fn long_poll_response(body: &[u8], keep_alive: bool) -> Vec<u8> {
    let mut response = Vec::with_capacity(200 + body.len());
    let length = Length::Known(body.len() as u64);
    write_head(
        &mut response,
        200,
        "application/json",
        length,
        "",
        keep_alive,
    );
    response.extend_from_slice(body);
    response
}

/// One chunk of a chunked body, written in one call so that a line or message is never
/// split across flushes; `last` appends the final chunk.
pub fn chunk(payload: &[u8], last: bool) -> Vec<u8> {
    let mut chunk = Vec::with_capacity(payload.len() + 16);
    // Writing into a Vec cannot fail.
    let _ = write!(chunk, "{:x}\r\n", payload.len());
    chunk.extend_from_slice(payload);
    chunk.extend_from_slice(b"\r\n");
    if last {
        chunk.extend_from_slice(b"0\r\n\r\n");
    }
    chunk
}

/// One SSE message (spec §10): optional `event:` and `id:` fields, then `data:` on one line.
pub fn sse_message(event: Option<&str>, id: Option<&str>, data: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(data.len() + 64);
    if let Some(event) = event {
        let _ = writeln!(message, "event: {event}");
    }
    if let Some(id) = id {
        let _ = writeln!(message, "id: {id}");
    }
    message.extend_from_slice(b"data: ");
    message.extend_from_slice(data);
    message.extend_from_slice(b"\n\n");
    message
}

/// One unmasked text frame, as a server sends it, framed by tungstenite.
pub fn text_frame(payload: Vec<u8>) -> Vec<u8> {
    let frame = Frame::message(payload, OpCode::Data(Data::Text), true);
    let mut out = Vec::with_capacity(frame.len());
    // Formatting into a Vec cannot fail.
    let _ = frame.format(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_messages_and_chunks() {
        let message = sse_message(Some("gap"), Some("a:1,b:2"), b"{}");
        assert_eq!(message, b"event: gap\nid: a:1,b:2\ndata: {}\n\n");
        assert_eq!(chunk(b"hello", true), b"5\r\nhello\r\n0\r\n\r\n");
    }

    #[test]
    fn text_frames_are_unmasked_with_the_right_length() {
        assert_eq!(text_frame(b"hi".to_vec()), [0x81, 2, b'h', b'i']);
        let long = text_frame(vec![b'x'; 300]);
        assert_eq!(&long[..4], &[0x81, 126, 1, 44]);
        assert_eq!(long.len(), 4 + 300);
    }
}
