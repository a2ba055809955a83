//! Plan stage: the `files` behaviour's spec: plain GETs of the static files (`/files` when the
//! suite names no path) on kept-alive connections, at full speed (a slow reader's are paced).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;

/// No settings: an empty struct, so that a setting given to it is refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesSpec {}

impl Kind for FilesSpec {
    fn is_plain(&self) -> bool {
        true
    }
    fn is_bare_request(&self) -> bool {
        true
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        None
    }
    fn path(&self) -> Option<&'static str> {
        Some("/files")
    }
}
