//! Plan stage: the `idle` behaviour's spec: connections opened and left, nothing sent, each
//! held until the server closes it or the run ends.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdleSpec {}

impl Kind for IdleSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/perf")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    /// Held until the server ends it or the run does.
    fn is_endless(&self) -> bool {
        true
    }
}

/// `--idle`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct IdleFlags {
    /// Idle connections: open -c connections, send nothing, hold each until the run ends
    #[arg(long)]
    pub idle: bool,
}

impl super::Flags for IdleFlags {
    const NAME: &'static str = "--idle";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.idle.then_some(super::BehaviourSpec::Idle(IdleSpec {})))
    }
}
