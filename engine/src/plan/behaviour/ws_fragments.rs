//! Plan stage: the `ws-fragments` behaviour's spec: an endless fragmented WebSocket message,
//! a first frame without FIN then continuation frames of `frame_bytes`, `frames_per_s` a
//! connection, never the final one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ws_oversized::WS_OVER_H2;
use super::{out_of_range, Kind, PlanError, SuiteKey};

/// The most frames written a second on one connection: past what a worker writes.
pub const MAX_FRAMES_PER_S: u64 = 1_000_000;
/// The largest frame payload: 64 KiB, the spec's servers' whole-message limit.
pub const MAX_FRAGMENT_BYTES: u64 = 65_536;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WsFragmentsSpec {
    /// Frames (the first, then continuations) written a second on each connection.
    pub frames_per_s: u64,
    /// Each frame's payload.
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
}

/// The most a control frame carries, and a small fragment: the attack is the frames' count,
/// not their bytes.
fn default_frame_bytes() -> u64 {
    125
}

impl Default for WsFragmentsSpec {
    /// No rate: `check` refuses a spec that gives none.
    fn default() -> Self {
        WsFragmentsSpec {
            frames_per_s: 0,
            frame_bytes: default_frame_bytes(),
        }
    }
}

impl Kind for WsFragmentsSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/ws")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[
            SuiteKey::same("ws_frames_per_s", "frames_per_s"),
            SuiteKey::same("ws_frame_bytes", "frame_bytes"),
        ];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        out_of_range(
            "ws-fragments",
            &[
                ("frames_per_s", self.frames_per_s, MAX_FRAMES_PER_S),
                ("frame_bytes", self.frame_bytes, MAX_FRAGMENT_BYTES),
            ],
        )
    }
    /// The message never ends: held until the server ends it or the run does.
    fn is_endless(&self) -> bool {
        true
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        Some(WS_OVER_H2)
    }
}

/// `--ws-fragments RATE`, `--ws-fragment-bytes N` (default: the spec's).
#[derive(Debug, Clone, clap::Args)]
pub struct WsFragmentsFlags {
    /// WebSocket: a message never ended, this many fragments a second per connection
    #[arg(long)]
    pub ws_fragments: Option<u64>,
    /// WebSocket fragments: each fragment's payload bytes
    #[arg(long, requires = "ws_fragments", default_value_t = default_frame_bytes())]
    pub ws_fragment_bytes: u64,
}

impl super::Flags for WsFragmentsFlags {
    const NAME: &'static str = "--ws-fragments";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.ws_fragments.map(|frames_per_s| {
            super::BehaviourSpec::WsFragments(WsFragmentsSpec {
                frames_per_s,
                frame_bytes: self.ws_fragment_bytes,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_rate_and_size_are_bounded_by_name() {
        let spec = |frames_per_s, frame_bytes| WsFragmentsSpec {
            frames_per_s,
            frame_bytes,
        };
        assert!(spec(1, 1).check().is_empty());
        assert!(spec(MAX_FRAMES_PER_S, MAX_FRAGMENT_BYTES).check().is_empty());
        assert_eq!(spec(0, 0).check().len(), 2);
        let refused = spec(MAX_FRAMES_PER_S + 1, MAX_FRAGMENT_BYTES + 1).check();
        let text: Vec<String> = refused.iter().map(|e| e.to_string()).collect();
        assert!(text[0].contains("ws-fragments frames_per_s must be 1..=1000000"), "{text:?}");
        assert!(text[1].contains("ws-fragments frame_bytes must be 1..=65536"), "{text:?}");
    }
}
