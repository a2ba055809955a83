//! Behaviours stage: `grpc-stream` (spec §16): held `Subscribe` streams on the HTTP/2
//! carrier (`crate::mux`), `streams` of them to a connection. One exchange is one stream:
//! its request message names the events, and every `Delivery` message it carries is counted
//! by the push code SSE and WebSocket deliveries are (`super::push`: delay from `created`,
//! `seq` gaps, duplicates, the emit log's cycles). When the stream ends (its deadline, the
//! server's status, a reset or a cut connection) its end is counted by gRPC status or
//! HTTP/2 error and the slot subscribes again at once on a new stream; a new subscription
//! starts its `seq` check afresh, as gRPC replays nothing.

use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;

use super::grpcwire::{length_prefixed, status, status_kind, CallHead, Delivery, Messages, SubscribeRequest};
use super::push::{observe_response, PushEvent, PushResponse, SeqTracker};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::ParseError;
use crate::mux::{open, Finished, Groups, Seat};
use crate::plan::{GrpcStreamSpec, ValidPlan};
use crate::shared::WorkerCtx;
use crate::stats::{ErrorKind, Event};

impl super::Loop for GrpcStreamSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _worker: usize, runner: R) -> R::Out {
        runner.run(GrpcStream::new(plan, self))
    }
}

pub(crate) struct GrpcStream {
    head: CallHead,
    body: Bytes,
    /// The stream's deadline was sent (`duration_ms`): DEADLINE_EXCEEDED is its planned end.
    deadline: bool,
    timeout: Option<Duration>,
    groups: Groups,
}

impl GrpcStream {
    pub fn new(plan: &ValidPlan, spec: &GrpcStreamSpec) -> GrpcStream {
        let request = SubscribeRequest {
            events: spec.events.clone(),
        };
        GrpcStream {
            head: CallHead::new(plan, "/serverlab.v1.Lab/Subscribe", spec.duration_ms),
            body: Bytes::from(length_prefixed(&request)),
            deadline: spec.duration_ms.is_some(),
            timeout: spec
                .duration_ms
                .map(|d| Duration::from_millis(d + plan.plan.timeout_ms)),
            groups: Groups::new(plan.plan.streams()),
        }
    }

    /// What a finished stream's end counts as: `Ok` for its planned deadline, else the
    /// error. A Subscribe stream ends only by its deadline or the server's refusal (spec
    /// §16), so one the server ends OK was closed early.
    fn end(&self, finished: &Finished, had_data: bool, cut: bool) -> Result<(), ErrorKind> {
        if cut {
            return Err(ErrorKind::Parse);
        }
        match status(finished, had_data) {
            Some(4) if self.deadline => Ok(()),
            Some(0) => Err(ErrorKind::Closed),
            Some(code) => Err(status_kind(code)),
            None => Err(ErrorKind::GrpcNoStatus),
        }
    }
}

/// One client's streams: its connection's seat, and whether it subscribed before.
#[derive(Default)]
pub(crate) struct StreamState {
    seat: Seat,
    opened: bool,
}

impl Behaviour for GrpcStream {
    type State = StreamState;

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut StreamState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        if std::mem::replace(&mut state.opened, true) {
            c.ledger().counters().add(Event::Reconnects, 1);
        }
        let began = Instant::now();
        let held = self.groups.held(c, &mut state.seat).await?;
        let stream = open(held, self.head.request(), self.body.clone()).await?;
        let ctx = c.ctx.clone();
        let (mut tracker, mut messages, mut had_data) = (SeqTracker::default(), Messages::default(), false);
        let finished = stream
            .read_with_trailers(
                &mut |piece| {
                    had_data = true;
                    messages.feed(piece, &mut |m| judge(&ctx, m, &mut tracker, began))
                },
                // No subscribe time is taken from the answer's HEADERS: a gRPC server may
                // hold them back until its first message, the next emit cycle.
                &mut |_| {},
            )
            .await?;
        c.record_answer(attempt.intended, began, &finished.answer);
        if finished.answer.status < 400 {
            let end = self.end(&finished, had_data, messages.unfinished());
            match end {
                Ok(()) => ctx.ledger.counters().add(Event::GrpcDeadlines, 1),
                Err(kind) => ctx.ledger.counters().error(kind),
            }
        }
        Ok(())
    }
}

/// Counts one `Delivery` message as the push code counts any transport's delivery.
fn judge(
    ctx: &WorkerCtx,
    message: &[u8],
    tracker: &mut SeqTracker,
    subscribed: Instant,
) -> Result<(), ParseError> {
    let d = Delivery::decode(message).map_err(|_| ParseError::BadMessage)?;
    let (Ok(seq), Ok(created)) = (u64::try_from(d.seq), u64::try_from(d.created)) else {
        return Err(ParseError::BadMessage);
    };
    let place = match (u64::try_from(d.place), u64::try_from(d.total)) {
        (Ok(place), Ok(total)) if total > 0 => Some((place, total)),
        _ => None,
    };
    let response = PushResponse {
        timeout: false,
        event: Some(PushEvent::new(&d.name, seq, created, place)),
    };
    observe_response(ctx, response, tracker, subscribed, true);
    Ok(())
}
