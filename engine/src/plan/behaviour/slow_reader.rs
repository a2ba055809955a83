//! Plan stage: the `slow-reader` behaviour's spec: plain requests whose answers are read
//! through a small receive buffer, a few bytes at a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowReaderSpec {
    #[serde(default = "default_rcvbuf")]
    pub rcvbuf: u32,
    pub read_bytes: usize,
    pub read_interval_ms: u64,
}

fn default_rcvbuf() -> u32 {
    4096
}

/// The plan's defaults; `read_bytes` and `read_interval_ms` have none (a plan must give
/// them), so they are 0 here, which `check` refuses.
impl Default for SlowReaderSpec {
    fn default() -> Self {
        SlowReaderSpec {
            rcvbuf: default_rcvbuf(),
            read_bytes: 0,
            read_interval_ms: 0,
        }
    }
}

/// How a slow reader reads: its receive buffer, and at most `bytes` per read every `interval`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadPace {
    pub rcvbuf: u32,
    pub bytes: usize,
    pub interval: std::time::Duration,
}

impl Kind for SlowReaderSpec {
    fn check(&self) -> Vec<PlanError> {
        if self.rcvbuf == 0 || self.read_bytes == 0 || self.read_interval_ms == 0 {
            return vec![PlanError::NotPositive(
                "behaviour",
                "slow reader rcvbuf, read_bytes and read_interval_ms",
            )];
        }
        Vec::new()
    }
    fn is_plain(&self) -> bool {
        true
    }
    fn read_pace(&self) -> Option<ReadPace> {
        Some(ReadPace {
            rcvbuf: self.rcvbuf,
            bytes: self.read_bytes,
            interval: std::time::Duration::from_millis(self.read_interval_ms),
        })
    }
    fn path(&self) -> Option<&'static str> {
        Some("/files")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::derived("read_rate_bps", "read_interval_ms")];
        KEYS
    }
}

/// `--read-bytes` with `--read-interval`, and `--rcvbuf` (default: the spec's).
#[derive(Debug, Clone, clap::Args)]
pub struct SlowReaderFlags {
    /// Slow reader: bytes per read (with --read-interval)
    #[arg(long, requires = "read_interval")]
    pub read_bytes: Option<usize>,
    /// Slow reader: pause before each read (e.g. 10ms)
    #[arg(long, value_parser = crate::plan::parse_duration, requires = "read_bytes")]
    pub read_interval: Option<std::time::Duration>,
    /// Slow reader: socket receive buffer in bytes
    #[arg(long, requires = "read_bytes", default_value_t = default_rcvbuf())]
    pub rcvbuf: u32,
}

impl super::Flags for SlowReaderFlags {
    const NAME: &'static str = "--read-bytes";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        let (Some(read_bytes), Some(interval)) = (self.read_bytes, self.read_interval) else {
            return Ok(None);
        };
        Ok(Some(super::BehaviourSpec::SlowReader(SlowReaderSpec {
            rcvbuf: self.rcvbuf,
            read_bytes,
            read_interval_ms: interval.as_millis() as u64,
        })))
    }
}
