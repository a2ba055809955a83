//! Plan stage: HTTP/2 under the behaviour (issue 22). `h2` is HTTP/2 over TLS, agreed by
//! ALPN on an `https://` target; `h2c` is cleartext HTTP/2 with prior knowledge on an
//! `http://` target. `streams` is how many streams each connection carries at once, as
//! h2load's `-m`: a closed loop of `connections` × `streams` clients, `streams` of them
//! sharing each connection. Requests (kept alive or a new connection each), long polls,
//! comet and SSE streams go over HTTP/2, each exchange one stream. Every rule an HTTP/2
//! plan breaks is told at once, in one line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{BehaviourSpec, IoBackend, PacerSpec, Plan};

/// The most streams one connection carries at once (servers commonly allow 100 to 250).
pub const MAX_STREAMS: u64 = 1000;

/// HTTP/2 settings; absent, the plan speaks HTTP/1.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Http2Spec {
    /// `h2` (over TLS, by ALPN) or `h2c` (cleartext, prior knowledge).
    pub mode: Http2Mode,
    /// Concurrent streams per connection (h2load's `-m`).
    #[serde(default = "default_streams")]
    pub streams: u64,
}

fn default_streams() -> u64 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Http2Mode {
    H2,
    H2c,
}

impl Http2Spec {
    /// Every rule this plan breaks by asking for HTTP/2 (empty: none); `tls` is whether the
    /// target's scheme asks for TLS.
    pub fn problems(&self, plan: &Plan, tls: bool) -> Vec<String> {
        let mut found = Vec::new();
        let mut refuse = |why: &str| found.push(why.to_string());
        match (self.mode, tls) {
            (Http2Mode::H2, false) => {
                refuse("h2 is HTTP/2 over TLS: give an https:// target (or h2c for cleartext)")
            }
            (Http2Mode::H2c, true) => {
                refuse("h2c is cleartext HTTP/2: give an http:// target (or h2 over TLS)")
            }
            _ => {}
        }
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            refuse(&format!(
                "streams = {} must be 1..={MAX_STREAMS}",
                self.streams
            ));
        }
        if let Some(why) = not_carried(&plan.behaviour) {
            refuse(why);
        }
        let kind = plan.behaviour.kind();
        if self.streams > 1 && kind.new_connection_each() {
            refuse("streams > 1 needs kept-alive connections: a new connection carries one stream");
        }
        let paced = matches!(plan.pacer, PacerSpec::Closed {}) || plan.is_pooled();
        if self.streams > 1 && !paced {
            refuse("streams > 1 needs a closed loop or an open loop over a kept-alive pool");
        }
        if matches!(plan.pacer, PacerSpec::Sequential {}) {
            refuse(
                "sequential pacing waits for the server's close, which HTTP/2 leaves to the client",
            );
        }
        if plan.io == IoBackend::IoUring {
            refuse("the io_uring loop carries no HTTP/2; use --io auto or epoll");
        }
        found
    }
}

/// Why HTTP/2 does not carry `behaviour`, if it does not.
fn not_carried(behaviour: &BehaviourSpec) -> Option<&'static str> {
    use BehaviourSpec as B;
    match behaviour {
        B::Keepalive(_) | B::NewConnection(_) | B::Longpoll(_) | B::Comet(_) | B::Sse(_) => None,
        B::Websocket(_) => Some(
            "a WebSocket over HTTP/2 needs RFC 8441's extended CONNECT, which the engine does \
             not speak: run WebSocket without --h2/--h2c",
        ),
        B::RapidReset(_) | B::ContinuationFlood(_) | B::HpackBomb(_) => Some(
            "rapid-reset, continuation-flood and hpack-bomb write HTTP/2 frames of their own (h2c with prior knowledge on an \
             http:// target, ALPN h2 on https://): give it no http2 setting",
        ),
        B::SlowReader(_) | B::SlowUpload(_) | B::Syslog(_) | B::Slowloris(_) | B::Idle(_) | B::HandshakeFlood(_) => Some(
            "HTTP/2 carries keepalive and new-connection requests, long poll, comet and SSE; \
             not this behaviour",
        ),
    }
}
