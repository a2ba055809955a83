//! Plan stage: the `keepalive` behaviour's spec. Plain requests on kept-alive connections;
//! it takes no settings of its own (the plan's method, body and paths make its requests).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;

/// No settings: an empty struct, so that a setting given to it is refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeepaliveSpec {}

impl Kind for KeepaliveSpec {
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
        Some("/perf")
    }
}
