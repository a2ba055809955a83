//! Behaviours stage: `ws-oversized`: after the WebSocket upgrade, one text frame whose
//! header announces `announced_bytes` of payload (RFC 6455's 64-bit length), the payload
//! then trickled at `bytes_per_s` (`x`s, masked) or never sent. A server that checks the
//! length as the header comes closes at once (1009); one that waits for the payload holds
//! the connection, and its buffer. One exchange is one connection, held until the server
//! ends it or the run does.

use std::time::Duration;

use tungstenite::protocol::frame::coding::{Data, OpCode};

use super::websocket::upgrade_head;
use super::{wsraw, Attempt, Behaviour};
use crate::client::Client;
use crate::plan::{ValidPlan, WsOversizedSpec};
use crate::stats::ErrorKind;

pub(crate) struct WsOversized {
    head: Vec<u8>,
    announced_bytes: u64,
    bytes_per_s: Option<u64>,
}

impl super::Loop for WsOversizedSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(WsOversized {
            head: upgrade_head(plan),
            announced_bytes: self.announced_bytes,
            bytes_per_s: self.bytes_per_s,
        })
    }
}

impl Behaviour for WsOversized {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), attempt: Attempt) -> Result<(), ErrorKind> {
        let Some(mut masks) = wsraw::open(c, &self.head, attempt).await? else {
            return Ok(());
        };
        let mask = masks.next_mask();
        let text = OpCode::Data(Data::Text);
        c.send(&wsraw::header(text, true, self.announced_bytes, mask)).await?;
        let Some(per_s) = self.bytes_per_s else {
            return wsraw::hold(c).await;
        };
        let payload = |from: u64, to: u64| {
            let mut out = Vec::with_capacity((to - from) as usize);
            wsraw::mask_onto(&mut out, &vec![b'x'; (to - from) as usize], mask, from);
            out
        };
        wsraw::paced(c, per_s as f64, Some(self.announced_bytes), payload, |_, _| {}).await
    }
}
