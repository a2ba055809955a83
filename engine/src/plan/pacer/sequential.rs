//! Plan stage: the `sequential` pacer: one connection at a time, the next opened after the
//! last one closed (seed 000 Test 1).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Clients, Pace, PaceFlags, PacerSpec, PlanView, Share};
use crate::plan::PlanError;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SequentialSpec {}

impl Pace for SequentialSpec {
    fn takes_warmup_phase(&self) -> bool {
        true
    }
    fn check(&self, plan: &PlanView) -> Result<(), PlanError> {
        if plan.connections != 1 {
            return Err(PlanError::Contradiction(
                "connections",
                format!(
                    "sequential pacing runs one connection at a time: connections must be 1, not {}",
                    plan.connections
                ),
            ));
        }
        if !plan.new_connection_each {
            return Err(PlanError::Contradiction(
                "behaviour",
                "sequential pacing opens one connection per request: use --new-connection".into(),
            ));
        }
        Ok(())
    }
    /// 1: one connection at a time.
    fn default_connections(&self) -> u64 {
        1
    }
    fn suits_io_uring(&self) -> bool {
        true
    }
    fn waits_for_close(&self) -> bool {
        true
    }
    fn clients_label(&self) -> Option<String> {
        Some("1 connection at a time".into())
    }
    fn latency_bound(&self, _: &PlanView) -> bool {
        true
    }
    fn concurrency(&self, _: &PlanView) -> Option<u64> {
        Some(1)
    }
    fn clients(&self, _: &PlanView, share: &Share) -> Clients {
        Clients::back_to_back(share.mine(1).map(|_| share.start))
    }
}

/// `--sequential` (which also makes plain requests a new connection each).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SequentialFlags {
    /// One connection at a time, the next after the last closed (implies --new-connection)
    #[arg(long)]
    pub sequential: bool,
}

impl PaceFlags for SequentialFlags {
    const NAME: &'static str = "--sequential";
    fn spec(&self) -> Option<PacerSpec> {
        self.sequential
            .then_some(PacerSpec::Sequential(SequentialSpec {}))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{chosen, from_json};
    use serde_json::json;

    #[test]
    fn the_sequential_flag_makes_the_spec_its_plan_json_makes() {
        let spec = from_json(json!({"kind": "sequential"}));
        assert_eq!(chosen(&["--sequential"]).unwrap(), vec![spec]);
    }
}
