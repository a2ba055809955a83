//! Behaviours stage: WebSocket (spec §11): the `websocket` behaviour. The handshake and the frame codec are
//! tungstenite's (its key, its accept check, its frame header parser and formatter), driven
//! over the engine's own socket and read buffer rather than through tungstenite's `WebSocket`
//! type, whose stream and 128 KiB read buffer per connection would be a second event loop
//! and a thousand times the memory a held connection may cost. One exchange is one
//! connection: upgrade, subscribe, read deliveries (answering pings, publishing if this
//! client is one of the run's publishers) until the run ends, then close with 1000.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Cursor;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tungstenite::handshake::client::generate_key;
use tungstenite::handshake::derive_accept_key;
use tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tungstenite::protocol::frame::{Frame, FrameHeader};

use super::push::{observe_response, PushKind, PushResponse, SeqTracker};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::build_request;
use crate::inbox::Answer;
use crate::plan::{ValidPlan, WebsocketSpec};
use crate::stats::{ErrorKind, Event};

/// The largest message this client takes (the spec's servers take 64 KiB; a delivery
/// carrying a publish's data is a little larger).
pub(crate) const MAX_MESSAGE: usize = 1 << 20;

/// RFC 6455 close codes the client sends.
const NORMAL: u16 = 1000;
const PROTOCOL_ERROR: u16 = 1002;
const UNSUPPORTED_DATA: u16 = 1003;
const INVALID_PAYLOAD: u16 = 1007;
const TOO_BIG: u16 = 1009;

pub(crate) struct WebSocket {
    /// The upgrade request without its key line and closing empty line.
    head: Vec<u8>,
    subscribe: Vec<u8>,
    publish: Option<(Duration, u64, Vec<u8>)>,
}

impl WebSocket {
    pub fn new(plan: &ValidPlan, spec: &WebsocketSpec) -> WebSocket {
        let WebsocketSpec { events, publish } = spec;
        let head = upgrade_head(plan);
        let subscribe = serde_json::json!({"type": "subscribe", "events": events});
        let publish = publish.map(|p| {
            let message = serde_json::json!({"type": "publish", "event": events[0]});
            (
                Duration::from_millis(p.every_ms),
                p.clients,
                message.to_string().into_bytes(),
            )
        });
        WebSocket {
            head,
            subscribe: subscribe.to_string().into_bytes(),
            publish,
        }
    }
}

/// What one WebSocket client keeps: the frame being read, the message being joined, the
/// publishes awaiting their acknowledgement, the mask source, and whether it publishes.
#[derive(Default)]
pub(crate) struct WsState {
    frame: Option<(FrameHeader, u64)>,
    message: Vec<u8>,
    /// The opcode of the data message being joined (from its first frame).
    message_text: Option<bool>,
    control: Vec<u8>,
    sent_publishes: VecDeque<Instant>,
    mask: Masks,
    publisher: Option<bool>,
}

/// Why reading stopped: the server closed (with this code, if any), or the stream broke.
enum Stop {
    ServerClosed(Option<u16>),
    Broken(u16),
}

/// The upgrade request to the plan's target without its key line and closing empty line.
pub(super) fn upgrade_head(plan: &ValidPlan) -> Vec<u8> {
    let mut head = build_request(plan, "GET", None, &[], false);
    head.truncate(head.len() - 2);
    head.extend_from_slice(
        b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n",
    );
    head
}

/// Opens a connection and asks for the upgrade (`head` from `upgrade_head`): the answer's
/// status, when the request went, and the connection's masks (seeded from the key). The
/// request and the key live only until they are used.
pub(super) async fn upgrade(
    c: &mut Client,
    head: &[u8],
) -> Result<(u16, Instant, Masks), ErrorKind> {
    let key = generate_key();
    let mut request = head.to_vec();
    request.extend_from_slice(format!("Sec-WebSocket-Key: {key}\r\n\r\n").as_bytes());
    let sent = c.open_and_send(&request).await?;
    drop(request);
    let status = read_upgrade(c, &key).await?;
    c.ledger().handshake(sent.elapsed());
    Ok((status, sent, Masks::seeded(&key)))
}

/// Client frame masks: need not be secret here (no proxy in between), only varied: a
/// xorshift seeded from the connection's random key.
#[derive(Default)]
pub(super) struct Masks(u32);

impl Masks {
    pub fn seeded(key: &str) -> Masks {
        Masks(key.bytes().fold(0x9e37_79b9u32, |h, b| h.rotate_left(5) ^ u32::from(b)) | 1)
    }

    pub fn next_mask(&mut self) -> [u8; 4] {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x.to_be_bytes()
    }
}

impl super::Loop for WebsocketSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(WebSocket::new(plan, self))
    }
}

