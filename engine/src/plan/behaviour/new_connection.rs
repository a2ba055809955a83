//! Plan stage: the `new-connection` behaviour's spec. Plain requests, each on a connection
//! of its own (`Connection: close`); no settings of its own.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;

/// No settings: an empty struct, so that a setting given to it is refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConnectionSpec {}

impl Kind for NewConnectionSpec {
    fn is_plain(&self) -> bool {
        true
    }
    fn is_bare_request(&self) -> bool {
        true
    }
    fn new_connection_each(&self) -> bool {
        true
    }
}

/// `--new-connection` (implied by `--sequential`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NewConnectionFlags {
    /// A new connection per request
    #[arg(long)]
    pub new_connection: bool,
}

impl super::Flags for NewConnectionFlags {
    const NAME: &'static str = "--new-connection";
    fn spec(&self, shared: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, super::PlanError> {
        let chosen = self.new_connection || shared.sequential;
        Ok(chosen.then_some(super::BehaviourSpec::NewConnection(NewConnectionSpec {})))
    }
}
