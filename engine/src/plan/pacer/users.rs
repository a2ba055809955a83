//! Plan stage: the `users` pacer: a JMeter thread group, `users` users started evenly over
//! `ramp_up_s` and all stopped at `ramp_up_s + hold_s`, each looping its behaviour.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    seconds_of, Clients, Pace, PaceFlags, PacerSpec, PlanView, Search, Share,
    FEW_CONNECTIONS,
};
use crate::pacer::user_start;
use crate::plan::{PlanError, SuiteKey};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsersSpec {
    pub users: u64,
    pub ramp_up_s: f64,
    pub hold_s: f64,
    #[serde(default)]
    pub offset_s: f64,
}

impl Pace for UsersSpec {
    fn check(&self, _: &PlanView) -> Result<(), PlanError> {
        match self.users {
            0 => Err(PlanError::NotPositive("users", "users")),
            _ => Ok(()),
        }
    }
    fn seconds(&self) -> Option<f64> {
        Some(self.ramp_up_s + self.hold_s)
    }
    fn offset_s(&self) -> f64 {
        self.offset_s
    }
    fn users(&self) -> Option<u64> {
        Some(self.users)
    }
    fn own_stop(&self, plan: &PlanView) -> Option<Result<Duration, PlanError>> {
        Some(self.stop(plan))
    }
    fn clients_label(&self) -> Option<String> {
        Some(format!("{} user(s)", self.users))
    }
    fn latency_bound(&self, _: &PlanView) -> bool {
        self.users <= FEW_CONNECTIONS
    }
    fn concurrency(&self, _: &PlanView) -> Option<u64> {
        Some(self.users)
    }
    fn clients(&self, _: &PlanView, share: &Share) -> Clients {
        let ramp = Duration::from_secs_f64(self.ramp_up_s);
        let offset = Duration::from_secs_f64(self.offset_s);
        let starts = share
            .mine(self.users)
            .map(|user| user_start(share.start, offset, user, self.users, ramp));
        Clients::back_to_back(starts)
    }
}

impl UsersSpec {
    /// The run lasts `ramp_up_s + hold_s`, which the plan must not restate.
    fn stop(&self, plan: &PlanView) -> Result<Duration, PlanError> {
        if plan.requests.is_some() || plan.duration_s.is_some() {
            return Err(PlanError::Contradiction(
                "pacer",
                "users pacer runs for ramp_up_s + hold_s; do not give -n or -d".into(),
            ));
        }
        let (ramp_up_s, hold_s) = (self.ramp_up_s, self.hold_s);
        let total = ramp_up_s + hold_s;
        if !(total.is_finite() && total > 0.0 && ramp_up_s >= 0.0 && hold_s >= 0.0) {
            return Err(PlanError::Contradiction(
                "pacer",
                format!("users pacer: ramp_up_s = {ramp_up_s} and hold_s = {hold_s} must not be negative, and their sum must be positive"),
            ));
        }
        Ok(Duration::from_secs_f64(total))
    }
}

/// `--users N` with `--ramp-up` and `--hold`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UsersFlags {
    /// JMeter-style users, each looping its behaviour (with --ramp-up and --hold)
    #[arg(long)]
    pub users: Option<u64>,
    /// Users: start them evenly over this long (e.g. 10s); default 0, all at once
    #[arg(long, value_parser = crate::plan::parse_duration, requires = "users")]
    pub ramp_up: Option<Duration>,
    /// Users: keep them all running this long after the ramp-up (e.g. 30s); default 0
    #[arg(long, value_parser = crate::plan::parse_duration, requires = "users")]
    pub hold: Option<Duration>,
}

impl PaceFlags for UsersFlags {
    const NAME: &'static str = "--users";
    /// Each always written, as a number of its type, 0 s of ramp-up and hold and 1 user
    /// where the suite gives none (the planner shapes them). The suite's `clients` is last:
    /// a refusal of the pacer rather means its times.
    const SUITE_KEYS: &'static [SuiteKey] = &[
        SuiteKey::derived("ramp_up_s", "ramp_up_s"),
        SuiteKey::derived("duration_s", "hold_s"),
        SuiteKey::derived("clients", "users"),
    ];
    /// A push capacity search ramps and holds more subscribers at each step.
    const SEARCH: Option<Search> = Some(Search {
        counts: "clients",
        sets: "users",
    });
    fn spec(&self) -> Option<PacerSpec> {
        let users = self.users?;
        Some(PacerSpec::Users(UsersSpec {
            users,
            ramp_up_s: seconds_of(self.ramp_up),
            hold_s: seconds_of(self.hold),
            offset_s: 0.0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{chosen, from_json};
    use serde_json::json;

    /// `--users` and its settings' flags make the spec a plan file makes from the same
    /// settings, 0 s of ramp-up and hold where not given.
    #[test]
    fn the_users_flags_make_the_spec_its_plan_json_makes() {
        let cases: [(&[&str], serde_json::Value); 2] = [
            (
                &["--users", "4"],
                json!({"kind": "users", "users": 4, "ramp_up_s": 0.0, "hold_s": 0.0}),
            ),
            (
                &["--users", "4", "--ramp-up", "10s", "--hold", "500ms"],
                json!({"kind": "users", "users": 4, "ramp_up_s": 10.0, "hold_s": 0.5}),
            ),
        ];
        for (flags, plan) in cases {
            assert_eq!(chosen(flags).unwrap(), vec![from_json(plan)], "{flags:?}");
        }
        for flags in [["--ramp-up", "1s"], ["--hold", "1s"]] {
            assert!(chosen(&flags).is_err(), "{flags:?} without --users");
        }
    }
}
