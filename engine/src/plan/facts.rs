//! Plan stage: the engine's facts as data (`serverlab-load --print-facts`), so that the
//! orchestrator reads what each behaviour and pacer is rather than restating it. Each spec
//! says its own (a behaviour through `Kind`, a pacer through its schema and flags, both from
//! their lists, `with_kinds!` and `with_pacers!`); this file reads each key's type and
//! default from the spec's JSON schema and lays the facts out.

use schemars::JsonSchema;
use serde_json::{json, Value};

use super::{BehaviourSpec, PacerSpec};

/// Every behaviour's and pacer's facts, as the JSON `--print-facts` prints.
pub fn engine_facts() -> String {
    let facts = json!({
        "behaviours": BehaviourSpec::defaults()
            .into_iter()
            .map(|(spec, schema)| behaviour(spec, &schema))
            .collect::<Vec<_>>(),
        "pacers": pacer_facts(),
    });
    serde_json::to_string_pretty(&facts).unwrap_or_default() + "\n"
}

/// The facts of one behaviour, asked of its spec with its default settings.
fn behaviour(spec: BehaviourSpec, schema: &Value) -> Value {
    let kind = spec.kind();
    let h2 = kind.http2_refusal().is_none();
    let keys: Vec<Value> = kind
        .suite_keys()
        .iter()
        .map(|key| {
            let (ty, default) = key_type(schema, schema, key.plan);
            json!({"suite": key.suite, "plan": key.plan, "type": ty, "default": default,
                   "derived": key.derived})
        })
        .collect();
    json!({
        "name": serde_json::to_value(&spec).unwrap_or_default()["kind"],
        "path": kind.path(),
        "method": kind.own_method(),
        "push": kind.events().is_some(),
        "http": kind.needs_http(),
        "datagram": kind.is_datagram(),
        "tls": !kind.is_datagram(),
        "h2": h2,
        "streams": h2 && !kind.new_connection_each(),
        "own_h2_frames": kind.writes_h2_frames(),
        "bare": kind.is_bare_request(),
        "searchable": kind.is_rate_searchable(),
        "keys": keys,
    })
}

/// Each pacer's name, naming flag, capacity search and plan keys (type, default, whether
/// required, and the suite key that sets it), read from the plan enum's schema, whose
/// variants come in `with_pacers!`'s order as `PacerSpec::facts` does. The keys a suite sets
/// come first, in the pacer's order; the rest (none a suite sets) after, by name.
fn pacer_facts() -> Vec<Value> {
    let schema = schema_of::<PacerSpec>();
    let variants = schema["oneOf"].as_array().cloned().unwrap_or_default();
    variants
        .iter()
        .zip(PacerSpec::facts())
        .map(|(variant, facts)| {
            let variant = resolve(&schema, variant);
            let required = variant["required"].as_array().cloned().unwrap_or_default();
            let set = facts.suite_keys.iter().map(|key| (key.plan, Some(key)));
            let unset = properties(variant)
                .map(|(name, _)| name)
                .filter(|name| *name != "kind" && facts.suite_keys.iter().all(|k| k.plan != *name))
                .map(|name| (name, None));
            let keys: Vec<Value> = set
                .chain(unset)
                .map(|(name, key)| {
                    let (ty, default) = key_type(&schema, variant, name);
                    json!({"plan": name, "type": ty, "default": default,
                           "required": required.contains(&json!(name)),
                           "suite": key.map(|k| k.suite), "derived": key.is_some_and(|k| k.derived)})
                })
                .collect();
            json!({
                "name": variant["properties"]["kind"]["enum"][0],
                "flag": (!facts.flag.is_empty()).then_some(facts.flag),
                "search": facts.search.map(|s| json!({"counts": s.counts, "sets": s.sets})),
                "keys": keys,
            })
        })
        .collect()
}

/// The JSON schema of a spec.
fn schema_of<S: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(S)).unwrap_or_default()
}

fn properties(node: &Value) -> impl Iterator<Item = (&str, &Value)> {
    node["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
}

/// The type (`integer`, `number`, `string`, `boolean`, `object`, `array`) and default of the
/// key at `path` (dots step into objects) of the object `node` of a spec's schema `root`;
/// `null` where the schema has no default.
fn key_type<'a>(root: &'a Value, mut node: &'a Value, path: &str) -> (Value, Value) {
    let mut default = Value::Null;
    for step in path.split('.') {
        let field = &resolve(root, node)["properties"][step];
        default = field.get("default").cloned().unwrap_or(Value::Null);
        node = field;
    }
    (type_of(resolve(root, node)), default)
}

/// The node a reference, an `Option`'s `anyOf [T, null]` or an `allOf [T]` stands for.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    if let Some(name) = node["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        return resolve(root, &root["definitions"][name]);
    }
    for combined in ["allOf", "anyOf", "oneOf"] {
        let first = node[combined]
            .as_array()
            .and_then(|all| all.iter().find(|n| n["type"] != "null"));
        if let Some(first) = first {
            return resolve(root, first);
        }
    }
    node
}

