//! Behaviours stage: `slow-reader`: plain requests over HTTP/1.1 (`crate::plain`), whose
//! answers the client reads through its small receive buffer at the spec's pace
//! (`ReadPace`, which the client takes from the plan).

use crate::plain::Plain;
use crate::plan::{SlowReaderSpec, ValidPlan};

impl super::Loop for SlowReaderSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
        runner.run(Plain::new(plan, worker))
    }
}
