//! Behaviours stage: `ws-fragments`: after the WebSocket upgrade, a text message that never
//! ends: its first frame without FIN, then continuation frames without it, each of
//! `frame_bytes` (`x`s, masked, a mask a frame), `frames_per_s`, never the final one. A
//! server that limits a message's size closes once the fragments pass it (1009); one that
//! does not buffers them for as long as the connection lasts. One exchange is one
//! connection, held until the server ends it or the run does.

use std::time::Duration;

use tungstenite::protocol::frame::coding::{Data, OpCode};

use super::websocket::upgrade_head;
use super::{wsraw, Attempt, Behaviour};
use crate::client::Client;
use crate::plan::{ValidPlan, WsFragmentsSpec};
use crate::stats::ErrorKind;

pub(crate) struct WsFragments {
    head: Vec<u8>,
    payload: Vec<u8>,
    frames_per_s: f64,
}

impl super::Loop for WsFragmentsSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(WsFragments {
            head: upgrade_head(plan),
            payload: vec![b'x'; self.frame_bytes as usize],
            frames_per_s: self.frames_per_s as f64,
        })
    }
}

impl Behaviour for WsFragments {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), attempt: Attempt) -> Result<(), ErrorKind> {
        let Some(mut masks) = wsraw::open(c, &self.head, attempt).await? else {
            return Ok(());
        };
        let frames = |from: u64, to: u64| {
            let mut out = Vec::new();
            for k in from..to {
                // The message's first frame says its type; the rest continue it.
                let opcode = OpCode::Data(if k == 0 { Data::Text } else { Data::Continue });
                out.extend(wsraw::frame(opcode, false, &self.payload, masks.next_mask()));
            }
            out
        };
        wsraw::paced(c, self.frames_per_s, None, frames, |_, _| {}).await
    }
}
