//! `GET /ws` (spec §11) on tungstenite's protocol layer, on the connection's own thread:
//! after the 101, that thread reads the WebSocket all the time (messages, pings, close
//! frames), and emitter threads write deliveries to its socket like any other subscriber's.
//! The handshake is checked here (the spec's JSON errors, 426 for a wrong version);
//! tungstenite frames, pongs, checks UTF-8 and sizes and answers a client's close, and the
//! close codes for what it reports are chosen here.

use super::hub::{PushHub, Registration, Subscription};
use super::request::{compact_json, distinct_names, valid_event_name};
use super::subscriber::{Sink, Transport, text_frame};
use crate::clock::lock;
use crate::http::{Conn, Request, Sent, Upgrade};
use crate::stats::{GaugeGuard, Stats, bump};
use crate::stream::Stream;
use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tungstenite::error::ProtocolError;
use tungstenite::handshake::derive_accept_key;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Error, Message, WebSocket};

const MAX_MESSAGE: usize = 64 * 1024;
/// Holds a connection's first reads; tungstenite grows it for a larger frame.
const READ_BUFFER: usize = 4096;
/// How long a connection this server closes waits for the client's close frame.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Why a request to `/ws` is not a valid upgrade: its status and reason.
fn handshake_problem(upgrade: &Upgrade) -> Option<(u16, &'static str)> {
    if !upgrade.websocket {
        return Some((400, "a websocket upgrade is required"));
    }
    if !upgrade.connection {
        return Some((400, "connection: upgrade is required"));
    }
    match upgrade.version.as_deref() {
        None => return Some((400, "sec-websocket-version is required")),
        Some("13") => {}
        Some(_) => return Some((426, "sec-websocket-version 13 only")),
    }
    if !upgrade.key.as_deref().is_some_and(is_websocket_key) {
        return Some((400, "sec-websocket-key is not 16 bytes in base64"));
    }
    None
}

/// 16 bytes in base64: 22 characters of the alphabet and `==`.
fn is_websocket_key(key: &str) -> bool {
    key.len() == 24
        && key.ends_with("==")
        && key[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

pub fn serve(hub: &PushHub, conn: &mut Conn, request: &Request) -> io::Result<Sent> {
    let upgrade = &request.upgrade;
    if let Some((status, reason)) = handshake_problem(upgrade) {
        let extra = if status == 426 {
            "Sec-WebSocket-Version: 13\r\n"
        } else {
            ""
        };
        return conn.send_error_with(status, reason, extra, request.keep_alive);
    }
    let key = upgrade.key.as_deref().unwrap_or_default();
    // No Sec-WebSocket-Extensions and no Sec-WebSocket-Protocol: every extension offered
    // (permessage-deflate too) is declined, and no subprotocol is selected.
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    );
    (&*conn.stream).write_all(head.as_bytes())?;
    let stats = hub.stats();
    bump(&stats.responses_total);
    bump(&stats.ws_total);
    let (_open, _) = GaugeGuard::raise(&stats.ws_open);
    let sink = Sink::new(Arc::clone(&conn.stream));
    let wire = Wire {
        stream: Arc::clone(&conn.stream),
        sink: Arc::clone(&sink),
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let early = conn.buffered().to_vec(); // frames the client sent right after its request
    conn.consume(early.len());
    let mut socket = WebSocket::from_partially_read(wire, early, Role::Server, Some(config));
    let mut session = Session {
        hub,
        stats,
        sink,
        registration: None,
    };
    let ending = session.read(&mut socket);
    // Gone from every list and count before the close handshake's wait.
    drop(session.registration.take());
    session.end(&mut socket, ending);
    // Over TLS, close_notify before the socket goes (spec §12).
    let _ = conn.stream.close_write();
    let _ = conn.stream.shutdown(Shutdown::Both);
    Ok(Sent {
        status: 101,
        keep_alive: false,
    })
}

/// tungstenite's stream: reads come straight from the socket (only this thread reads);
/// writes (pongs, close frames) take the connection's sink lock, so they never land
/// inside a delivery an emitter is writing.
struct Wire {
    stream: Arc<Stream>,
    sink: Arc<Mutex<Sink>>,
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.stream).read(buf)
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let sink = lock(&self.sink);
        (&*sink.stream).write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How the reading ended.
enum Ending {
    /// The client sent a close frame; tungstenite queued the answer with its code.
    ClientClosed,
    /// The connection ended without a close handshake.
    Gone,
    /// The client broke §11: the close frame this server owes it. `resync` is false when
    /// tungstenite may have lost its place in the byte stream.
    Refused {
        code: CloseCode,
        reason: &'static str,
        resync: bool,
    },
}

fn refused(code: CloseCode, reason: &'static str) -> Ending {
    Ending::Refused {
        code,
        reason,
        resync: true,
    }
}

struct Session<'a> {
    hub: &'a PushHub,
    stats: &'static Stats,
    sink: Arc<Mutex<Sink>>,
    registration: Option<Registration>,
}

impl Session<'_> {
    fn read(&mut self, socket: &mut WebSocket<Wire>) -> Ending {
        loop {
            // A ping's pong goes out at the start of the next read.
            let result = match socket.read() {
                Ok(Message::Text(text)) => self.handle(text.as_str()),
                Ok(Message::Binary(_)) => Err(refused(
                    CloseCode::Unsupported,
                    "binary messages are not accepted",
                )),
                Ok(Message::Close(_)) => {
                    let _ = socket.flush(); // sends the answer
                    Err(Ending::ClientClosed)
                }
                Ok(_) => Ok(()),
                Err(error) => Err(ending_of(error)),
            };
            if let Err(ending) = result {
                return ending;
            }
        }
    }

    /// Sends the close frame owed and waits for the client's, at most CLOSE_GRACE.
    fn end(&self, socket: &mut WebSocket<Wire>, ending: Ending) {
        let Ending::Refused {
            code,
            reason,
            resync,
        } = ending
        else {
            return;
        };
        let deadline = Instant::now() + CLOSE_GRACE;
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        if socket.close(Some(frame)).is_err() {
            return;
        }
        let stream = Arc::clone(&socket.get_ref().stream);
        if !resync || !await_close(socket, &stream, deadline) {
            drain(&stream, deadline);
        }
    }

    fn handle(&mut self, text: &str) -> Result<(), Ending> {
        let policy = |reason| refused(CloseCode::Policy, reason);
        let fields: HashMap<String, &RawValue> =
            serde_json::from_str(text).map_err(|_| policy("a message is one json object"))?;
        let field = |name: &str| fields.get(name).map(|raw| raw.get());
        let kind = field("type").and_then(|raw| serde_json::from_str::<String>(raw).ok());
        match kind.as_deref() {
            Some("subscribe") => self.subscribe(text, field("events")).map_err(policy),
            Some("echo") => {
                let data = RawValue::from_string(field("data").unwrap_or("null").to_owned());
                if self.reply(&Echo {
                    kind: "echo",
                    data: &data.expect("a field of valid json"),
                }) {
                    bump(&self.stats.ws_echoes);
                }
                Ok(())
            }
            Some("publish") => self.publish(field("event"), field("data")).map_err(policy),
            _ => Err(policy("unknown message type")),
        }
    }

    fn subscribe(&mut self, text: &str, events: Option<&str>) -> Result<(), &'static str> {
        if self.registration.is_some() {
            return Err("subscribed already");
        }
        let names: Vec<String> = events
            .and_then(|raw| serde_json::from_str(raw).ok())
            .ok_or("events must be a list of event names")?;
        distinct_names(&names)?;
        let request = RawValue::from_string(compact_json(text)).expect("compacted json");
        let reply = json!({"type": "subscribed", "events": names}).to_string();
        let subscription = Subscription {
            transport: Transport::WebSocket,
            names,
            request,
            keep_alive: false,
        };
        // The reply is written under the sink's lock while the subscriber enters the lists:
        // after it is registered, before any delivery can reach it.
        let sink = Arc::clone(&self.sink);
        let registration = self.hub.subscribe_then(subscription, sink, |_, sink, _| {
            sink.write(&text_frame(reply.into_bytes()));
        });
        self.registration = Some(registration);
        Ok(())
    }

    fn publish(&mut self, event: Option<&str>, data: Option<&str>) -> Result<(), &'static str> {
        let name = event
            .and_then(|raw| serde_json::from_str::<String>(raw).ok())
            .filter(|name| valid_event_name(name))
            .ok_or("publish needs a valid event name")?;
        let data = RawValue::from_string(data.map_or("null".into(), compact_json));
        bump(&self.stats.ws_publishes);
        // Every delivery of the cycle, this connection's own first, is written when it
        // returns; the reply follows them.
        let (seq, total) = self.hub.publish(&name, data.expect("compacted json"));
        let reply = json!({"type": "published", "event": name, "seq": seq, "total": total});
        self.reply(&reply);
        Ok(())
    }

    fn reply<T: Serialize>(&self, value: &T) -> bool {
        let text = serde_json::to_vec(value).expect("replies serialize");
        lock(&self.sink).write(&text_frame(text))
    }
}

