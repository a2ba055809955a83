//! Plan stage: the `sse` behaviour's spec: the events streamed, the heartbeat asked of the
//! server, and the stream's length if it is to end before the run does.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_stream_events, refuse, Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SseSpec {
    pub events: Vec<String>,
    #[serde(default)]
    pub heartbeat_ms: Option<u64>,
    #[serde(default)]
    pub duration_ms: Option<u64>,
}

impl Kind for SseSpec {
    fn check(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        check_stream_events(&self.events, &mut errors);
        let heartbeat = self.heartbeat_ms;
        if heartbeat.is_some_and(|h| h != 0 && !(10..=3_600_000).contains(&h)) {
            errors.push(refuse("sse heartbeat_ms must be 0 or 10..3600000"));
        }
        if self
            .duration_ms
            .is_some_and(|d| !(1..=3_600_000).contains(&d))
        {
            errors.push(refuse("sse duration_ms must be 1..3600000"));
        }
        errors
    }
    fn is_endless(&self) -> bool {
        self.duration_ms.is_none()
    }
    fn events(&self) -> Option<&[String]> {
        Some(&self.events)
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        None
    }
    fn path(&self) -> Option<&'static str> {
        Some("/sse")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("heartbeat_ms", "heartbeat_ms")];
        KEYS
    }
}

/// `--sse EVENTS`, `--heartbeat-ms`, and `--push-ms` for a stream that ends before the run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SseFlags {
    /// Server-Sent Events stream from the target, subscribed to these events (comma list)
    #[arg(long, value_delimiter = ',')]
    pub sse: Option<Vec<String>>,
    /// SSE heartbeat interval asked of the server (0: none)
    #[arg(long, requires = "sse")]
    pub heartbeat_ms: Option<u64>,
}

impl super::Flags for SseFlags {
    const NAME: &'static str = "--sse";
    fn spec(&self, shared: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.sse.as_ref().map(|events| {
            super::BehaviourSpec::Sse(SseSpec {
                events: super::non_empty(events),
                heartbeat_ms: self.heartbeat_ms,
                duration_ms: shared.push_ms,
            })
        }))
    }
}
