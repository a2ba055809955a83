//! Behaviours stage: `ws-ping-flood`: after the WebSocket upgrade, pings `pings_per_s`, each
//! carrying its number (8 bytes, big-endian, masked), for as long as the connection lasts;
//! the pings sent count in `pings`, the server's pongs in `pongs`. One exchange is one
//! connection, held until the server ends it or the run does.

use std::time::Duration;

use tungstenite::protocol::frame::coding::{Control, OpCode};

use super::websocket::upgrade_head;
use super::{wsraw, Attempt, Behaviour};
use crate::client::Client;
use crate::plan::{ValidPlan, WsPingFloodSpec};
use crate::stats::{ErrorKind, Event};

pub(crate) struct WsPingFlood {
    head: Vec<u8>,
    pings_per_s: f64,
}

impl super::Loop for WsPingFloodSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(WsPingFlood {
            head: upgrade_head(plan),
            pings_per_s: self.pings_per_s as f64,
        })
    }
}

impl Behaviour for WsPingFlood {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        None
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), attempt: Attempt) -> Result<(), ErrorKind> {
        let Some(mut masks) = wsraw::open(c, &self.head, attempt).await? else {
            return Ok(());
        };
        let pings = |from: u64, to: u64| {
            let ping = OpCode::Control(Control::Ping);
            (from..to)
                .flat_map(|k| wsraw::frame(ping, true, &k.to_be_bytes(), masks.next_mask()))
                .collect()
        };
        let count = |c: &Client, n| c.ledger().counters().add(Event::Pings, n);
        wsraw::paced(c, self.pings_per_s, None, pings, count).await
    }
}
