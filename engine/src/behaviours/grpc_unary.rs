//! Behaviours stage: `grpc-unary` (spec §16): one gRPC unary call per exchange on the
//! HTTP/2 carrier (`crate::mux`), `streams` calls to a connection as `keepalive` over h2
//! has. The request, a 5-byte length prefix and the prost-encoded message, is built once
//! per plan; the answer's trailers (or a trailers-only answer's headers) give `grpc-status`,
//! and a call that ends with another status than OK is counted by it (`grpc_*` errors),
//! as an HTTP status of 400 or above is counted as `status`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use prost::Message;

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::ParseError;
use crate::mux::{h2_headers, open, Finished, Groups, Seat};
use crate::plan::{GrpcUnarySpec, ValidPlan};
use crate::stats::ErrorKind;

/// The service's messages (spec/grpc/serverlab.proto), by prost's derive: the two the
/// unary calls send, field for field as the committed `.proto` has them.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct PerfRequest {}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct EchoMessage {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
}

/// `grpc-timeout` takes at most 8 digits (gRPC's PROTOCOL-HTTP2).
const MOST_TIMEOUT_MS: u64 = 99_999_999;

impl super::Loop for GrpcUnarySpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _worker: usize, runner: R) -> R::Out {
        runner.run(GrpcUnary::new(plan, self))
    }
}

pub(crate) struct GrpcUnary {
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    timeout: Duration,
    groups: Groups,
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

impl GrpcUnary {
    pub fn new(plan: &ValidPlan, spec: &GrpcUnarySpec) -> GrpcUnary {
        let scheme = if plan.target.tls { "https" } else { "http" };
        let text = format!("{scheme}://{}{}", plan.target.authority, spec.method_path());
        let body = match spec.echo_bytes {
            Some(n) => length_prefixed(&EchoMessage {
                data: (0..n).map(|i| (i % 251) as u8).collect(),
            }),
            None => length_prefixed(&PerfRequest {}),
        };
        let mut headers = h2_headers(plan.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        let deadline = format!("{}m", plan.plan.timeout_ms.min(MOST_TIMEOUT_MS));
        if let Ok(value) = HeaderValue::from_str(&deadline) {
            headers.insert("grpc-timeout", value);
        }
        GrpcUnary {
            uri: text.parse().unwrap_or_else(|_| Uri::from_static("/")),
            headers,
            body: Bytes::from(body),
            timeout: Duration::from_millis(plan.plan.timeout_ms),
            groups: Groups::new(plan.plan.streams()),
        }
    }

    fn request(&self) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

impl Behaviour for GrpcUnary {
    type State = Seat;

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        seat: &mut Seat,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = Instant::now();
        let held = self.groups.held(c, seat).await?;
        let stream = open(held, self.request(), self.body.clone()).await?;
        let mut reply = Reply::default();
        let finished = stream
            .read_with_trailers(&mut |piece| reply.take(piece))
            .await?;
        c.record_answer(attempt.intended, sent, &finished.answer);
        if finished.answer.status < 400 {
            if let Some(kind) = call_error(&finished, &reply) {
                c.ctx.ledger.counters().error(kind);
            }
        }
        Ok(())
    }
}

/// A unary reply's DATA as it comes: one length-prefixed message is expected, read no
/// further than its prefix (the body itself is discarded).
#[derive(Default)]
struct Reply {
    prefix: Vec<u8>,
    bytes: u64,
}

impl Reply {
    fn take(&mut self, piece: &[u8]) -> Result<(), ParseError> {
        let wanted = 5usize.saturating_sub(self.prefix.len()).min(piece.len());
        self.prefix.extend_from_slice(&piece[..wanted]);
        self.bytes += piece.len() as u64;
        Ok(())
    }

    /// Whether the DATA held exactly one message (or none, as an error answer has).
    fn whole(&self) -> bool {
        if self.bytes == 0 {
            return true;
        }
        if self.prefix.len() < 5 || self.prefix[0] != 0 {
            return false;
        }
        let length = u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]);
        self.bytes == 5 + u64::from(length)
    }
}

/// The error a finished call counts as, `None` for OK with one whole message. The status
/// is the trailers', or the headers' in an answer of headers alone (trailers-only); a
/// message followed by no trailers has none.
fn call_error(finished: &Finished, reply: &Reply) -> Option<ErrorKind> {
    let fields = match (&finished.trailers, reply.bytes) {
        (Some(trailers), _) => trailers,
        (None, 0) => &finished.headers,
        (None, _) => return Some(ErrorKind::GrpcNoStatus),
    };
    let whole = reply.whole();
    let status = fields
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u32>().ok());
    match status {
        Some(0) if whole => None,
        Some(0) | None => Some(ErrorKind::GrpcNoStatus),
        Some(code) => Some(status_kind(code)),
    }
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

    #[test]
    fn an_echo_request_of_the_largest_size_is_a_message_of_exactly_four_mebibytes() {
        let data = vec![7u8; crate::plan::MAX_ECHO_BYTES as usize];
        let framed = length_prefixed(&EchoMessage { data });
        assert_eq!(framed.len(), 5 + (4 << 20));
        assert_eq!(&framed[..5], &[0, 0, 0x40, 0, 0]);
        assert_eq!(length_prefixed(&PerfRequest {}), vec![0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_reply_is_whole_only_as_one_length_prefixed_message() {
        let mut reply = Reply::default();
        for piece in [&[0u8, 0][..], &[0, 0, 3], b"ab"] {
            reply.take(piece).unwrap();
        }
        assert!(!reply.whole(), "one byte short");
        reply.take(b"c").unwrap();
        assert!(reply.whole());
        reply.take(b"d").unwrap();
        assert!(!reply.whole(), "one byte over");
    }

    #[test]
    fn each_named_status_has_its_kind_and_the_rest_share_one() {
        assert_eq!(status_kind(4), ErrorKind::GrpcDeadlineExceeded);
        assert_eq!(status_kind(14), ErrorKind::GrpcUnavailable);
        assert_eq!(status_kind(2), ErrorKind::GrpcOther);
    }
}
