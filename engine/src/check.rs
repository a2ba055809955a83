//! `serverlab-load --check`: plans judged without running them, so that an orchestrator can
//! refuse a suite of thousands of tests before any server starts, in one process. The engine
//! stays the one judge of what a plan may say.

use std::io::{BufRead, Write};

use serde_json::{json, Value};

use crate::plan::{Plan, PlanError, PlanErrors};

/// One verdict line: `{"ok": true, "plan": <the plan with every default written out>}` or
/// `{"ok": false, "error": <one line>, "field": <the plan field it is about>, "errors":
/// [{"error", "field"}, ...]}`: `error` and `field` are the first refusal, `errors` all of
/// them (the first included), in the order the rules are checked.
pub fn verdict(plan: Result<Plan, PlanError>) -> Value {
    match plan
        .map_err(PlanErrors::from)
        .and_then(|p| p.check().map(|_| p))
    {
        Ok(plan) => json!({ "ok": true, "plan": plan }),
        Err(errors) => {
            let all: Vec<Value> = errors.0.iter().map(refusal).collect();
            let mut verdict = refusal(errors.first());
            verdict["ok"] = false.into();
            verdict["errors"] = all.into();
            verdict
        }
    }
}

fn refusal(error: &PlanError) -> Value {
    json!({ "error": error.to_string(), "field": error.field() })
}

