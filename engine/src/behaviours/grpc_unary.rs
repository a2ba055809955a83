//! Behaviours stage: `grpc-unary` (spec §16): one gRPC unary call per exchange on the
//! HTTP/2 carrier (`crate::mux`), `streams` calls to a connection as `keepalive` over h2
//! has. The request, a 5-byte length prefix and the prost-encoded message, is built once
//! per plan; the answer's trailers (or a trailers-only answer's headers) give `grpc-status`,
//! and a call that ends with another status than OK is counted by it (`grpc_*` errors),
//! as an HTTP status of 400 or above is counted as `status`.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::grpcwire::{length_prefixed, status, status_kind, CallHead, EchoMessage, PerfRequest};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::ParseError;
use crate::mux::{open, Finished, Groups, Seat};
use crate::plan::{GrpcUnarySpec, ValidPlan};
use crate::stats::ErrorKind;

impl super::Loop for GrpcUnarySpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _worker: usize, runner: R) -> R::Out {
        runner.run(GrpcUnary::new(plan, self))
    }
}

pub(crate) struct GrpcUnary {
    head: CallHead,
    body: Bytes,
    timeout: Duration,
    groups: Groups,
}

impl GrpcUnary {
    pub fn new(plan: &ValidPlan, spec: &GrpcUnarySpec) -> GrpcUnary {
        let body = match spec.echo_bytes {
            Some(n) => length_prefixed(&EchoMessage {
                data: (0..n).map(|i| (i % 251) as u8).collect(),
            }),
            None => length_prefixed(&PerfRequest {}),
        };
        GrpcUnary {
            head: CallHead::new(plan, spec.method_path(), Some(plan.plan.timeout_ms)),
            body: Bytes::from(body),
            timeout: Duration::from_millis(plan.plan.timeout_ms),
            groups: Groups::new(plan.plan.streams()),
        }
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
        let stream = open(held, self.head.request(), self.body.clone()).await?;
        let mut reply = Reply::default();
        let finished = stream
            .read_with_trailers(&mut |piece| reply.take(piece), &mut |_| {})
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

/// The error a finished call counts as, `None` for OK with one whole message; a message
/// followed by no trailers has no status.
fn call_error(finished: &Finished, reply: &Reply) -> Option<ErrorKind> {
    match status(finished, reply.bytes > 0) {
        Some(0) if reply.whole() => None,
        Some(0) | None => Some(ErrorKind::GrpcNoStatus),
        Some(code) => Some(status_kind(code)),
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
}
