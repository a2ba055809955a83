//! Behaviours stage: `idle`: a connection opened and left, nothing sent, held until the
//! server ends it (`held`) or the run does.

use std::time::{Duration, Instant};

use super::{held, Attempt, Behaviour};
use crate::client::Client;
use crate::plan::{IdleSpec, ValidPlan};
use crate::stats::ErrorKind;

pub(crate) struct Idle;

impl super::Loop for IdleSpec {
    fn build<R: super::Runner>(&self, _: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(Idle)
    }
}

impl Behaviour for Idle {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), attempt: Attempt) -> Result<(), ErrorKind> {
        let began = Instant::now();
        c.ensure_conn().await?;
        held::hold(c, attempt, began, None, Vec::new).await
    }
}
