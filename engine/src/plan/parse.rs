//! Plans read from JSON (a plan file, a `--check` line) or made for a target with every
//! default, before any rule has judged them.

use super::{Plan, PlanError};

impl Plan {
    /// A plan with defaults for everything but the target.
    pub fn for_target(target: &str) -> Plan {
        serde_json::from_value(serde_json::json!({ "target": target }))
            .expect("defaults of a plan always deserialize")
    }

    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        serde_json::from_str(text).map_err(|e| PlanError::PlanFile(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_plan_fields_are_refused() {
        assert!(Plan::from_json(r#"{"target":"http://127.0.0.1:1/","conns":3}"#).is_err());
    }
}
