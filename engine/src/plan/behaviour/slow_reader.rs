//! Plan stage: the `slow-reader` behaviour's spec: plain requests whose answers are read
//! through a small receive buffer, a few bytes at a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError};

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
}
