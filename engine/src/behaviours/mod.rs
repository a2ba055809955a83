//! Behaviours stage: what one request is, as a loop the worker runs. Every behaviour is one
//! `exchange` by a client; pacing, budgets, timeouts and the counting of attempts live in the
//! worker loop, once. Each behaviour's loop is a file here; its spec (settings, defaults,
//! `check`, facts) is the plan's (`crate::plan`'s `behaviour` folder), which the layers below
//! read too. Each behaviour's file here is named as its spec's there and implements `Loop`
//! for that spec; the module list and `build` are made from the plan's one list of
//! behaviours (`crate::plan::with_kinds!`), so this file names no behaviour.

mod grpcwire;
mod h2plain;
mod h2push;
mod held;
mod plain;
mod push;
mod rawh2;
mod schedule;
mod wsraw;

use std::time::{Duration, Instant};

use crate::client::Client;
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

/// How a worker builds the loop a spec asks for; each behaviour's file here implements it for
/// its spec.
pub(crate) trait Loop {
    fn build<R: Runner>(&self, plan: &ValidPlan, worker: usize, runner: R) -> R::Out;
}

/// The loops' side of the plan's list: a module per behaviour, named as its spec's module,
/// and `build`, which hands the plan's spec to its loop.
macro_rules! loops {
    ($($(#[$doc:meta])* $variant:ident($spec:ident, $flags:ident) in $module:ident,)*) => {
        $(mod $module;)*

        /// Builds the plan's behaviour for worker `worker` and hands it to `runner`.
        pub(crate) fn build<R: Runner>(plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
            match &plan.plan.behaviour {
                $(BehaviourSpec::$variant(spec) => spec.build(plan, worker, runner),)*
            }
        }
    };
}

crate::plan::with_kinds!(loops);
