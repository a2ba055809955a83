//! Plan stage: the `rapid-reset` behaviour's spec (HTTP/2 Rapid Reset, CVE-2023-44487):
//! streams opened and reset at once, `streams_per_s` on each connection, which carries
//! `streams_per_connection` of them and then closes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{out_of_range, Kind, PlanError, SuiteKey};

/// The most streams opened a second on one connection: far past what the CVE's reports saw
/// from one connection, and what a worker can write.
pub const MAX_STREAMS_PER_S: u64 = 1_000_000;
/// The most streams one connection carries: client stream IDs are odd and below 2^31.
pub const MAX_STREAMS_PER_CONNECTION: u64 = (1 << 30) - 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RapidResetSpec {
    /// Streams opened (and reset) a second on each connection.
    pub streams_per_s: u64,
    /// Streams a connection carries before the engine closes it and opens the next.
    #[serde(default = "default_streams_per_connection")]
    pub streams_per_connection: u64,
}

/// nginx's `keepalive_requests`, after which it ends a connection.
fn default_streams_per_connection() -> u64 {
    1000
}

impl Default for RapidResetSpec {
    /// No rate: `check` refuses a spec that gives none.
    fn default() -> Self {
        RapidResetSpec {
            streams_per_s: 0,
            streams_per_connection: default_streams_per_connection(),
        }
    }
}

impl Kind for RapidResetSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/perf")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("streams_per_s", "streams_per_s"), SuiteKey::same("streams_per_connection", "streams_per_connection")];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        out_of_range(
            "rapid-reset",
            &[
                ("streams_per_s", self.streams_per_s, MAX_STREAMS_PER_S),
                ("streams_per_connection", self.streams_per_connection, MAX_STREAMS_PER_CONNECTION),
            ],
        )
    }
    fn writes_h2_frames(&self) -> bool {
        true
    }
}

/// `--rapid-reset RATE`, `--streams-per-connection N` (default: the spec's).
#[derive(Debug, Clone, clap::Args)]
pub struct RapidResetFlags {
    /// HTTP/2 Rapid Reset: open and at once reset this many streams a second per connection
    #[arg(long)]
    pub rapid_reset: Option<u64>,
    /// Rapid Reset: streams per connection before it is closed and the next opened
    #[arg(long, requires = "rapid_reset", default_value_t = default_streams_per_connection())]
    pub streams_per_connection: u64,
}

impl super::Flags for RapidResetFlags {
    const NAME: &'static str = "--rapid-reset";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.rapid_reset.map(|streams_per_s| {
            super::BehaviourSpec::RapidReset(RapidResetSpec {
                streams_per_s,
                streams_per_connection: self.streams_per_connection,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rapid_reset_rate_and_streams_per_connection_are_bounded() {
        let spec = |streams_per_s, streams_per_connection| RapidResetSpec {
            streams_per_s,
            streams_per_connection,
        };
        assert!(spec(1, 1).check().is_empty());
        assert!(spec(MAX_STREAMS_PER_S, MAX_STREAMS_PER_CONNECTION).check().is_empty());
        assert_eq!(spec(0, 0).check().len(), 2);
        assert_eq!(spec(MAX_STREAMS_PER_S + 1, MAX_STREAMS_PER_CONNECTION + 1).check().len(), 2);
        let refused = spec(0, 1).check();
        let text = refused[0].to_string();
        assert!(text.contains("rapid-reset streams_per_s must be 1..=1000000"), "{text}");
    }
}
