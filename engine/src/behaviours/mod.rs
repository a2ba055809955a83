//! Behaviours stage: what one request is, as a loop the worker runs. Every behaviour is one
//! `exchange` by a client; pacing, budgets, timeouts and the counting of attempts live in the
//! worker loop, once. Each behaviour's loop is a file here; its spec (settings, defaults,
//! `check`, facts) is the plan's (`crate::plan`'s `behaviour` folder), which the layers below
//! read too. `build` turns a plan's spec into its loop: one line per behaviour.

mod comet;
mod h2plain;
mod longpoll;
mod plain;
mod push;
mod slow_upload;
mod sse;
mod syslog;
mod websocket;

use std::time::{Duration, Instant};

use crate::client::Client;
use crate::plain::Plain;
use crate::plan::{BehaviourSpec, ValidPlan};
use crate::stats::ErrorKind;

pub(crate) trait Behaviour {
    /// What one client keeps from one exchange to the next (buffers, a long poll's sequence
    /// tracker, a UDP socket).
    type State: Default;
    /// Budget units (requests, messages) one exchange uses at most.
    fn units(&self) -> u64 {
        1
    }
    /// Limit on one exchange; `None` for streams that end with the run.
    fn timeout(&self) -> Option<Duration>;
    /// Whether an exchange in flight at the run's end is let finish (within `timeout`)
    /// rather than dropped: a syslog batch cut mid-write would leave messages at the
    /// receiver that the sender never counted, and loss (`sent − received`) below zero.
    fn finishes_at_end(&self) -> bool {
        false
    }
    /// Performs one exchange. Success statistics are recorded here; the caller counts the
    /// attempt and any error.
    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut Self::State,
        attempt: Attempt,
    ) -> Result<(), ErrorKind>;
}

/// One exchange as the pacer granted it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    /// The scheduled send time in open loop (latency is timed from it).
    pub intended: Option<Instant>,
    /// Budget units granted (messages for syslog, else 1).
    pub units: u64,
}

/// What runs a behaviour once it is built (the worker's loop, generic over the behaviour).
pub(crate) trait Runner {
    type Out;
    fn run<B: Behaviour + 'static>(self, behaviour: B) -> Self::Out;
}

/// Builds the plan's behaviour for worker `worker` and hands it to `runner`.
pub(crate) fn build<R: Runner>(plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
    use BehaviourSpec as S;
    match &plan.plan.behaviour {
        S::Keepalive(_) | S::NewConnection(_) if plan.plan.http2.is_some() => {
            runner.run(h2plain::H2Plain::new(plan, worker))
        }
        S::Keepalive(_) | S::NewConnection(_) | S::SlowReader(_) => {
            runner.run(Plain::new(plan, worker))
        }
        S::Longpoll(spec) => runner.run(longpoll::LongPoll::new(plan, spec)),
        S::Comet(spec) => runner.run(comet::Comet::new(plan, spec)),
        S::Sse(spec) => runner.run(sse::Sse::new(plan, spec)),
        S::Websocket(spec) => runner.run(websocket::WebSocket::new(plan, spec)),
        S::SlowUpload(spec) => runner.run(slow_upload::SlowUpload::new(plan, spec)),
        S::Syslog(spec) => runner.run(syslog::Syslog::new(plan, spec)),
    }
}
