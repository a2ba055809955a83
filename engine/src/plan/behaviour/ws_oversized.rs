//! Plan stage: the `ws-oversized` behaviour's spec: after the WebSocket upgrade, one message
//! whose frame announces `announced_bytes` of payload, the payload then trickled at
//! `bytes_per_s` or not sent at all.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{out_of_range, Kind, PlanError, SuiteKey};

/// The largest payload announced: 1 TiB, far past any server's message limit (RFC 6455
/// allows 2^63 - 1; a bigger number tests nothing more).
pub const MAX_ANNOUNCED_BYTES: u64 = 1 << 40;
/// The fastest trickle: 1 MB a second on each connection (faster is an upload, not a
/// trickle).
pub const MAX_TRICKLE_BYTES_PER_S: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WsOversizedSpec {
    /// The payload length the message's one frame announces.
    #[serde(default = "default_announced_bytes")]
    pub announced_bytes: u64,
    /// Payload bytes written a second after the frame's header; none at all when absent.
    #[serde(default)]
    pub bytes_per_s: Option<u64>,
}

/// 1 GiB: past the 64 KiB the spec's servers take, and past most stacks' defaults (16 MiB
/// to 100 MiB).
fn default_announced_bytes() -> u64 {
    1 << 30
}

impl Default for WsOversizedSpec {
    fn default() -> Self {
        WsOversizedSpec {
            announced_bytes: default_announced_bytes(),
            bytes_per_s: None,
        }
    }
}

impl Kind for WsOversizedSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/ws")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[
            SuiteKey::same("ws_announced_bytes", "announced_bytes"),
            SuiteKey::same("ws_trickle_bytes_per_s", "bytes_per_s"),
        ];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        let mut bounds = vec![("announced_bytes", self.announced_bytes, MAX_ANNOUNCED_BYTES)];
        if let Some(rate) = self.bytes_per_s {
            bounds.push(("bytes_per_s", rate, MAX_TRICKLE_BYTES_PER_S));
        }
        out_of_range("ws-oversized", &bounds)
    }
    /// The message never ends within a run: held until the server ends it or the run does.
    fn is_endless(&self) -> bool {
        true
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        Some(WS_OVER_H2)
    }
}

/// Why the WebSocket attacks refuse HTTP/2, as the `websocket` behaviour does.
pub(super) const WS_OVER_H2: &str = "the WebSocket attacks upgrade an HTTP/1.1 connection \
                                     (RFC 8441's extended CONNECT is not spoken): run them \
                                     without HTTP/2 (no --h2/--h2c; transport tcp or tls)";

/// `--ws-oversized BYTES`, `--ws-trickle RATE` (default: no payload).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WsOversizedFlags {
    /// WebSocket: one message announcing this many payload bytes after the upgrade
    #[arg(long)]
    pub ws_oversized: Option<u64>,
    /// WebSocket oversized message: trickle its payload at this many bytes a second (default:
    /// none sent)
    #[arg(long, requires = "ws_oversized")]
    pub ws_trickle: Option<u64>,
}

impl super::Flags for WsOversizedFlags {
    const NAME: &'static str = "--ws-oversized";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.ws_oversized.map(|announced_bytes| {
            super::BehaviourSpec::WsOversized(WsOversizedSpec {
                announced_bytes,
                bytes_per_s: self.ws_trickle,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_messages_length_and_trickle_are_bounded_by_name() {
        let spec = |announced_bytes, bytes_per_s| WsOversizedSpec {
            announced_bytes,
            bytes_per_s,
        };
        assert!(spec(1, None).check().is_empty());
        assert!(spec(MAX_ANNOUNCED_BYTES, Some(MAX_TRICKLE_BYTES_PER_S)).check().is_empty());
        assert_eq!(spec(0, Some(0)).check().len(), 2);
        let refused = spec(MAX_ANNOUNCED_BYTES + 1, Some(MAX_TRICKLE_BYTES_PER_S + 1)).check();
        let text: Vec<String> = refused.iter().map(|e| e.to_string()).collect();
        assert!(text[0].contains("ws-oversized announced_bytes must be 1..=1099511627776"), "{text:?}");
        assert!(text[1].contains("ws-oversized bytes_per_s must be 1..=1000000"), "{text:?}");
    }
}
