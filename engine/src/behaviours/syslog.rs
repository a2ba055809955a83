//! Behaviours stage: `syslog`: numbered RFC 5424 messages over TCP (a batch per exchange)
//! or UDP (a datagram each).

use std::io::Write;
use std::time::Duration;

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::plan::{SyslogFraming, SyslogSpec, SyslogTransport, ValidPlan};
use crate::stats::ErrorKind;
use crate::syslogmsg::Composer;

/// Messages per write when syslog is not paced: batching is what a real forwarder does.
const SYSLOG_BATCH: u64 = 64;

/// Numbered syslog messages over TCP (a batch per exchange) or UDP (a datagram each),
/// composed as realistic RFC 5424 messages (`crate::syslogmsg`).
pub(crate) struct Syslog {
    framing: SyslogFraming,
    composer: Composer,
    batch: u64,
    udp: bool,
    timeout: Duration,
}

impl Syslog {
    pub fn new(plan: &ValidPlan, spec: &SyslogSpec) -> Syslog {
        Syslog {
            framing: spec.syslog_framing,
            composer: Composer::new(spec.message_bytes),
            batch: if plan.plan.pacer.pace().is_open() {
                1
            } else {
                SYSLOG_BATCH
            },
            udp: spec.transport == SyslogTransport::Udp,
            timeout: Duration::from_millis(plan.plan.timeout_ms),
        }
    }

    /// Appends message `seq`, framed: octet counting needs its length first, so it is
    /// composed in `scratch` and copied.
    pub fn frame(&self, out: &mut Vec<u8>, scratch: &mut Vec<u8>, seq: u64, timestamp: &str) {
        if self.framing == SyslogFraming::Octet {
            scratch.clear();
            self.composer.compose(scratch, seq, timestamp);
            let _ = write!(out, "{} ", scratch.len());
            out.extend_from_slice(scratch);
            return;
        }
        self.composer.compose(out, seq, timestamp);
        out.push(b'\n');
    }

    async fn send_udp(
        &self,
        c: &mut Client,
        state: &mut SyslogState,
        first: u64,
        units: u64,
    ) -> Result<(), ErrorKind> {
        if state.udp.is_none() {
            let source = c
                .ctx
                .shared
                .next_source()
                .unwrap_or(std::net::Ipv4Addr::LOCALHOST);
            let socket = tokio::net::UdpSocket::bind((source, 0)).await?;
            socket.connect(c.ctx.shared.addr).await?;
            state.udp = Some(socket);
        }
        let socket = state.udp.as_ref().ok_or(ErrorKind::Other)?;
        let timestamp = Composer::timestamp();
        for seq in first..first + units {
            state.bytes.clear();
            self.composer.compose(&mut state.bytes, seq, &timestamp);
            if let Err(e) = socket.send(&state.bytes).await {
                return Err(ErrorKind::from_connect(&e));
            }
            c.ledger().wrote(state.bytes.len());
        }
        Ok(())
    }
}

/// A syslog client's UDP socket (TCP goes through the client's connection), and the bytes
/// of its next batch or datagram.
#[derive(Default)]
pub(crate) struct SyslogState {
    udp: Option<tokio::net::UdpSocket>,
    bytes: Vec<u8>,
    scratch: Vec<u8>,
}

impl super::Loop for SyslogSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _: usize, runner: R) -> R::Out {
        runner.run(Syslog::new(plan, self))
    }
}

impl Behaviour for Syslog {
    type State = SyslogState;

    fn units(&self) -> u64 {
        self.batch
    }

    fn finishes_at_end(&self) -> bool {
        true
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut SyslogState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let units = attempt.units;
        let first = c
            .ctx
            .shared
            .syslog_seq
            .fetch_add(units, std::sync::atomic::Ordering::Relaxed);
        if self.udp {
            return self.send_udp(c, state, first, units).await;
        }
        c.ensure_conn().await?;
        let timestamp = Composer::timestamp();
        state.bytes.clear();
        for seq in first..first + units {
            self.frame(&mut state.bytes, &mut state.scratch, seq, &timestamp);
        }
        c.send(&state.bytes).await
    }
}
