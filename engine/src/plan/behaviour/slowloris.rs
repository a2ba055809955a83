//! Plan stage: the `slowloris` behaviour's spec: a request's header section trickled, one
//! header line every `interval_ms`, never completed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{out_of_range, Kind, PlanError, SuiteKey};

/// The longest pause between two header lines: 10 minutes (a server's header timeout is
/// seconds to minutes; a longer pause tests nothing more).
pub const MAX_LINE_INTERVAL_MS: u64 = 600_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowlorisSpec {
    /// The pause before each header line after the request line (slowhttptest's `-i`, in ms).
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
}

/// slowhttptest's default interval (`-i 10`).
fn default_interval_ms() -> u64 {
    10_000
}

impl Default for SlowlorisSpec {
    fn default() -> Self {
        SlowlorisSpec {
            interval_ms: default_interval_ms(),
        }
    }
}

impl Kind for SlowlorisSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/perf")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("header_interval_ms", "interval_ms")];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        out_of_range(
            "slowloris",
            &[("interval_ms", self.interval_ms, MAX_LINE_INTERVAL_MS)],
        )
    }
    /// Held until the server ends it or the run does.
    fn is_endless(&self) -> bool {
        true
    }
}

/// `--slowloris-every 10s`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SlowlorisFlags {
    /// Slowloris: a request's headers trickled, one line this often (e.g. 10s), never ended
    #[arg(long, value_parser = crate::plan::parse_duration)]
    pub slowloris_every: Option<std::time::Duration>,
}

impl super::Flags for SlowlorisFlags {
    const NAME: &'static str = "--slowloris-every";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.slowloris_every.map(|every| {
            super::BehaviourSpec::Slowloris(SlowlorisSpec {
                interval_ms: every.as_millis() as u64,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slowloris_pause_is_bounded_on_both_sides() {
        for (interval_ms, errors) in [(0, 1), (1, 0), (MAX_LINE_INTERVAL_MS, 0), (MAX_LINE_INTERVAL_MS + 1, 1)] {
            assert_eq!(SlowlorisSpec { interval_ms }.check().len(), errors, "{interval_ms}");
        }
    }
}