impl Behaviour for WebSocket {
    type State = WsState;

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut WsState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let (status, sent, masks) = upgrade(c, &self.head).await?;
        state.reset(masks);
        if status != 101 {
            let answer = Answer {
                status,
                close: true,
                first_byte: Instant::now(),
            };
            c.record_answer(attempt.intended, sent, &answer);
            c.close();
            return Ok(());
        }
        let subscribed = Instant::now();
        c.set_farewell(Some(state.close_frame(NORMAL)));
        let frame = state.frame_bytes(OpCode::Data(Data::Text), &self.subscribe);
        c.send(&frame).await?;
        // Not kept while the connection is held (nor is anything else not needed there).
        drop(frame);
        let publishing = self.publish.as_ref().filter(|p| state.publishes(c, p.1));
        let stop = self.read(c, state, subscribed, publishing).await?;
        let answer = Answer {
            status: 101,
            close: true,
            first_byte: subscribed,
        };
        c.record_answer(attempt.intended, sent, &answer);
        let result = match stop {
            Stop::ServerClosed(code) => {
                let reply = state.frame_bytes(
                    OpCode::Control(Control::Close),
                    &code.map(u16::to_be_bytes).unwrap_or_default()[..code.map_or(0, |_| 2)],
                );
                let _ = c.send(&reply).await;
                Err(ErrorKind::Closed)
            }
            Stop::Broken(code) => {
                let close = state.close_frame(code);
                let _ = c.send(&close).await;
                Err(ErrorKind::Parse)
            }
        };
        c.close();
        result
    }
}

impl WebSocket {
    /// Reads frames until the server closes or breaks the protocol (the run's end drops
    /// the exchange, and the client's farewell closes with 1000); publishes meanwhile.
    async fn read(
        &self,
        c: &mut Client,
        state: &mut WsState,
        subscribed: Instant,
        publishing: Option<&(Duration, u64, Vec<u8>)>,
    ) -> Result<Stop, ErrorKind> {
        let mut tracker = SeqTracker::default();
        // The publish timer is a publisher's alone, and boxed: inline, it would add its 112
        // bytes to the task of each of thousands of held clients.
        let mut timer =
            publishing.map(|p| Box::pin(tokio::time::sleep_until((subscribed + p.0).into())));
        loop {
            if let Some(stop) = self.take_frames(c, state, &mut tracker, subscribed).await? {
                return Ok(stop);
            }
            tokio::select! {
                read = c.fill() => {
                    if read? == 0 {
                        return Err(ErrorKind::Closed);
                    }
                }
                _ = async { if let Some(t) = &mut timer { t.await } }, if timer.is_some() => {
                    let (every, _, message) = publishing.ok_or(ErrorKind::Other)?;
                    let frame = state.frame_bytes(OpCode::Data(Data::Text), message);
                    state.sent_publishes.push_back(Instant::now());
                    c.send(&frame).await?;
                    c.ledger().counters().add(Event::Publishes, 1);
                    if let Some(t) = &mut timer {
                        let next = t.deadline() + *every;
                        t.as_mut().reset(next);
                    }
                }
            }
        }
    }

    /// Takes every complete frame (and the part of a frame's payload) the buffer holds.
    async fn take_frames(
        &self,
        c: &mut Client,
        state: &mut WsState,
        tracker: &mut SeqTracker,
        subscribed: Instant,
    ) -> Result<Option<Stop>, ErrorKind> {
        loop {
            if state.frame.is_none() {
                let mut cursor = Cursor::new(c.unread());
                let parsed = match FrameHeader::parse(&mut cursor) {
                    Ok(Some(parsed)) => parsed,
                    Ok(None) => return Ok(None),
                    Err(_) => return Ok(Some(Stop::Broken(PROTOCOL_ERROR))),
                };
                let used = cursor.position() as usize;
                c.consume(used);
                if let Err(code) = state.begin_frame(parsed) {
                    return Ok(Some(Stop::Broken(code)));
                }
            }
            let Some((header, left)) = state.frame.as_mut() else {
                return Ok(None);
            };
            let n = (*left).min(c.unread().len() as u64) as usize;
            let control = header.opcode.is_control();
            let into = if control {
                &mut state.control
            } else {
                &mut state.message
            };
            into.extend_from_slice(&c.unread()[..n]);
            c.consume(n);
            *left -= n as u64;
            if *left > 0 {
                return Ok(None);
            }
            let Some((header, _)) = state.frame.take() else {
                return Ok(None);
            };
            if let Some(stop) = self
                .end_frame(c, state, header, tracker, subscribed)
                .await?
            {
                return Ok(Some(stop));
            }
        }
    }

