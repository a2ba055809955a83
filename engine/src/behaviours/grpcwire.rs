//! Behaviours stage: what the gRPC behaviours share (spec §16): the service's messages (by
//! prost's derive, field for field as `spec/grpc/serverlab.proto` has them), the 5-byte
//! length prefix both ways, and a finished call's `grpc-status` as the engine counts it.

use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use prost::Message;

use crate::http::ParseError;
use crate::mux::{h2_headers, Finished};
use crate::plan::ValidPlan;
use crate::stats::ErrorKind;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PerfRequest {}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct EchoMessage {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct SubscribeRequest {
    #[prost(string, repeated, tag = "1")]
    pub events: Vec<String>,
}

/// One delivery of one emit cycle: the fields of §6's JSON `response.event`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Delivery {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int64, tag = "2")]
    pub seq: i64,
    #[prost(int64, tag = "3")]
    pub created: i64,
    #[prost(int64, tag = "4")]
    pub sent: i64,
    #[prost(int64, tag = "5")]
    pub total: i64,
    #[prost(int64, tag = "6")]
    pub place: i64,
    #[prost(string, tag = "7")]
    pub data: String,
}

/// The largest message the engine takes from a server: a delivery or an echo of a chat
/// message is small, and what a stream holds unread stays bounded whatever is announced.
pub(crate) const MAX_MESSAGE: usize = 1 << 20;

/// `grpc-timeout` takes at most 8 digits (gRPC's PROTOCOL-HTTP2).
const MOST_TIMEOUT_MS: u64 = 99_999_999;

/// A call's request head, built once per plan: `POST` of the method's path under the plan's
/// scheme and authority, `content-type: application/grpc`, `te: trailers`, the plan's
/// headers and, given a deadline, `grpc-timeout`.
pub(crate) struct CallHead {
    uri: Uri,
    headers: HeaderMap,
}

