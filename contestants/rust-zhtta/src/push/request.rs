//! Validation of the push and event-manager JSON bodies (spec §6), and of the event lists
//! of SSE streams and WebSocket subscribes (§10, §11). Each error is the short reason the
//! client gets back with a 400 (or, on a WebSocket, with its close frame).

use serde_json::Value;
use serde_json::value::RawValue;

const MAX_EVENTS: usize = 16;
const MIN_INTERVAL_MS: u64 = 10;
const MAX_MS: u64 = 3_600_000;

pub fn valid_event_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The events of an SSE stream or a WebSocket subscribe: 1 to 16 names of the pattern,
/// none twice.
pub fn distinct_names(names: &[String]) -> Result<(), &'static str> {
    if names.is_empty() || names.len() > MAX_EVENTS {
        return Err("events must be 1 to 16 event names");
    }
    if !names.iter().all(|name| valid_event_name(name)) {
        return Err("event names must match ^[A-Za-z0-9_.-]{1,64}$");
    }
    if (1..names.len()).any(|i| names[..i].contains(&names[i])) {
        return Err("an event is named twice");
    }
    Ok(())
}

/// Valid JSON text without the whitespace between its tokens, so that it fits one line of
/// a stream; the values stay byte for byte as the client wrote them.
pub fn compact_json(valid: &str) -> String {
    let mut compact = String::with_capacity(valid.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in valid.chars() {
        if in_string {
            (in_string, escaped) = (escaped || c != '"', !escaped && c == '\\');
        } else if c == '"' {
            in_string = true;
        } else if c.is_ascii_whitespace() {
            continue;
        }
        compact.push(c);
    }
    compact
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    LongPoll,
    Comet,
}

#[derive(Debug)]
pub struct PushRequest {
    pub mode: Mode,
    pub events: Vec<String>,
    pub duration_ms: Option<u64>,
    /// The body as received, parsed and re-serialized, for the `request` field of answers.
    pub echo: Box<RawValue>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct SetEvent {
    pub name: String,
    pub interval_ms: u64,
}

fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, Value>, &'static str> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err("body must be a json object"),
        Err(_) => Err("malformed json"),
    }
}

fn event_name(value: Option<&Value>) -> Result<String, &'static str> {
    match value.and_then(Value::as_str) {
        Some(name) if valid_event_name(name) => Ok(name.to_owned()),
        _ => Err("name must match ^[A-Za-z0-9_.-]{1,64}$"),
    }
}

fn milliseconds(value: &Value, min: u64, error: &'static str) -> Result<u64, &'static str> {
    value
        .as_u64()
        .filter(|ms| (min..=MAX_MS).contains(ms))
        .ok_or(error)
}

pub fn parse_set(body: &[u8]) -> Result<SetEvent, &'static str> {
    let object = parse_object(body)?;
    let name = event_name(object.get("name"))?;
    let interval = object.get("interval_ms").ok_or("interval_ms is required")?;
    let interval_ms = milliseconds(
        interval,
        MIN_INTERVAL_MS,
        "interval_ms must be 10 to 3600000",
    )?;
    Ok(SetEvent { name, interval_ms })
}

/// `Ok(None)` asks to clear every event: an empty body, `{}` or `{"name": null}`.
pub fn parse_clear(body: &[u8]) -> Result<Option<String>, &'static str> {
    if body.trim_ascii().is_empty() {
        return Ok(None);
    }
    let object = parse_object(body)?;
    match object.get("name") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Ok(Some(name.clone())),
        Some(_) => Err("name must be a string or null"),
    }
}

