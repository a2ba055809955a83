//! Plan stage: HTTP/2 under the behaviour (issue 22). `h2` is HTTP/2 over TLS, agreed by
//! ALPN on an `https://` target; `h2c` is cleartext HTTP/2 with prior knowledge on an
//! `http://` target. `streams` is how many streams each connection carries at once, as
//! h2load's `-m`: a closed loop of `connections` × `streams` clients, `streams` of them
//! sharing each connection. Requests (kept alive or a new connection each), long polls,
//! comet and SSE streams go over HTTP/2, each exchange one stream. Every rule an HTTP/2
//! plan breaks is told at once, in one line (`http2_check`, which reads the rest of the plan;
//! this file holds only what a plan says, so that `types` can hold it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most streams one connection carries at once (servers commonly allow 100 to 250).
pub const MAX_STREAMS: u64 = 1000;

/// HTTP/2 settings; absent, the plan speaks HTTP/1.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Http2Spec {
    /// `h2` (over TLS, by ALPN) or `h2c` (cleartext, prior knowledge).
    pub mode: Http2Mode,
    /// Concurrent streams per connection (h2load's `-m`).
    #[serde(default = "default_streams")]
    pub streams: u64,
}

fn default_streams() -> u64 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Http2Mode {
    H2,
    H2c,
}