impl CallHead {
    pub fn new(plan: &ValidPlan, method_path: &str, deadline_ms: Option<u64>) -> CallHead {
        let scheme = if plan.target.tls { "https" } else { "http" };
        let text = format!("{scheme}://{}{method_path}", plan.target.authority);
        let mut headers = h2_headers(plan.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        let deadline = deadline_ms.map(|ms| format!("{}m", ms.min(MOST_TIMEOUT_MS)));
        if let Some(Ok(value)) = deadline.map(|d| HeaderValue::from_str(&d)) {
            headers.insert("grpc-timeout", value);
        }
        CallHead {
            uri: text.parse().unwrap_or_else(|_| Uri::from_static("/")),
            headers,
        }
    }

    pub fn request(&self) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// A message as gRPC frames it: uncompressed, its length in 4 bytes big-endian.
pub(crate) fn length_prefixed(message: &impl Message) -> Vec<u8> {
    let encoded = message.encode_to_vec();
    let mut framed = Vec::with_capacity(5 + encoded.len());
    framed.push(0);
    framed.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    framed.extend_from_slice(&encoded);
    framed
}

/// Length-prefixed messages read from DATA in pieces of any size. A compressed message
/// (none was asked for) or one announced over `MAX_MESSAGE` is a parse error.
#[derive(Debug, Default)]
pub(crate) struct Messages {
    pending: Vec<u8>,
}

impl Messages {
    /// Takes `piece` and hands `on` each message it completes, in order.
    pub fn feed(
        &mut self,
        piece: &[u8],
        on: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
    ) -> Result<(), ParseError> {
        self.pending.extend_from_slice(piece);
        let mut at = 0;
        while let Some(length) = announced(&self.pending[at..])? {
            let end = at + 5 + length;
            if self.pending.len() < end {
                break;
            }
            on(&self.pending[at + 5..end])?;
            at = end;
        }
        self.pending.drain(..at);
        // Emptied rather than kept: thousands of held streams each keeping a message's worth
        // of capacity between deliveries would cost more than an allocation per message.
        if self.pending.is_empty() {
            self.pending = Vec::new();
        }
        Ok(())
    }

    /// Whether a message was begun and not finished (a stream cut inside one).
    pub fn unfinished(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// The length a message's prefix announces, `None` until its 5 bytes are in.
fn announced(bytes: &[u8]) -> Result<Option<usize>, ParseError> {
    let Some(prefix) = bytes.get(..5) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    match (prefix[0], length) {
        (0, length) if length <= MAX_MESSAGE => Ok(Some(length)),
        (0, _) => Err(ParseError::BodyTooLarge),
        _ => Err(ParseError::BadMessage),
    }
}

/// A finished call's `grpc-status`: the trailers', or the headers' in an answer of headers
/// alone (trailers-only, `had_data` false). `None`: none, or one that is no number.
pub(crate) fn status(finished: &Finished, had_data: bool) -> Option<u32> {
    let fields = match (&finished.trailers, had_data) {
        (Some(trailers), _) => trailers,
        (None, false) => &finished.headers,
        (None, true) => return None,
    };
    fields
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u32>().ok())
}

/// gRPC's status codes (grpc/grpc doc/statuscodes.md) as the engine counts them.
pub(crate) fn status_kind(code: u32) -> ErrorKind {
    match code {
        4 => ErrorKind::GrpcDeadlineExceeded,
        8 => ErrorKind::GrpcResourceExhausted,
        12 => ErrorKind::GrpcUnimplemented,
        13 => ErrorKind::GrpcInternal,
        14 => ErrorKind::GrpcUnavailable,
        _ => ErrorKind::GrpcOther,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages_of(pieces: &[&[u8]]) -> (Vec<Vec<u8>>, bool) {
        let mut reader = Messages::default();
        let mut out = Vec::new();
        for piece in pieces {
            reader
                .feed(piece, &mut |m| {
                    out.push(m.to_vec());
                    Ok(())
                })
                .unwrap();
        }
        (out, reader.unfinished())
    }

    #[test]
    fn messages_read_the_same_whatever_the_pieces() {
        let one = length_prefixed(&EchoMessage {
            data: b"ab".to_vec(),
        });
        let two = length_prefixed(&PerfRequest {});
        let wire = [one.clone(), two.clone(), one.clone()].concat();
        let (whole, unfinished) = messages_of(&[&wire]);
        assert_eq!(whole, [one[5..].to_vec(), vec![], one[5..].to_vec()]);
        assert!(!unfinished);
        for split in 1..wire.len() {
            let (a, b) = wire.split_at(split);
            assert_eq!(messages_of(&[a, b]).0, whole, "split at {split}");
        }
        assert!(
            messages_of(&[&wire[..wire.len() - 1]]).1,
            "the last one cut short"
        );
    }

    #[test]
    fn a_compressed_or_oversized_message_is_refused() {
        let mut reader = Messages::default();
        let compressed = [1u8, 0, 0, 0, 0];
        assert_eq!(
            reader.feed(&compressed, &mut |_| Ok(())),
            Err(ParseError::BadMessage)
        );
        let mut reader = Messages::default();
        let huge = [0u8, 0, 0x10, 0, 1];
        assert_eq!(
            reader.feed(&huge, &mut |_| Ok(())),
            Err(ParseError::BodyTooLarge)
        );
    }

    #[test]
    fn each_named_status_has_its_kind_and_the_rest_share_one() {
        assert_eq!(status_kind(4), ErrorKind::GrpcDeadlineExceeded);
        assert_eq!(status_kind(14), ErrorKind::GrpcUnavailable);
        assert_eq!(status_kind(2), ErrorKind::GrpcOther);
    }

    #[test]
    fn a_delivery_decodes_as_the_proto_numbers_its_fields() {
        // name "e1", seq 3, created 1000, place 2 (the proto's field numbers 1, 2, 3, 6).
        let wire = [0x0a, 2, b'e', b'1', 0x10, 3, 0x18, 0xe8, 0x07, 0x30, 2];
        let delivery = Delivery::decode(&wire[..]).unwrap();
        assert_eq!((delivery.name.as_str(), delivery.seq), ("e1", 3));
        assert_eq!(
            (delivery.created, delivery.place, delivery.total),
            (1000, 2, 0)
        );
    }
}
