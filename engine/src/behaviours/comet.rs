//! Behaviours stage: `comet`: one subscription per exchange, its ndjson stream read to the
//! end (or to the run's end), `seq` checked per event.

use std::time::{Duration, Instant};

use super::h2push::Carrier;
use super::push::{observe_push, push_request, PushKind, SeqTracker, MAX_PUSH_BODY};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::ParseError;
use crate::mux::Seat;
use crate::plan::{CometSpec, ValidPlan};
use crate::shared::WorkerCtx;
use crate::stats::{ErrorKind, Event};

/// Comet: one subscription per exchange, its stream read to the end (or to the run's end).
pub(crate) struct Comet {
    request: Vec<u8>,
    timeout: Option<Duration>,
    carrier: Carrier,
}

impl Comet {
    pub fn new(plan: &ValidPlan, spec: &CometSpec) -> Comet {
        Comet {
            request: push_request(plan, "comet", &spec.events, spec.duration_ms),
            timeout: spec
                .duration_ms
                .map(|d| Duration::from_millis(d + plan.plan.timeout_ms)),
            carrier: Carrier::new(plan),
        }
    }
}

impl super::Loop for CometSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(Comet::new(plan, self))
    }
}

impl Behaviour for Comet {
    /// The line being read (a line may span reads); over HTTP/2, the connection's seat.
    type State = (Vec<u8>, Seat);

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn exchange(
        &self,
        c: &mut Client,
        (line, seat): &mut (Vec<u8>, Seat),
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = self.carrier.send(c, seat, &self.request).await?;
        let (ctx, at) = (c.ctx.clone(), sent.at());
        line.clear();
        let mut tracker = SeqTracker::default();
        let mut sink = |data: &[u8]| comet_bytes(&ctx, data, line, &mut tracker, at);
        let answer = sent.read(c, &mut sink, &mut |_| {}).await?;
        c.record_answer(attempt.intended, at, &answer);
        c.finish(&answer, true);
        Ok(())
    }
}

/// Splits stream bytes into lines (a line may span reads) and judges each complete one.
fn comet_bytes(
    ctx: &WorkerCtx,
    mut data: &[u8],
    line: &mut Vec<u8>,
    tracker: &mut SeqTracker,
    subscribed: Instant,
) -> Result<(), ParseError> {
    while let Some(pos) = data.iter().position(|&b| b == b'\n') {
        // A line whole in this piece is judged where it lies; only a line cut across pieces
        // is gathered, and its buffer freed after (a held stream keeps none).
        let whole = if line.is_empty() {
            &data[..pos]
        } else {
            line.extend_from_slice(&data[..pos]);
            &line[..]
        };
        if !whole.trim_ascii().is_empty() {
            match observe_push(ctx, whole, tracker, subscribed, true) {
                PushKind::Timeout => ctx.ledger.counters().add(Event::CometTimeoutLines, 1),
                PushKind::Unreadable => ctx.ledger.counters().error(ErrorKind::Parse),
                PushKind::Event => {}
            }
        }
        data = &data[pos + 1..];
        *line = Vec::new();
    }
    if line.len() + data.len() > MAX_PUSH_BODY {
        return Err(ParseError::BodyTooLarge);
    }
    line.extend_from_slice(data);
    Ok(())
}