    /// A frame is complete: answers a ping, ends on a close, judges a whole message.
    async fn end_frame(
        &self,
        c: &mut Client,
        state: &mut WsState,
        header: FrameHeader,
        tracker: &mut SeqTracker,
        subscribed: Instant,
    ) -> Result<Option<Stop>, ErrorKind> {
        match header.opcode {
            OpCode::Control(Control::Ping) => {
                let pong =
                    state.frame_bytes(OpCode::Control(Control::Pong), &state.control.clone());
                state.control.clear();
                c.send(&pong).await?;
                Ok(None)
            }
            OpCode::Control(Control::Close) => {
                let code = (state.control.len() >= 2)
                    .then(|| u16::from_be_bytes([state.control[0], state.control[1]]));
                Ok(Some(Stop::ServerClosed(code)))
            }
            OpCode::Control(_) => {
                state.control.clear();
                Ok(None)
            }
            OpCode::Data(_) if !header.is_final => Ok(None),
            OpCode::Data(_) => {
                let text = state.message_text.take() == Some(true);
                let message = std::mem::take(&mut state.message);
                let verdict = match (text, std::str::from_utf8(&message)) {
                    (false, _) => Err(UNSUPPORTED_DATA),
                    (true, Err(_)) => Err(INVALID_PAYLOAD),
                    (true, Ok(_)) => {
                        judge(c, state, &message, tracker, subscribed);
                        Ok(())
                    }
                };
                // Dropped, not kept: a held connection keeps no message buffer between
                // messages.
                drop(message);
                Ok(verdict.err().map(Stop::Broken))
            }
        }
    }
}

/// A message from the server: a reply (it has a `type`) or a delivery.
#[derive(Deserialize)]
struct ServerMessage<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response: Option<PushResponse<'a>>,
}

/// Counts one text message: a delivery (seq, delay, emit record), a publish's
/// acknowledgement (the broadcast round trip), or another reply.
fn judge(
    c: &Client,
    state: &mut WsState,
    text: &[u8],
    tracker: &mut SeqTracker,
    subscribed: Instant,
) {
    let ctx = &c.ctx;
    let counters = ctx.ledger.counters();
    match serde_json::from_slice::<ServerMessage>(text) {
        Ok(ServerMessage {
            kind: Some(kind), ..
        }) => {
            if kind == "published" {
                match state.sent_publishes.pop_front() {
                    Some(sent) => ctx.ledger.broadcast_rtt(sent.elapsed()),
                    None => counters.error(ErrorKind::Parse),
                }
            }
        }
        Ok(ServerMessage {
            kind: None,
            response: Some(response),
        }) => match observe_response(ctx, response, tracker, subscribed, true) {
            PushKind::Event => {}
            PushKind::Timeout | PushKind::Unreadable => counters.error(ErrorKind::Parse),
        },
        _ => counters.error(ErrorKind::Parse),
    }
}

impl WsState {
    fn reset(&mut self, masks: Masks) {
        self.frame = None;
        self.message.clear();
        self.message_text = None;
        self.control.clear();
        self.sent_publishes.clear();
        self.mask = masks;
    }

    /// Whether this client is one of the run's first `clients` publishers (decided once).
    fn publishes(&mut self, c: &Client, clients: u64) -> bool {
        *self
            .publisher
            .get_or_insert_with(|| c.ctx.shared.publishers.fetch_add(1, Relaxed) < clients)
    }

    /// Checks a frame's header and starts reading its payload; `Err` is the close code.
    fn begin_frame(&mut self, (header, len): (FrameHeader, u64)) -> Result<(), u16> {
        if header.mask.is_some() || header.rsv1 || header.rsv2 || header.rsv3 {
            return Err(PROTOCOL_ERROR);
        }
        if !header.opcode.is_control() && self.message.len() as u64 + len > MAX_MESSAGE as u64 {
            return Err(TOO_BIG);
        }
        match header.opcode {
            OpCode::Control(_) if !header.is_final || len > 125 => return Err(PROTOCOL_ERROR),
            OpCode::Control(_) => self.control.clear(),
            OpCode::Data(Data::Continue) if self.message_text.is_none() => {
                return Err(PROTOCOL_ERROR)
            }
            OpCode::Data(Data::Continue) => {}
            OpCode::Data(_) if self.message_text.is_some() => return Err(PROTOCOL_ERROR),
            OpCode::Data(data) => self.message_text = Some(data == Data::Text),
        }
        self.frame = Some((header, len));
        Ok(())
    }

