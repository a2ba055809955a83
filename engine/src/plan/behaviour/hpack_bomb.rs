//! Plan stage: the `hpack-bomb` behaviour's spec: an HTTP/2 header field stored once in the
//! server's HPACK dynamic table, then referenced `references` times in every request, one
//! byte each, `streams_per_s` a connection.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rapid_reset::{MAX_STREAMS_PER_CONNECTION, MAX_STREAMS_PER_S};
use super::{out_of_range, Kind, PlanError, SuiteKey};

/// The most references in one request: its HEADERS frame stays within 16,384 bytes (the
/// stored field, ~4 KB, goes in the first).
pub const MAX_REFERENCES: u64 = 12_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HpackBombSpec {
    /// Requests (streams) a second on each connection.
    pub streams_per_s: u64,
    /// Streams a connection carries before the engine closes it and opens the next.
    #[serde(default = "default_streams_per_connection")]
    pub streams_per_connection: u64,
    /// References to the stored field in each request (1 byte each, ~4 KB decoded each).
    #[serde(default = "default_references")]
    pub references: u64,
}

fn default_streams_per_connection() -> u64 {
    100
}

fn default_references() -> u64 {
    MAX_REFERENCES
}

impl Default for HpackBombSpec {
    /// No rate: `check` refuses a spec that gives none.
    fn default() -> Self {
        HpackBombSpec {
            streams_per_s: 0,
            streams_per_connection: default_streams_per_connection(),
            references: default_references(),
        }
    }
}

impl Kind for HpackBombSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/perf")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("streams_per_s", "streams_per_s"), SuiteKey::same("streams_per_connection", "streams_per_connection"), SuiteKey::same("hpack_references", "references")];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        out_of_range(
            "hpack-bomb",
            &[
                ("streams_per_s", self.streams_per_s, MAX_STREAMS_PER_S),
                ("streams_per_connection", self.streams_per_connection, MAX_STREAMS_PER_CONNECTION),
                ("references", self.references, MAX_REFERENCES),
            ],
        )
    }
    fn writes_h2_frames(&self) -> bool {
        true
    }
}

/// `--hpack-bomb RATE`, `--references N` (and Rapid Reset's `--streams-per-connection`).
#[derive(Debug, Clone, clap::Args)]
pub struct HpackBombFlags {
    /// HPACK bomb: requests a second per connection, each referencing one stored ~4 KB
    /// header field --references times
    #[arg(long)]
    pub hpack_bomb: Option<u64>,
    /// HPACK bomb: references to the stored field in each request
    #[arg(long, requires = "hpack_bomb", default_value_t = default_references())]
    pub references: u64,
    /// HPACK bomb: streams per connection before it is closed and the next opened
    #[arg(long, requires = "hpack_bomb", default_value_t = default_streams_per_connection())]
    pub bomb_streams_per_connection: u64,
}

impl super::Flags for HpackBombFlags {
    const NAME: &'static str = "--hpack-bomb";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.hpack_bomb.map(|streams_per_s| {
            super::BehaviourSpec::HpackBomb(HpackBombSpec {
                streams_per_s,
                streams_per_connection: self.bomb_streams_per_connection,
                references: self.references,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hpack_bombs_rate_streams_and_references_are_bounded() {
        let spec = |streams_per_s, streams_per_connection, references| HpackBombSpec {
            streams_per_s,
            streams_per_connection,
            references,
        };
        assert!(spec(1, 1, 1).check().is_empty());
        assert!(spec(MAX_STREAMS_PER_S, 1, MAX_REFERENCES).check().is_empty());
        assert_eq!(spec(0, 0, 0).check().len(), 3);
        assert_eq!(spec(1, 1, MAX_REFERENCES + 1).check().len(), 1);
    }
}
