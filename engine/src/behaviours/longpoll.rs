//! Behaviours stage: `longpoll`: one answer per exchange, then the slot re-subscribes.

use std::time::{Duration, Instant};

use super::h2push::Carrier;
use super::push::{observe_push, push_request, PushKind, SeqTracker, MAX_PUSH_BODY};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::ParseError;
use crate::inbox::Answer;
use crate::mux::Seat;
use crate::plan::{LongpollSpec, ValidPlan};
use crate::stats::{ErrorKind, Event};

/// Long poll: one answer per exchange, then the slot re-subscribes at once.
pub(crate) struct LongPoll {
    request: Vec<u8>,
    timeout: Duration,
    carrier: Carrier,
}

impl LongPoll {
    pub fn new(plan: &ValidPlan, spec: &LongpollSpec) -> LongPoll {
        LongPoll {
            request: push_request(plan, "longpoll", &spec.events, Some(spec.duration_ms)),
            timeout: Duration::from_millis(spec.duration_ms + plan.plan.timeout_ms),
            carrier: Carrier::new(plan),
        }
    }
}

/// A long-polling client's answer body, the event sequence numbers of all its polls, and
/// when its last answer arrived (the re-subscribe gap runs from there to the next poll);
/// over HTTP/2, the connection its polls go on.
#[derive(Default)]
pub(crate) struct PollState {
    body: Vec<u8>,
    seq: SeqTracker,
    answered: Option<Instant>,
    seat: Seat,
}

impl super::Loop for LongpollSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(LongPoll::new(plan, self))
    }
}

impl Behaviour for LongPoll {
    type State = PollState;

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut PollState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = self.carrier.send(c, &mut state.seat, &self.request).await?;
        if let Some(answered) = state.answered.take() {
            c.ledger().resubscribed(answered.elapsed());
        }
        let body = &mut state.body;
        body.clear();
        let at = sent.at();
        let mut sink = |d: &[u8]| {
            if body.len() + d.len() > MAX_PUSH_BODY {
                return Err(ParseError::BodyTooLarge);
            }
            body.extend_from_slice(d);
            Ok(())
        };
        let answer = sent.read(c, &mut sink, &mut |_| {}).await?;
        self.judge(c, state, at, attempt.intended, answer)
    }
}

impl LongPoll {
    fn judge(
        &self,
        c: &mut Client,
        state: &mut PollState,
        sent: Instant,
        intended: Option<Instant>,
        answer: Answer,
    ) -> Result<(), ErrorKind> {
        c.record_answer(intended, sent, &answer);
        c.finish(&answer, true);
        state.answered = Some(Instant::now());
        if answer.status >= 400 {
            return Ok(());
        }
        // A long poll legitimately misses the events emitted while it re-subscribes, so
        // only repeats and steps back are judged, over the whole life of the client.
        let kind = observe_push(&c.ctx, &state.body, &mut state.seq, sent, false);
        let c = c.ledger().counters();
        match kind {
            PushKind::Event => c.add(Event::LongpollEventAnswers, 1),
            PushKind::Timeout => c.add(Event::LongpollTimeoutAnswers, 1),
            PushKind::Unreadable => return Err(ErrorKind::Parse),
        }
        Ok(())
    }
}
