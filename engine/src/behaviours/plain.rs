//! Behaviours stage: `keepalive`, `new-connection` and `slow-reader` on the epoll loop: the
//! plain request set (`crate::plain`, which the io_uring loop runs itself) sent and its
//! answer read. A slow reader differs only in its client's socket (`ReadPace`).

use std::time::Duration;

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::inbox::discard;
use crate::plain::Plain;
use crate::plan::ValidPlan;
use crate::stats::ErrorKind;

impl Behaviour for Plain {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(Plain::timeout(self))
    }

    async fn exchange(
        &self,
        c: &mut Client,
        _: &mut (),
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = c.open_and_send(self.request(self.pick())).await?;
        let answer = c.read_answer(self.head_request(), &mut discard).await?;
        c.record_answer(attempt.intended, sent, &answer);
        if self.await_close() && answer.close {
            c.await_peer_close().await?;
        }
        c.finish(&answer, self.keep_alive());
        Ok(())
    }
}

/// Plain requests as the plan asks them sent: HTTP/2 streams when it asks for HTTP/2, else
/// HTTP/1.1 requests (`keepalive` and `new-connection` build their loops here).
pub(super) fn build<R: super::Runner>(plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
    match plan.plan.http2 {
        Some(_) => runner.run(super::h2plain::H2Plain::new(plan, worker)),
        None => runner.run(Plain::new(plan, worker)),
    }
}