/// Judges each non-blank line of `input` as a JSON plan and writes a verdict line for it,
/// in order; true when every plan was accepted.
pub fn check_lines(input: impl BufRead, mut out: impl Write) -> std::io::Result<bool> {
    let mut all_ok = true;
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let verdict = verdict(Plan::from_json(&line));
        all_ok &= verdict["ok"] == json!(true);
        serde_json::to_writer(&mut out, &verdict)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_gets_a_verdict_in_order_with_the_field_at_fault() {
        let input = concat!(
            r#"{"target": "http://127.0.0.1:1/", "duration_s": 1}"#,
            "\n\n",
            r#"{"target": "http://127.0.0.1:1/", "duration_s": 1, "connections": 1000000000000}"#,
            "\n",
            r#"{"target": "http://127.0.0.1:1/", "conns": 3}"#,
            "\n",
        );
        let mut out = Vec::new();
        assert!(!check_lines(input.as_bytes(), &mut out).unwrap());
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["ok"], true);
        assert_eq!(lines[0]["plan"]["connections"], 10, "defaults written out");
        assert_eq!(lines[1]["ok"], false);
        assert_eq!(lines[1]["field"], "connections");
        assert_eq!(lines[2]["field"], "plan");
    }

    /// The combination rules a suite's tests must keep, each refused with the plan field
    /// it is about (the orchestrator maps that field back to the suite line that set it).
    /// SSE and WebSocket: what they take, with every number bounded.
    #[test]
    fn stream_kinds_are_judged_with_every_number_bounded() {
        let judge = |rest: &str| {
            let plan = format!(r#"{{"target": "http://127.0.0.1:1/", {rest}}}"#);
            verdict(Plan::from_json(&plan))
        };
        let ok = judge(
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 1000}}"#,
        );
        assert_eq!(ok["ok"], true, "{ok}");
        assert_eq!(ok["plan"]["behaviour"]["publish"]["clients"], 1);
        let ok = judge(
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["e1", "e2"], "heartbeat_ms": 0}"#,
        );
        assert_eq!(ok["ok"], true, "{ok}");
        assert_eq!(
            ok["plan"]["behaviour"]["duration_ms"],
            serde_json::Value::Null
        );
        let seventeen: Vec<String> = (0..17).map(|i| format!("\"e{i}\"")).collect();
        for rest in [
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": []}"#.to_string(),
            format!(r#""duration_s": 1, "behaviour": {{"kind": "sse", "events": [{}]}}"#, seventeen.join(",")),
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["e1", "e1"]}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["a b"]}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["e1"], "heartbeat_ms": 5}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["e1"], "heartbeat_ms": 3600001}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["e1"], "duration_ms": 0}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "sse", "events": ["e1"], "publish": {"every_ms": 5}}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": []}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "heartbeat_ms": 5}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 0}}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 3600001}}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 5, "clients": 0}}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 5, "clients": 2000000}}"#.into(),
            r#""duration_s": 1, "behaviour": {"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 5, "rate": 1}}"#.into(),
        ] {
            let v = judge(&rest);
            assert_eq!((v["ok"].clone(), v["field"].clone()), (false.into(), "behaviour".into()), "{rest}: {v}");
        }
        // A stream that lasts until the run ends needs a duration, not a request count.
        for kind in [
            r#"{"kind": "websocket", "events": ["e1"]}"#,
            r#"{"kind": "sse", "events": ["e1"]}"#,
        ] {
            let v = judge(&format!(
                r#""requests": 10, "connections": 1, "behaviour": {kind}"#
            ));
            assert_eq!(v["ok"], false, "{kind}: {v}");
        }
    }

    #[test]
    fn every_combination_rule_names_its_field() {
        let target = r#""target": "http://127.0.0.1:1/""#;
        for (rest, field) in [
            // Kinds and what each takes.
            (
                r#""duration_s": 1, "behaviour": {"kind": "websocket"}"#,
                "behaviour",
            ),
            (r#""duration_s": 1, "pacer": {"kind": "poisson"}"#, "pacer"),
            (r#""duration_s": 1, "pacer": {"kind": "open"}"#, "pacer"),
            (
                r#""duration_s": 1, "pacer": {"kind": "closed", "rate": 5}"#,
                "pacer",
            ),
            (
                r#""requests": 5, "connections": 1, "pacer": {"kind": "sequential", "ramp_to_rate": 5}, "behaviour": {"kind": "new-connection"}"#,
                "pacer",
            ),
            (
                r#""pacer": {"kind": "users", "users": 2, "ramp_up_s": 0, "hold_s": 1, "rate": 5}"#,
                "pacer",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "longpoll", "events": ["e1"]}"#,
                "behaviour",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "keepalive", "duration_ms": 5}"#,
                "behaviour",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "slow-upload", "bytes_per_s": 5}"#,
                "behaviour",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "slow-upload", "bytes": 5, "bytes_per_s": 5, "duration_ms": 5}"#,
                "behaviour",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "new-connection", "transport": "udp"}"#,
                "behaviour",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "syslog", "transport": "sctp"}"#,
                "behaviour",
            ),
            // Issue 21: syslog's framing is `syslog_framing`, apart from HTTP's.
            (
                r#""duration_s": 1, "behaviour": {"kind": "syslog", "framing": "octet"}"#,
                "behaviour",
            ),
            (
                r#""duration_s": 1, "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 5}, "paths": [{"path": "/a", "weight": 1}]"#,
                "paths",
            ),
            // Stops and counts.
            (r#""connections": 1"#, "duration_s"),
            (r#""behaviour": {"kind": "syslog"}"#, "duration_s"),
            (
                r#""requests": 0, "behaviour": {"kind": "syslog"}"#,
                "requests",
            ),
            (
                r#""requests": 5, "pacer": {"kind": "sequential"}, "behaviour": {"kind": "new-connection"}, "connections": 3"#,
                "connections",
            ),
            (
                r#""duration_s": 1, "pacer": {"kind": "open", "rate": 5}, "connections": 0"#,
                "connections",
            ),
            (r#""duration_s": 1, "connections": -1"#, "connections"),
            (r#""requests": -1"#, "requests"),
            (r#""duration_s": -1"#, "duration_s"),
            (
                r#""duration_s": 1, "pacer": {"kind": "open", "rate": -5}"#,
                "pacer",
            ),
            (r#""duration_s": 1, "conns": 3"#, "plan"),
        ] {
            let plan = format!("{{{target}, {rest}}}");
            let verdict = verdict(Plan::from_json(&plan));
            assert_eq!(verdict["ok"], false, "{plan}");
            assert_eq!(verdict["field"], field, "{plan}: {verdict}");
        }
    }

    #[test]
    fn sequential_pacing_defaults_to_its_one_connection() {
        let plan = r#"{"target": "http://127.0.0.1:1/", "requests": 5,
            "pacer": {"kind": "sequential"}, "behaviour": {"kind": "new-connection"}}"#;
        let verdict = verdict(Plan::from_json(plan));
        assert_eq!(verdict["ok"], true, "{verdict}");
        assert_eq!(verdict["plan"]["connections"], 1);
    }

    #[test]
    fn infinite_or_huge_spans_are_refused() {
        for (plan, field) in [
            (
                r#"{"target": "http://127.0.0.1:1/", "duration_s": 1e9}"#,
                "duration_s",
            ),
            (
                r#"{"target": "http://127.0.0.1:1/", "pacer": {"kind": "users", "users": 5, "ramp_up_s": 1e12, "hold_s": 1}}"#,
                "pacer",
            ),
            (
                r#"{"target": "http://127.0.0.1:1/", "requests": 10, "pacer": {"kind": "open", "rate": 1e300}}"#,
                "pacer",
            ),
        ] {
            let verdict = verdict(Plan::from_json(plan));
            assert_eq!(verdict["ok"], false, "{plan}");
            assert_eq!(verdict["field"], field, "{verdict}");
        }
    }
}
