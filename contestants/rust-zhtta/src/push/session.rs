//! The connection thread's side of a `/push` request: register, hold, and end it by an
//! answer, a timeout, or the client leaving.

use super::PushHub;
use super::request::{Mode, PushRequest};
use super::subscriber::{SinkState, Subscriber};
use crate::http::{Conn, Length, MAX_HEAD, Sent};
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

enum CometEnd {
    TimedOut(SinkState),
    ClientGone,
}

pub fn serve(
    hub: &PushHub,
    conn: &mut Conn,
    request: PushRequest,
    keep_alive: bool,
) -> io::Result<Sent> {
    let deadline = request
        .duration_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let writer = Arc::clone(&conn.stream);
    match request.mode {
        Mode::LongPoll => {
            let registration = hub.subscribe(request, writer, keep_alive);
            // parse_push guarantees a long poll has a duration.
            let deadline = deadline.unwrap_or_else(Instant::now);
            let ending = registration
                .subscriber
                .await_long_poll(deadline, hub.stats());
            drop(registration);
            ended(ending, keep_alive)
        }
        Mode::Comet => {
            let content_type = "application/x-ndjson";
            conn.send_head(200, content_type, Length::Chunked, "", keep_alive, b"")?;
            let registration = hub.subscribe(request, writer, keep_alive);
            let end = watch_comet(conn, &registration.subscriber, deadline, hub);
            drop(registration);
            conn.stream.set_read_timeout(None)?;
            match end {
                CometEnd::TimedOut(ending) => ended(ending, keep_alive),
                CometEnd::ClientGone => Ok(Sent {
                    status: 200,
                    keep_alive: false,
                }),
            }
        }
    }
}

fn ended(ending: SinkState, keep_alive: bool) -> io::Result<Sent> {
    match ending {
        SinkState::Broken => Err(io::Error::new(ErrorKind::BrokenPipe, "push write failed")),
        _ => Ok(Sent {
            status: 200,
            keep_alive,
        }),
    }
}

/// Holds a comet stream: the thread blocks reading the socket, which is how it learns
/// that the client left, while emitters write the lines. Bytes the client sends meanwhile
/// stay buffered for its next request.
fn watch_comet(
    conn: &mut Conn,
    subscriber: &Subscriber,
    deadline: Option<Instant>,
    hub: &PushHub,
) -> CometEnd {
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            return CometEnd::TimedOut(subscriber.time_out(hub.stats()));
        }
        if conn.stream.set_read_timeout(left).is_err() {
            break;
        }
        match conn.read_more() {
            Ok(0) => break,
            Ok(_) if conn.buffered().len() > MAX_HEAD => break,
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    subscriber.abandon();
    CometEnd::ClientGone
}
