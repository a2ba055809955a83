//! Plan stage: the `slow-upload` behaviour's spec: a body of `bytes` trickled at
//! `bytes_per_s`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowUploadSpec {
    pub bytes: u64,
    pub bytes_per_s: u64,
}

impl Kind for SlowUploadSpec {
    fn check(&self) -> Vec<PlanError> {
        if self.bytes == 0 || self.bytes_per_s == 0 {
            return vec![PlanError::NotPositive(
                "behaviour",
                "slow upload bytes and bytes_per_s",
            )];
        }
        Vec::new()
    }
    fn own_method(&self) -> Option<&'static str> {
        Some("POST")
    }
    fn path(&self) -> Option<&'static str> {
        Some("/upload")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("upload_bytes", "bytes"), SuiteKey::same("upload_rate_bps", "bytes_per_s")];
        KEYS
    }
}

/// `--upload-bytes` with `--upload-rate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SlowUploadFlags {
    /// Slow upload: body size in bytes (with --upload-rate)
    #[arg(long, requires = "upload_rate")]
    pub upload_bytes: Option<u64>,
    /// Slow upload: bytes per second
    #[arg(long, requires = "upload_bytes")]
    pub upload_rate: Option<u64>,
}

impl super::Flags for SlowUploadFlags {
    const NAME: &'static str = "--upload-bytes";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        let (Some(bytes), Some(bytes_per_s)) = (self.upload_bytes, self.upload_rate) else {
            return Ok(None);
        };
        Ok(Some(super::BehaviourSpec::SlowUpload(SlowUploadSpec { bytes, bytes_per_s })))
    }
}
