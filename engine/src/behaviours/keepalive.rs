//! Behaviours stage: `keepalive`: plain requests on kept-alive connections, the loop of
//! `plain.rs` (or HTTP/2's streams).

use crate::plan::{KeepaliveSpec, ValidPlan};

impl super::Loop for KeepaliveSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
        super::plain::build(plan, worker, runner)
    }
}
