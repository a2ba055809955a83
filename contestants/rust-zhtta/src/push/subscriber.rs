//! One held `/push` request. Emitter threads write deliveries straight to its socket, under
//! a per-subscriber lock that also decides, exactly once, which answer ends a long poll.

use super::request::{Mode, PushRequest};
use crate::clock::{lock, now_ms};
use crate::http::{Length, write_head};
use crate::stats::{Stats, bump, read};
use serde::Serialize;
use serde_json::value::RawValue;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// What one emit cycle tells each of its deliveries.
pub struct Emit<'a> {
    pub name: &'a str,
    pub seq: u64,
    pub created_ms: u64,
    pub total: u64,
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
    /// A long poll was answered, or a comet stream was ended, and the connection is fine.
    Finished,
    /// A write failed; the connection is shut down.
    Broken,
}

struct Sink {
    stream: Arc<TcpStream>,
    state: SinkState,
}

pub struct Subscriber {
    pub id: u64,
    pub mode: Mode,
    request: Box<RawValue>,
    created_ms: u64,
    start_connections: u64,
    keep_alive: bool,
    /// Mirrors `state != Open` so that an emitter can skip it without taking the lock.
    done: AtomicBool,
    sink: Mutex<Sink>,
    ended: Condvar,
}

impl Subscriber {
    pub fn new(
        id: u64,
        request: PushRequest,
        stream: Arc<TcpStream>,
        keep_alive: bool,
        start_connections: u64,
    ) -> Subscriber {
        Subscriber {
            id,
            mode: request.mode,
            request: request.echo,
            created_ms: now_ms(),
            start_connections,
            keep_alive,
            done: AtomicBool::new(false),
            sink: Mutex::new(Sink {
                stream,
                state: SinkState::Open,
            }),
            ended: Condvar::new(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
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
                finish: read(&stats.open_push),
            },
        };
        serde_json::to_vec(&answer).expect("answers serialize")
    }

    /// Delivers one emit; false if this subscriber was already done or the write failed.
    pub fn deliver(&self, emit: &Emit, place: u64, stats: &Stats) -> bool {
        let mut sink = lock(&self.sink);
        if sink.state != SinkState::Open {
            return false;
        }
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
        };
        let body = self.answer(DeliveryResponse { event }, stats);
        let written = self.write_answer(&mut sink, &body, false, stats);
        if written {
            bump(&stats.responses_push);
        }
        written
    }

    /// Ends the request with the timeout answer unless something answered it first.
    /// Returns how the request ended.
    pub fn time_out(&self, stats: &Stats) -> SinkState {
        let mut sink = lock(&self.sink);
        if sink.state == SinkState::Open {
            let body = self.answer(TimeoutResponse { timeout: true }, stats);
            if self.write_answer(&mut sink, &body, true, stats) {
                bump(&stats.responses_timeouts);
            }
        }
        sink.state
    }

    /// Waits until an emitter answers this long poll or `deadline` passes, and then
    /// sends the timeout answer if nothing else was sent.
    pub fn await_long_poll(&self, deadline: Instant, stats: &Stats) -> SinkState {
        {
            let mut sink = lock(&self.sink);
            while sink.state == SinkState::Open {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                sink = self
                    .ended
                    .wait_timeout(sink, left)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        }
        self.time_out(stats)
    }

    /// Marks the request ended because its client left, so emitters skip it.
    pub fn abandon(&self) {
        let mut sink = lock(&self.sink);
        if sink.state == SinkState::Open {
            sink.state = SinkState::Broken;
            self.done.store(true, Ordering::Release);
        }
    }

    /// Writes one answer in this request's framing. A long poll ends with its first
    /// answer; a comet stream with its last (`last`: the timeout line, then the final
    /// chunk).
    fn write_answer(&self, sink: &mut Sink, body: &[u8], last: bool, stats: &Stats) -> bool {
        let result = match self.mode {
            Mode::LongPoll => write_long_poll(&sink.stream, body, self.keep_alive, stats),
            Mode::Comet => write_comet_line(&sink.stream, body, last),
        };
        let ends = self.mode == Mode::LongPoll || last;
        sink.state = match result {
            Err(_) => {
                let _ = sink.stream.shutdown(Shutdown::Both);
                SinkState::Broken
            }
            Ok(()) if ends => SinkState::Finished,
            Ok(()) => SinkState::Open,
        };
        if sink.state != SinkState::Open {
            self.done.store(true, Ordering::Release);
            self.ended.notify_all();
        }
        result.is_ok()
    }
}

fn write_long_poll(
    mut stream: &TcpStream,
    body: &[u8],
    keep_alive: bool,
    stats: &Stats,
) -> io::Result<()> {
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
    stream.write_all(&response)?;
    bump(&stats.responses_total);
    Ok(())
}

/// One chunk per line, written in one call so that a line is never split across flushes.
fn write_comet_line(mut stream: &TcpStream, body: &[u8], last: bool) -> io::Result<()> {
    let mut chunk = Vec::with_capacity(body.len() + 16);
    // Writing into a Vec cannot fail.
    let _ = write!(chunk, "{:x}\r\n", body.len() + 1);
    chunk.extend_from_slice(body);
    chunk.extend_from_slice(b"\n\r\n");
    if last {
        chunk.extend_from_slice(b"0\r\n\r\n");
    }
    stream.write_all(&chunk)
}