    /// A masked client frame.
    fn frame_bytes(&mut self, opcode: OpCode, payload: &[u8]) -> Vec<u8> {
        let mut frame = match opcode {
            OpCode::Data(_) => Frame::message(payload.to_vec(), opcode, true),
            OpCode::Control(Control::Pong) => Frame::pong(payload.to_vec()),
            OpCode::Control(_) => {
                Frame::from_payload(FrameHeader::default(), payload.to_vec().into())
            }
        };
        frame.header_mut().mask = Some(self.mask.next_mask());
        let mut out = Vec::with_capacity(frame.len());
        let _ = frame.format(&mut out);
        out
    }

    /// A masked close frame with `code` (8 bytes: header, mask, code).
    fn close_frame(&mut self, code: u16) -> [u8; 8] {
        let bytes = self.frame_bytes(OpCode::Control(Control::Close), &code.to_be_bytes());
        let mut out = [0; 8];
        out.copy_from_slice(&bytes);
        out
    }
}

trait IsControl {
    fn is_control(&self) -> bool;
}

impl IsControl for OpCode {
    fn is_control(&self) -> bool {
        matches!(self, OpCode::Control(_))
    }
}

/// Reads the answer to the upgrade: 101 with the right `Sec-WebSocket-Accept` and no
/// extension (none was offered), or another status, whose answer is not read further.
async fn read_upgrade(c: &mut Client, key: &str) -> Result<u16, ErrorKind> {
    loop {
        if let Some((status, used)) = parse_upgrade(c.unread(), key)? {
            c.consume(used);
            return Ok(status);
        }
        if c.unread().len() > crate::http::MAX_HEAD_BYTES {
            return Err(ErrorKind::Parse);
        }
        if c.fill().await? == 0 {
            return Err(ErrorKind::Closed);
        }
    }
}

fn parse_upgrade(bytes: &[u8], key: &str) -> Result<Option<(u16, usize)>, ErrorKind> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let used = match response.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ErrorKind::Parse),
    };
    let status = response.code.ok_or(ErrorKind::Parse)?;
    if status != 101 {
        return Ok(Some((status, used)));
    }
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let accepted =
        header("sec-websocket-accept") == Some(derive_accept_key(key.as_bytes()).as_bytes());
    let upgraded = header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case(b"websocket"));
    if !accepted || !upgraded || header("sec-websocket-extensions").is_some() {
        return Err(ErrorKind::Parse);
    }
    Ok(Some((101, used)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upgrade_answer_is_checked_against_the_key() {
        // RFC 6455 §1.3's example key and accept value.
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let good = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x02hi";
        assert_eq!(parse_upgrade(good, key), Ok(Some((101, good.len() - 4))));
        assert_eq!(parse_upgrade(&good[..30], key), Ok(None));
        let wrong = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: xxx\r\n\r\n";
        assert_eq!(parse_upgrade(wrong, key), Err(ErrorKind::Parse));
        let refused = b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse_upgrade(refused, key), Ok(Some((426, refused.len()))));
    }

    #[test]
    fn frames_are_masked_and_bad_headers_named_by_close_code() {
        let mut state = WsState::default();
        state.reset(Masks::seeded("k"));
        let frame = state.frame_bytes(OpCode::Data(Data::Text), b"abc");
        assert_eq!((frame[0], frame[1]), (0x81, 0x80 | 3));
        let mask = &frame[2..6];
        let unmasked: Vec<u8> = frame[6..]
            .iter()
            .zip(mask.iter().cycle())
            .map(|(b, m)| b ^ m)
            .collect();
        assert_eq!(unmasked, b"abc");
        let close = state.close_frame(NORMAL);
        assert_eq!((close[0], close[1]), (0x88, 0x82));
        let header = |opcode, is_final, mask| FrameHeader {
            is_final,
            opcode,
            mask,
            ..FrameHeader::default()
        };
        let text = OpCode::Data(Data::Text);
        let ping = OpCode::Control(Control::Ping);
        let cont = OpCode::Data(Data::Continue);
        assert_eq!(
            state.begin_frame((header(text, true, Some([1; 4])), 1)),
            Err(PROTOCOL_ERROR)
        );
        assert_eq!(
            state.begin_frame((header(ping, false, None), 1)),
            Err(PROTOCOL_ERROR)
        );
        assert_eq!(
            state.begin_frame((header(ping, true, None), 126)),
            Err(PROTOCOL_ERROR)
        );
        assert_eq!(
            state.begin_frame((header(cont, true, None), 1)),
            Err(PROTOCOL_ERROR)
        );
        assert_eq!(
            state.begin_frame((header(text, true, None), MAX_MESSAGE as u64 + 1)),
            Err(TOO_BIG)
        );
        assert_eq!(state.begin_frame((header(text, false, None), 1)), Ok(()));
        assert_eq!(
            state.begin_frame((header(text, true, None), 1)),
            Err(PROTOCOL_ERROR)
        );
    }
}
