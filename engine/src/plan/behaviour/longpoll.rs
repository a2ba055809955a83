//! Plan stage: the `longpoll` behaviour's spec: the events polled and the poll's length.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_events, refuse, Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LongpollSpec {
    pub events: Vec<String>,
    pub duration_ms: u64,
}

impl Kind for LongpollSpec {
    fn check(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        check_events(&self.events, &mut errors);
        if !(1..=3_600_000).contains(&self.duration_ms) {
            errors.push(refuse("long poll duration_ms must be 1..3600000"));
        }
        errors
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
        const KEYS: &[SuiteKey] = &[SuiteKey::same("longpoll_duration_ms", "duration_ms")];
        KEYS
    }
}

/// `--longpoll EVENTS` with `--push-ms` (the poll's timeout, which has no default).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LongpollFlags {
    /// Long poll the target, subscribed to these events (comma list; may be empty: "")
    #[arg(long, value_delimiter = ',')]
    pub longpoll: Option<Vec<String>>,
}

impl super::Flags for LongpollFlags {
    const NAME: &'static str = "--longpoll";
    fn spec(&self, shared: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        let Some(events) = &self.longpoll else {
            return Ok(None);
        };
        let duration_ms = shared.push_ms.ok_or_else(|| {
            PlanError::Contradiction("flags", "--longpoll needs --push-ms (the poll timeout)".into())
        })?;
        let events = super::non_empty(events);
        Ok(Some(super::BehaviourSpec::Longpoll(LongpollSpec { events, duration_ms })))
    }
}
