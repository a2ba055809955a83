//! Plan stage: the `comet` behaviour's spec: the events streamed and, if the stream is to
//! end before the run does, its length.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_events, Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CometSpec {
    pub events: Vec<String>,
    #[serde(default)]
    pub duration_ms: Option<u64>,
}

impl Kind for CometSpec {
    fn check(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        check_events(&self.events, &mut errors);
        if self.duration_ms == Some(0) {
            errors.push(PlanError::NotPositive("behaviour", "comet duration_ms"));
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
    fn path(&self) -> Option<&'static str> {
        Some("/push")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("comet_duration_ms", "duration_ms")];
        KEYS
    }
}

/// `--comet EVENTS`, with `--push-ms` for a stream that ends before the run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CometFlags {
    /// Comet stream from the target, subscribed to these events (comma list)
    #[arg(long, value_delimiter = ',')]
    pub comet: Option<Vec<String>>,
}

impl super::Flags for CometFlags {
    const NAME: &'static str = "--comet";
    fn spec(&self, shared: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.comet.as_ref().map(|events| {
            super::BehaviourSpec::Comet(CometSpec {
                events: super::non_empty(events),
                duration_ms: shared.push_ms,
            })
        }))
    }
}
