//! Plan stage: the `grpc-stream` behaviour's spec (spec §16): held `Subscribe` streams of
//! the service `serverlab.v1.Lab`, the fourth push transport beside long poll/comet, SSE
//! and WebSocket; with `duration_ms`, each stream's deadline (`grpc-timeout`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_stream_events, refuse, Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrpcStreamSpec {
    pub events: Vec<String>,
    /// Each stream's deadline, sent as `grpc-timeout`; the server ends the stream
    /// DEADLINE_EXCEEDED then and the slot subscribes again. None: held until the run ends.
    #[serde(default)]
    pub duration_ms: Option<u64>,
}

impl Kind for GrpcStreamSpec {
    fn check(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        check_stream_events(&self.events, &mut errors);
        if self
            .duration_ms
            .is_some_and(|d| !(1..=3_600_000).contains(&d))
        {
            errors.push(refuse("grpc-stream duration_ms must be 1..3600000"));
        }
        errors
    }
    fn is_endless(&self) -> bool {
        self.duration_ms.is_none()
    }
    fn events(&self) -> Option<&[String]> {
        Some(&self.events)
    }
    fn own_method(&self) -> Option<&'static str> {
        Some("POST")
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        None
    }
    fn needs_http2(&self) -> bool {
        true
    }
    fn path(&self) -> Option<&'static str> {
        Some("/serverlab.v1.Lab/Subscribe")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("grpc_stream_duration_ms", "duration_ms")];
        KEYS
    }
}

/// `--grpc-stream EVENTS`, and `--push-ms` for each stream's deadline.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GrpcStreamFlags {
    /// gRPC Subscribe streams of spec §16's service, subscribed to these events (comma list)
    #[arg(long, value_delimiter = ',')]
    pub grpc_stream: Option<Vec<String>>,
}

impl super::Flags for GrpcStreamFlags {
    const NAME: &'static str = "--grpc-stream";
    fn spec(&self, shared: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.grpc_stream.as_ref().map(|events| {
            super::BehaviourSpec::GrpcStream(GrpcStreamSpec {
                events: super::non_empty(events),
                duration_ms: shared.push_ms,
            })
        }))
    }
}
