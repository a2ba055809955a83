//! The connection thread's side of a held request (`/push`, and `/sse` in sse.rs):
//! register, then watch the socket until an answer, a timeout, or the client leaving.

use super::hub::{PushHub, Registration, Subscription};
use super::request::{Mode, PushRequest};
use super::subscriber::{Outlet, Sink, SinkState, Subscriber, Transport};
use crate::http::{Conn, Length, MAX_HEAD, Sent};
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn serve(
    hub: &PushHub,
    conn: &mut Conn,
    request: PushRequest,
    keep_alive: bool,
) -> io::Result<Sent> {
    let deadline = request
        .duration_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let transport = match request.mode {
        Mode::LongPoll => Transport::LongPoll,
        Mode::Comet => {
            let content_type = "application/x-ndjson";
            conn.send_head(200, content_type, Length::Chunked, "", keep_alive, b"")?;
            Transport::Comet
        }
    };
    let mut names = request.events;
    names.sort();
    names.dedup();
    let subscription = Subscription {
        transport,
        names,
        request: request.echo,
        keep_alive,
    };
    let registration = hub.subscribe(
        subscription,
        Outlet::Socket(Sink::new(Arc::clone(&conn.stream))),
    );
    let subscriber = &registration.subscriber;
    let ending = match watch(conn, subscriber, deadline) {
        Watched::Due => subscriber.time_out(hub.stats()),
        Watched::Ended => subscriber.sink().state,
        Watched::ClientGone => SinkState::Broken,
    };
    release(conn, registration, ending, keep_alive)
}

/// Ends a held request: out of every list and count, the socket back to blocking reads,
/// and what the connection loop is to do next.
pub fn release(
    conn: &mut Conn,
    registration: Registration,
    ending: SinkState,
    keep_alive: bool,
) -> io::Result<Sent> {
    drop(registration);
    conn.stream.set_read_timeout(None)?;
    match ending {
        SinkState::Broken => Err(io::Error::new(ErrorKind::BrokenPipe, "client gone")),
        _ => Ok(Sent {
            status: 200,
            keep_alive,
        }),
    }
}

pub enum Watched {
    /// `due` passed.
    Due,
    /// The subscriber is no longer open: answered, ended, or its connection broke.
    Ended,
    /// The client closed its connection (or sent more than a request head meanwhile).
    ClientGone,
}

/// Holds a subscriber: the thread blocks reading the socket, which is how it learns at
/// once that the client left, while emitters write the deliveries. Bytes the client sends
/// meanwhile stay buffered for its next request.
pub fn watch(conn: &mut Conn, subscriber: &Subscriber, due: Option<Instant>) -> Watched {
    loop {
        if subscriber.is_done() {
            return Watched::Ended;
        }
        let left = due.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            return Watched::Due;
        }
        let gone = conn.stream.set_read_timeout(left).is_err()
            || match conn.read_more() {
                Ok(0) => true,
                Ok(_) => conn.buffered().len() > MAX_HEAD,
                Err(error) => !matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            };
        if gone && subscriber.is_done() {
            return Watched::Ended; // answered first; the next read_head sees the close
        }
        if gone {
            subscriber.abandon();
            return Watched::ClientGone;
        }
    }
}