#[derive(Serialize)]
struct Echo<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    data: &'a RawValue,
}

/// The close code for what tungstenite reported, or the client's leaving.
fn ending_of(error: Error) -> Ending {
    match error {
        Error::Capacity(_) => Ending::Refused {
            code: CloseCode::Size,
            reason: "a message over 65536 bytes",
            // A frame refused by its header leaves its payload unread.
            resync: false,
        },
        Error::Utf8(_) => refused(CloseCode::Invalid, "a text message must be utf-8"),
        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => Ending::Gone,
        Error::Protocol(_) => refused(CloseCode::Protocol, "a websocket protocol error"),
        _ => Ending::Gone,
    }
}

/// Reads until the client's close frame or `deadline`; false if its framing broke again
/// and the rest is to be dropped unparsed.
fn await_close(socket: &mut WebSocket<Wire>, stream: &Stream, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return true;
        }
        match socket.read() {
            Ok(Message::Close(_)) => return true, // the client's answer
            Ok(_) => {}
            Err(Error::Io(_) | Error::ConnectionClosed | Error::AlreadyClosed) => return true,
            Err(_) => return false,
        }
    }
}

/// Reads and drops what the client still sends until it closes or `deadline`, so that
/// closing does not become a reset that destroys the close frame just sent.
fn drain(stream: &Stream, deadline: Instant) {
    let mut discard = [0; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match (&*stream).read(&mut discard) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upgrade(version: &str, key: &str) -> Upgrade {
        Upgrade {
            websocket: true,
            connection: true,
            key: Some(key.into()),
            version: Some(version.into()),
        }
    }

    #[test]
    fn handshakes_are_checked_as_the_spec_says() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        assert_eq!(handshake_problem(&upgrade("13", key)), None);
        assert_eq!(handshake_problem(&upgrade("12", key)).unwrap().0, 426);
        assert_eq!(
            handshake_problem(&upgrade("13", "c2hvcnQ=")).unwrap().0,
            400
        );
        assert_eq!(handshake_problem(&Upgrade::default()).unwrap().0, 400);
        let no_connection = Upgrade {
            connection: false,
            ..upgrade("13", key)
        };
        assert_eq!(handshake_problem(&no_connection).unwrap().0, 400);
    }
}
