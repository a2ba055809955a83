//! Behaviours stage: `new-connection`: plain requests, each on a connection of its own, the
//! loop of `plain.rs` (or HTTP/2's streams); the plan's `Connection: close` makes the
//! difference.

use crate::plan::{NewConnectionSpec, ValidPlan};

impl super::Loop for NewConnectionSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
        super::plain::build(plan, worker, runner)
    }
}
