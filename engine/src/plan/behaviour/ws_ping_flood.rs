//! Plan stage: the `ws-ping-flood` behaviour's spec: after the WebSocket upgrade, pings
//! `pings_per_s` a connection, each carrying its number, the server's pongs counted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ws_fragments::MAX_FRAMES_PER_S;
use super::ws_oversized::WS_OVER_H2;
use super::{out_of_range, Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WsPingFloodSpec {
    /// Pings written a second on each connection.
    pub pings_per_s: u64,
}

impl Kind for WsPingFloodSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/ws")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("ws_pings_per_s", "pings_per_s")];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        out_of_range("ws-ping-flood", &[("pings_per_s", self.pings_per_s, MAX_FRAMES_PER_S)])
    }
    /// Pings go until the server ends the connection or the run ends.
    fn is_endless(&self) -> bool {
        true
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        Some(WS_OVER_H2)
    }
}

/// `--ws-ping-flood RATE`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WsPingFloodFlags {
    /// WebSocket: pings at this many a second per connection, pongs counted
    #[arg(long)]
    pub ws_ping_flood: Option<u64>,
}

impl super::Flags for WsPingFloodFlags {
    const NAME: &'static str = "--ws-ping-flood";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self
            .ws_ping_flood
            .map(|pings_per_s| super::BehaviourSpec::WsPingFlood(WsPingFloodSpec { pings_per_s })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_rate_is_bounded_by_name() {
        for (pings_per_s, errors) in [(0, 1), (1, 0), (MAX_FRAMES_PER_S, 0), (MAX_FRAMES_PER_S + 1, 1)] {
            assert_eq!(WsPingFloodSpec { pings_per_s }.check().len(), errors, "{pings_per_s}");
        }
        let text = WsPingFloodSpec { pings_per_s: 0 }.check()[0].to_string();
        assert!(text.contains("ws-ping-flood pings_per_s must be 1..=1000000"), "{text}");
    }
}
