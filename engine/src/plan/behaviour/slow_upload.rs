//! Plan stage: the `slow-upload` behaviour's spec: a body of `bytes` trickled at
//! `bytes_per_s`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError};

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
}