/// A schema node's one type that is not `null`; an enum of names is a string.
fn type_of(node: &Value) -> Value {
    match &node["type"] {
        Value::String(ty) => json!(ty),
        Value::Array(types) => types
            .iter()
            .find(|t| *t != "null")
            .cloned()
            .unwrap_or(Value::Null),
        _ if node["enum"].is_array() => json!("string"),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
        let all = list.as_array().unwrap();
        all.iter().find(|b| b["name"] == name).unwrap()
    }

    fn key<'a>(facts: &'a Value, plan: &str) -> &'a Value {
        let keys = facts["keys"].as_array().unwrap();
        keys.iter().find(|k| k["plan"] == plan).unwrap()
    }

    /// A behaviour's facts are its spec's answers and its schema's types and defaults,
    /// through references (`publish`) and enums of names (`transport`).
    #[test]
    fn a_behaviours_facts_are_its_specs_answers_and_its_schemas_types() {
        let facts: Value = serde_json::from_str(&engine_facts()).unwrap();
        let behaviours = &facts["behaviours"];
        let poll = named(behaviours, "longpoll");
        assert_eq!(poll["method"], "POST");
        assert_eq!(
            (&poll["push"], &poll["h2"], &poll["path"]),
            (&json!(true), &json!(true), &json!("/push"))
        );
        assert_eq!(key(poll, "duration_ms")["type"], "integer");
        let syslog = named(behaviours, "syslog");
        assert_eq!(
            (&syslog["http"], &syslog["h2"]),
            (&json!(false), &json!(false))
        );
        let transport = key(syslog, "transport");
        assert_eq!(
            (&transport["type"], &transport["default"]),
            (&json!("string"), &json!("tcp"))
        );
        let ws = named(behaviours, "websocket");
        let publishers = key(ws, "publish.clients");
        assert_eq!(
            (&publishers["type"], &publishers["default"]),
            (&json!("integer"), &json!(1))
        );
        assert_eq!(publishers["derived"], true);
        let new = named(behaviours, "new-connection");
        assert_eq!((&new["h2"], &new["streams"]), (&json!(true), &json!(false)));
        assert_eq!(named(behaviours, "keepalive")["streams"], true);
        assert_eq!(named(behaviours, "new-connection")["bare"], true);
        assert_eq!(named(behaviours, "slow-reader")["bare"], false);
        // A capacity search steps the rate of bare requests and of gRPC unary calls only.
        let searchable: Vec<&str> = (behaviours.as_array().unwrap().iter())
            .filter(|b| b["searchable"] == json!(true))
            .filter_map(|b| b["name"].as_str())
            .collect();
        assert_eq!(searchable, ["keepalive", "new-connection", "grpc-unary"]);
    }

    /// Each pacer is named as plans name it, with its flag and its keys' types, defaults
    /// and whether a plan must give them.
    #[test]
    fn a_pacers_facts_are_its_name_flag_and_keys() {
        let facts: Value = serde_json::from_str(&engine_facts()).unwrap();
        let names: Vec<&Value> = facts["pacers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["name"])
            .collect();
        assert_eq!(names.len(), PacerSpec::facts().len());
        assert_eq!(names[..3], ["closed", "sequential", "open"]);
        let open = named(&facts["pacers"], "open");
        assert_eq!(open["flag"], "-R");
        let rate = key(open, "rate");
        assert_eq!(
            (&rate["type"], &rate["required"]),
            (&json!("number"), &json!(true))
        );
        let calls = key(open, "calls_per_connection");
        assert_eq!(
            (&calls["default"], &calls["required"]),
            (&json!(1), &json!(false))
        );
        let closed = named(&facts["pacers"], "closed");
        assert_eq!(
            (&closed["flag"], &closed["keys"], &closed["search"]),
            (&Value::Null, &json!([]), &Value::Null)
        );
    }

    /// A pacer's keys say the suite key that sets each (the planner shapes a `derived` one),
    /// the suite's first in the pacer's order, and what a capacity search steps.
    #[test]
    fn a_pacers_facts_name_the_suite_keys_that_set_it_and_what_a_search_steps() {
        let facts: Value = serde_json::from_str(&engine_facts()).unwrap();
        let open = named(&facts["pacers"], "open");
        let order: Vec<&Value> = open["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| &k["plan"])
            .collect();
        assert_eq!(
            order,
            [
                "rate",
                "ramp_to_rate",
                "calls_per_connection",
                "ramp_s",
                "offset_s"
            ]
        );
        assert_eq!(key(open, "ramp_to_rate")["suite"], "rate_end");
        let ramp = key(open, "ramp_s");
        assert_eq!(
            (&ramp["suite"], &ramp["derived"]),
            (&json!("ramp_up_s"), &json!(true))
        );
        assert_eq!(
            key(open, "offset_s")["suite"],
            Value::Null,
            "the cluster's, not a suite's"
        );
        assert_eq!(open["search"], json!({"counts": "rate", "sets": "rate"}));
        let users = named(&facts["pacers"], "users");
        assert_eq!(key(users, "hold_s")["suite"], "duration_s");
        assert_eq!(
            users["search"],
            json!({"counts": "clients", "sets": "users"})
        );
    }
}
