//! Behaviours stage: `handshake-flood`: a new connection per exchange and a full TLS
//! handshake on it (the plan resumes no session), abandoned once the server's ServerHello
//! has come, or once the handshake finished; the connection is then dropped. An exchange
//! that got so far is answered; a server that refused or stalled counts by its kind
//! (`tls_alert`, `tls_handshake`, `tls_handshake_timeout`, `closed`, `reset`). Finished
//! handshakes count in `tls_handshakes`.

use std::time::Duration;

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::plan::{Abandon, HandshakeFloodSpec, ValidPlan};
use crate::stats::ErrorKind;

pub(crate) struct HandshakeFlood {
    abandon: Abandon,
    timeout: Duration,
}

impl super::Loop for HandshakeFloodSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(HandshakeFlood {
            abandon: self.abandon,
            timeout: Duration::from_millis(plan.plan.timeout_ms),
        })
    }
}

impl Behaviour for HandshakeFlood {
    type State = ();

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(&self, c: &mut Client, _: &mut (), _: Attempt) -> Result<(), ErrorKind> {
        match self.abandon {
            Abandon::ServerHello => c.hello_then_leave().await,
            Abandon::Finished => {
                c.close();
                c.ensure_conn().await?;
                c.close();
                Ok(())
            }
        }
    }
}
