//! Behaviours stage: `slow-upload`: a body trickled at a fixed rate, then the answer read.

use std::time::{Duration, Instant};

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::request_head;
use crate::inbox::discard;
use crate::plan::{SlowUploadSpec, ValidPlan};
use crate::stats::ErrorKind;

static FILLER: [u8; 16 * 1024] = [b'x'; 16 * 1024];

/// A body of `bytes` bytes written at `bytes_per_s`, then the answer read.
pub(crate) struct SlowUpload {
    head: Vec<u8>,
    bytes: u64,
    bytes_per_s: u64,
    timeout: Duration,
}

/// Pieces are sized so a trickle is written about 50 times a second.
const UPLOAD_TICKS_PER_S: u64 = 50;

impl SlowUpload {
    pub fn new(plan: &ValidPlan, spec: &SlowUploadSpec) -> SlowUpload {
        let SlowUploadSpec { bytes, bytes_per_s } = *spec;
        let head = request_head(plan, "POST", Some("application/octet-stream"), bytes, false);
        let trickle = Duration::from_secs_f64(bytes as f64 / bytes_per_s as f64);
        SlowUpload {
            head,
            bytes,
            bytes_per_s,
            timeout: trickle + Duration::from_millis(plan.plan.timeout_ms),
        }
    }

    async fn trickle(&self, c: &mut Client) -> Result<(), ErrorKind> {
        let piece = (self.bytes_per_s / UPLOAD_TICKS_PER_S).clamp(1, FILLER.len() as u64);
        let began = Instant::now();
        let mut sent = 0u64;
        while sent < self.bytes {
            let n = piece.min(self.bytes - sent);
            c.send(&FILLER[..n as usize]).await?;
            sent += n;
            let due = Duration::from_secs_f64(sent as f64 / self.bytes_per_s as f64);
            tokio::time::sleep_until((began + due).into()).await;
        }
        Ok(())
    }
}

impl super::Loop for SlowUploadSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(SlowUpload::new(plan, self))
    }
}

impl Behaviour for SlowUpload {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        _: &mut (),
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = c.open_and_send(&self.head).await?;
        self.trickle(c).await?;
        let answer = c.read_answer(false, &mut discard).await?;
        c.record_answer(attempt.intended, sent, &answer);
        c.finish(&answer, true);
        Ok(())
    }
}