pub fn parse_push(body: &[u8]) -> Result<PushRequest, &'static str> {
    let object = parse_object(body)?;
    let mode = match object.get("type").and_then(Value::as_str) {
        Some("longpoll") => Mode::LongPoll,
        Some("comet") => Mode::Comet,
        _ => return Err("type must be longpoll or comet"),
    };
    let listed = object
        .get("events")
        .and_then(Value::as_array)
        .ok_or("events must be an array of event names")?;
    if listed.len() > MAX_EVENTS {
        return Err("at most 16 events");
    }
    let events = listed
        .iter()
        .map(|name| event_name(Some(name)))
        .collect::<Result<Vec<_>, _>>()?;
    let duration_ms = match object.get("duration_ms") {
        None if mode == Mode::Comet => None,
        None => return Err("duration_ms is required for longpoll"),
        Some(value) => Some(milliseconds(value, 1, "duration_ms must be 1 to 3600000")?),
    };
    let echo = serde_json::value::to_raw_value(&object).map_err(|_| "malformed json")?;
    Ok(PushRequest {
        mode,
        events,
        duration_ms,
        echo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_follow_the_pattern() {
        assert!(valid_event_name("e1.a_b-C"));
        assert!(valid_event_name(&"x".repeat(64)));
        assert!(!valid_event_name(""));
        assert!(!valid_event_name(&"x".repeat(65)));
        assert!(!valid_event_name("a b"));
        assert!(!valid_event_name("é"));
    }

    #[test]
    fn stream_events_are_distinct_names() {
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(distinct_names(&names(&["a", "b.c"])), Ok(()));
        assert!(distinct_names(&names(&[])).is_err());
        assert!(distinct_names(&names(&["a", "a"])).is_err());
        assert!(distinct_names(&names(&[""])).is_err());
        let seventeen: Vec<String> = (0..17).map(|i| format!("e{i}")).collect();
        assert!(distinct_names(&seventeen).is_err());
    }

    #[test]
    fn compact_json_keeps_strings_and_drops_whitespace() {
        let text = "{ \"a\" : [1, 2.50 ],\n \"s\": \" x \\\" y \\\\\" }";
        assert_eq!(compact_json(text), r#"{"a":[1,2.50],"s":" x \" y \\"}"#);
    }

    #[test]
    fn set_checks_name_and_interval() {
        let set = parse_set(br#"{"name":"e1","interval_ms":10,"extra":1}"#).unwrap();
        assert_eq!(
            set,
            SetEvent {
                name: "e1".into(),
                interval_ms: 10
            }
        );
        for bad in [
            &br#"{"name":"e1","interval_ms":9}"#[..],
            br#"{"name":"e1","interval_ms":3600001}"#,
            br#"{"name":"e1","interval_ms":"100"}"#,
            br#"{"name":"e1","interval_ms":100.5}"#,
            br#"{"name":"bad name","interval_ms":100}"#,
            br#"{"interval_ms":100}"#,
            br#"[1]"#,
            br#"{"name":"#,
        ] {
            assert!(parse_set(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn clear_without_a_name_means_all() {
        assert_eq!(parse_clear(b""), Ok(None));
        assert_eq!(parse_clear(b" {} "), Ok(None));
        assert_eq!(parse_clear(br#"{"name":null}"#), Ok(None));
        assert_eq!(parse_clear(br#"{"name":"e1"}"#), Ok(Some("e1".into())));
        assert!(parse_clear(br#"{"name":5}"#).is_err());
    }

    #[test]
    fn push_requires_duration_for_longpoll_only() {
        let comet = parse_push(br#"{"type":"comet","events":["a","b"]}"#).unwrap();
        assert_eq!((comet.mode, comet.duration_ms), (Mode::Comet, None));
        let poll = parse_push(br#"{"type":"longpoll","events":[],"duration_ms":5}"#).unwrap();
        assert_eq!((poll.mode, poll.duration_ms), (Mode::LongPoll, Some(5)));
        assert!(poll.echo.get().contains("\"duration_ms\":5"));
        for bad in [
            &br#"{"type":"longpoll","events":["a"]}"#[..],
            br#"{"type":"poll","events":["a"],"duration_ms":5}"#,
            br#"{"type":"comet","events":"a"}"#,
            br#"{"type":"comet","events":[1]}"#,
            br#"{"type":"comet","events":["a"],"duration_ms":0}"#,
            br#"{"type":"comet","events":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}"#,
        ] {
            assert!(parse_push(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
