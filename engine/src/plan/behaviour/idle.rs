//! Plan stage: the `idle` behaviour's spec: connections opened and left, nothing sent, each
//! held until the server closes it or the run ends.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdleSpec {}

impl Kind for IdleSpec {
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
