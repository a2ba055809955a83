//! Behaviours stage: `files`: plain requests for static files on kept-alive connections, the
//! loop of `plain.rs` (or HTTP/2's streams).

use crate::plan::{FilesSpec, ValidPlan};

impl super::Loop for FilesSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
        super::plain::build(plan, worker, runner)
    }
}
