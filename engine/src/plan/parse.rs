//! Plans read from JSON (a plan file, a `--check` line) or made for a target with every
//! default, before any rule has judged them. A refusal names the plan field it is about,
//! as `Plan::check`'s do, so that a caller can point at what set it. Read plans here rather
//! than with serde alone: `connections` defaults by pacer, which serde cannot say.

use serde_json::Value;

use super::{Plan, PlanError};

impl Plan {
    /// A plan with defaults for everything but the target.
    pub fn for_target(target: &str) -> Plan {
        Plan::from_value(serde_json::json!({ "target": target }))
            .expect("defaults of a plan always deserialize")
    }

    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        let value = serde_json::from_str(text).map_err(|e| PlanError::Json {
            field: "plan".into(),
            message: e.to_string(),
        })?;
        Plan::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Plan, PlanError> {
        let connections_given = value.get("connections").is_some();
        let mut plan: Plan = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            PlanError::Json {
                field: plan_field(&path),
                message: match path.as_str() {
                    "." => e.inner().to_string(),
                    _ => format!("{path}: {}", e.inner()),
                },
            }
        })?;
        if !connections_given {
            plan.connections = plan.pacer.pace().default_connections();
        }
        Ok(plan)
    }
}

/// The plan field a deserialization error at `path` (`pacer.kind`, `conns`, `.`) is about:
/// its first step when that is a field of a plan, else the plan as a whole.
fn plan_field(path: &str) -> String {
    let first = path.split(['.', '[']).next().unwrap_or_default();
    // Every field of a plan is written out when one is serialized.
    let fields = serde_json::to_value(Plan::for_target("http://127.0.0.1/")).unwrap_or_default();
    match fields.get(first) {
        Some(_) => first.to_string(),
        None => "plan".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_field_and_where_inside_it() {
        let err =
            Plan::from_json(r#"{"target": "http://127.0.0.1:1/", "pacer": {"kind": "open"}}"#)
                .unwrap_err();
        assert_eq!(err.field(), "pacer");
        assert!(
            err.to_string().contains("pacer: missing field `rate`"),
            "{err}"
        );
        let err = Plan::from_json(r#"{"target": "http://127.0.0.1:1/", "pacer": {"kind": "x"}}"#)
            .unwrap_err();
        assert_eq!(err.field(), "pacer");
        assert!(
            err.to_string().contains("pacer.kind: unknown variant"),
            "{err}"
        );
    }

    #[test]
    fn behaviour_kinds_are_spelt_as_suites_spell_them() {
        for kind in ["keepalive", "new-connection"] {
            let text = format!(
                r#"{{"target": "http://127.0.0.1:1/", "behaviour": {{"kind": "{kind}"}}}}"#
            );
            let plan = Plan::from_json(&text).unwrap();
            assert_eq!(serde_json::to_value(&plan.behaviour).unwrap()["kind"], kind);
        }
        let err = Plan::from_json(
            r#"{"target": "http://127.0.0.1:1/", "behaviour": {"kind": "new_connection"}}"#,
        )
        .unwrap_err();
        assert_eq!(err.field(), "behaviour");
        assert!(err.to_string().contains("`new-connection`"), "{err}");
    }

    #[test]
    fn unknown_fields_and_broken_json_are_about_the_plan() {
        for text in [
            r#"{"target":"http://127.0.0.1:1/","conns":3}"#,
            "{",
            "[]",
            r#"{}"#,
        ] {
            let err = Plan::from_json(text).unwrap_err();
            assert_eq!(err.field(), "plan", "{text}: {err}");
        }
    }

    #[test]
    fn connections_default_by_pacer_unless_given() {
        let plan = |pacer: &str, connections: &str| {
            let text =
                format!(r#"{{"target": "http://127.0.0.1:1/", "pacer": {pacer}{connections}}}"#);
            Plan::from_json(&text).unwrap().connections
        };
        assert_eq!(plan(r#"{"kind": "closed"}"#, ""), 10);
        assert_eq!(plan(r#"{"kind": "sequential"}"#, ""), 1);
        assert_eq!(
            plan(r#"{"kind": "sequential"}"#, r#", "connections": 4"#),
            4
        );
        assert_eq!(Plan::for_target("http://127.0.0.1:1/").connections, 10);
    }
}
