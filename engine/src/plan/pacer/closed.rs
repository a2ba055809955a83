//! Plan stage: the `closed` pacer: `connections` slots, each starting its next request as
//! soon as the last one ended. The default, and what the flags make without a pacer flag.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Clients, Pace, PaceFlags, PacerSpec, PlanView, Share, FEW_CONNECTIONS};
use crate::plan::PlanError;

// Pacers without settings are empty structs, not unit variants, so that a setting given to
// a pacer that takes none (`rate` for `closed`) is refused rather than silently dropped:
// serde ignores extra fields beside the tag of a unit variant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClosedSpec {}

impl Pace for ClosedSpec {
    fn takes_warmup_phase(&self) -> bool {
        true
    }
    fn check(&self, plan: &PlanView) -> Result<(), PlanError> {
        match plan.requests {
            Some(n) if n < plan.connections => Err(PlanError::Contradiction(
                "connections",
                format!(
                    "{n} requests cannot keep {} connections busy; lower -c",
                    plan.connections
                ),
            )),
            _ => Ok(()),
        }
    }
    fn fills_connections(&self, _: &PlanView) -> bool {
        true
    }
    fn suits_io_uring(&self) -> bool {
        true
    }
    fn latency_bound(&self, plan: &PlanView) -> bool {
        plan.connections <= FEW_CONNECTIONS
    }
    fn concurrency(&self, plan: &PlanView) -> Option<u64> {
        Some(plan.connections * plan.streams)
    }
    fn clients(&self, plan: &PlanView, share: &Share) -> Clients {
        // HTTP/2: `streams` clients to each connection (1 otherwise).
        let slots = share.mine(plan.connections).flat_map(|_| 0..plan.streams);
        Clients::back_to_back(slots.map(|_| share.start))
    }
}

/// No flags: the pacer of a command line that names none.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClosedFlags {}

impl PaceFlags for ClosedFlags {
    const NAME: &'static str = "";
    fn spec(&self) -> Option<PacerSpec> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{chosen, from_json};
    use super::*;
    use serde_json::json;

    /// No pacer flag chooses none, and the plan's pacer is then closed, which takes no
    /// setting.
    #[test]
    fn no_pacer_flag_leaves_the_closed_default_which_takes_no_setting() {
        assert!(chosen(&[]).unwrap().is_empty());
        assert_eq!(from_json(json!({"kind": "closed"})), PacerSpec::default());
        let rate_for_closed = json!({"kind": "closed", "rate": 5.0});
        assert!(serde_json::from_value::<PacerSpec>(rate_for_closed).is_err());
    }
}
