//! Plan stage: the `continuation-flood` behaviour's spec (CVE-2024-27316 and its kin): an
//! HTTP/2 request's header block that never ends, CONTINUATION frames of `frame_bytes`
//! written `frames_per_s` a connection.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rapid_reset::MAX_STREAMS_PER_S;
use super::{out_of_range, refuse, Kind, PlanError, SuiteKey};

/// A frame's payload is whole header fields of this many bytes each.
pub const FIELD_BYTES: u64 = 64;
/// The largest frame a peer must accept without asking (SETTINGS_MAX_FRAME_SIZE's initial
/// value).
pub const MAX_FRAME_BYTES: u64 = 16_384;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinuationFloodSpec {
    /// CONTINUATION frames written a second on each connection.
    pub frames_per_s: u64,
    /// Each frame's payload: a multiple of 64 bytes (whole 64-byte header fields), 64 to
    /// 16,384.
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
}

fn default_frame_bytes() -> u64 {
    MAX_FRAME_BYTES
}

impl Default for ContinuationFloodSpec {
    /// No rate: `check` refuses a spec that gives none.
    fn default() -> Self {
        ContinuationFloodSpec {
            frames_per_s: 0,
            frame_bytes: default_frame_bytes(),
        }
    }
}

impl Kind for ContinuationFloodSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/perf")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("frames_per_s", "frames_per_s"), SuiteKey::same("frame_bytes", "frame_bytes")];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn check(&self) -> Vec<PlanError> {
        let bounds = [("frames_per_s", self.frames_per_s, MAX_STREAMS_PER_S)];
        let mut errors = out_of_range("continuation-flood", &bounds);
        let sizes = FIELD_BYTES..=MAX_FRAME_BYTES;
        if !sizes.contains(&self.frame_bytes) || !self.frame_bytes.is_multiple_of(FIELD_BYTES) {
            errors.push(refuse(format!(
                "continuation-flood frame_bytes must be a multiple of {FIELD_BYTES} in \
                 {FIELD_BYTES}..={MAX_FRAME_BYTES}"
            )));
        }
        errors
    }
    /// The header block never ends: held until the server ends it or the run does.
    fn is_endless(&self) -> bool {
        true
    }
    fn writes_h2_frames(&self) -> bool {
        true
    }
}

/// `--continuation-flood RATE`, `--frame-bytes N` (default: the spec's).
#[derive(Debug, Clone, clap::Args)]
pub struct ContinuationFloodFlags {
    /// HTTP/2 CONTINUATION flood: a header block never ended, this many frames a second per
    /// connection
    #[arg(long)]
    pub continuation_flood: Option<u64>,
    /// CONTINUATION flood: each frame's payload in bytes (a multiple of 64, at most 16384)
    #[arg(long, requires = "continuation_flood", default_value_t = default_frame_bytes())]
    pub frame_bytes: u64,
}

impl super::Flags for ContinuationFloodFlags {
    const NAME: &'static str = "--continuation-flood";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.continuation_flood.map(|frames_per_s| {
            super::BehaviourSpec::ContinuationFlood(ContinuationFloodSpec {
                frames_per_s,
                frame_bytes: self.frame_bytes,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_floods_rate_and_frame_size_are_bounded() {
        let spec = |frames_per_s, frame_bytes| ContinuationFloodSpec {
            frames_per_s,
            frame_bytes,
        };
        assert!(spec(1, 64).check().is_empty());
        assert!(spec(MAX_STREAMS_PER_S, MAX_FRAME_BYTES).check().is_empty());
        assert_eq!(spec(0, 0).check().len(), 2);
        assert_eq!(spec(MAX_STREAMS_PER_S + 1, MAX_FRAME_BYTES + 64).check().len(), 2);
        assert_eq!(spec(1, 100).check().len(), 1, "not a multiple of 64");
    }
}
