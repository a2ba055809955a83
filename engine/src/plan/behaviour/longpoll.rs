//! Plan stage: the `longpoll` behaviour's spec: the events polled and the poll's length.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_events, refuse, Kind, PlanError};

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
}
