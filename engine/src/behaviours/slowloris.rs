//! Behaviours stage: `slowloris`: a request line and its `Host`, then one header line every
//! `interval_ms`, the header section never ended (no empty line), as slowloris and
//! slowhttptest's `-H` send it. One exchange is one such connection, held until the server
//! ends it (`held`) or the run does.

use std::time::{Duration, Instant};

use super::{held, Attempt, Behaviour};
use crate::client::Client;
use crate::http::request_head;
use crate::plan::{SlowlorisSpec, ValidPlan};
use crate::stats::ErrorKind;

pub(crate) struct Slowloris {
    /// The request's head without the empty line that would end it.
    head: Vec<u8>,
    every: Duration,
}

impl Slowloris {
    pub fn new(plan: &ValidPlan, spec: &SlowlorisSpec) -> Slowloris {
        let mut head = request_head(plan, plan.plan.wire_method(), None, 0, false);
        head.truncate(head.len() - 2);
        Slowloris {
            head,
            every: Duration::from_millis(spec.interval_ms),
        }
    }
}

impl super::Loop for SlowlorisSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(Slowloris::new(plan, self))
    }
}

/// The `n`th trickled header line: a new name each time, so that no server folds them.
fn line(n: u64) -> Vec<u8> {
    format!("X-a-{n}: {n}\r\n").into_bytes()
}

impl Behaviour for Slowloris {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), attempt: Attempt) -> Result<(), ErrorKind> {
        let began = Instant::now();
        c.open_and_send(&self.head).await?;
        let mut sent = 0;
        held::hold(c, attempt, began, Some(self.every), || {
            sent += 1;
            line(sent)
        })
        .await
    }
}
