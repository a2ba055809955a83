//! Control endpoints (spec §5) and the event manager (spec §6): small JSON in, small JSON
//! out, served directly by the connection's thread.

use crate::app::App;
use crate::clock::now_ms;
use crate::http::{Conn, Request, Sent};
use crate::push::request::{parse_clear, parse_set};
use crate::stats::read;
use serde_json::{Value, json};
use std::io;
use std::sync::atomic::Ordering;

pub fn timestamp(conn: &mut Conn, request: &Request, keep_alive: bool) -> io::Result<Sent> {
    let client = match client_param(request.query()) {
        Ok(client) => client,
        Err(()) => {
            let reason = "client must be a non-negative integer";
            return conn.send_error(400, reason, keep_alive);
        }
    };
    let server = now_ms();
    let offset = client.map(|c| server as i128 - c as i128);
    let body = json!({ "server": server, "client": client, "offset_ms": offset });
    conn.send_json(200, &body, keep_alive)
}

/// The `client` query parameter: absent is fine, anything but digits is not.
fn client_param(query: Option<&str>) -> Result<Option<u64>, ()> {
    let Some(value) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("client="))
    else {
        return Ok(None);
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    value.parse().map(Some).map_err(|_| ())
}

pub fn logging(app: &App, conn: &mut Conn, body: &[u8], keep_alive: bool) -> io::Result<Sent> {
    let enabled = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| value.get("enabled").and_then(Value::as_bool));
    match enabled {
        Some(enabled) => {
            app.logging.store(enabled, Ordering::Relaxed);
            conn.send_json(200, &json!({ "enabled": enabled }), keep_alive)
        }
        None => conn.send_error(400, "enabled must be a boolean", keep_alive),
    }
}

pub fn set_event(app: &App, conn: &mut Conn, body: &[u8], keep_alive: bool) -> io::Result<Sent> {
    let set = match parse_set(body) {
        Ok(set) => set,
        Err(reason) => return conn.send_error(400, reason, keep_alive),
    };
    match app.push.set(&set.name, set.interval_ms) {
        Ok(replaced) => {
            let answer =
                json!({ "name": set.name, "interval_ms": set.interval_ms, "replaced": replaced });
            conn.send_json(200, &answer, keep_alive)
        }
        Err(_) => conn.send_error(503, "cannot start an emitter thread", keep_alive),
    }
}

pub fn clear_event(app: &App, conn: &mut Conn, body: &[u8], keep_alive: bool) -> io::Result<Sent> {
    let name = match parse_clear(body) {
        Ok(name) => name,
        Err(reason) => return conn.send_error(400, reason, keep_alive),
    };
    match app.push.clear(name.as_deref()) {
        Some(cleared) => conn.send_json(200, &json!({ "cleared": cleared }), keep_alive),
        None => conn.send_error(404, "unknown event", keep_alive),
    }
}

pub fn stats(app: &App, conn: &mut Conn, keep_alive: bool) -> io::Result<Sent> {
    let s = app.stats;
    let body = json!({
        "spec_version": crate::SPEC_VERSION,
        "server": crate::NAME,
        "uptime_ms": app.started.elapsed().as_millis() as u64,
        "connections": {"open": read(&s.connections_open), "total": read(&s.connections_total)},
        "requests": {"total": read(&s.requests_total), "open_push": read(&s.open_push)},
        "responses": {
            "total": read(&s.responses_total),
            "push": read(&s.responses_push),
            "timeouts": read(&s.responses_timeouts),
        },
        "events": app.push.event_stats(),
        "syslog": {
            "received": read(&s.syslog_received),
            "bytes": read(&s.syslog_bytes),
            "tcp_connections": read(&s.syslog_tcp_connections),
            "mode": if s.syslog_parse_mode.load(Ordering::Relaxed) { "parse" } else { "count" },
            "parsed": read(&s.syslog_parsed),
            "malformed": read(&s.syslog_malformed),
            "rfc3164": read(&s.syslog_rfc3164),
            "sd_elements": read(&s.syslog_sd_elements),
            "msg_bytes": read(&s.syslog_msg_bytes),
        },
        "sse": {
            "open": read(&s.sse_open),
            "total": read(&s.sse_total),
            "deliveries": read(&s.sse_deliveries),
            "replayed": read(&s.sse_replayed),
            "gaps": read(&s.sse_gaps),
            "heartbeats": read(&s.sse_heartbeats),
            "timeouts": read(&s.sse_timeouts),
        },
        "websocket": {
            "open": read(&s.ws_open),
            "total": read(&s.ws_total),
            "subscribers": read(&s.ws_subscribers),
            "deliveries": read(&s.ws_deliveries),
            "echoes": read(&s.ws_echoes),
            "publishes": read(&s.ws_publishes),
        },
        "grpc": {
            "calls": read(&s.grpc_calls),
            "open": read(&s.grpc_open),
            "deliveries": read(&s.grpc_deliveries),
        },
    });
    conn.send_json(200, &body, keep_alive)
}

#[cfg(test)]
mod tests {
    use super::client_param;

    #[test]
    fn client_must_be_a_non_negative_integer() {
        assert_eq!(client_param(None), Ok(None));
        assert_eq!(client_param(Some("x=1")), Ok(None));
        assert_eq!(
            client_param(Some("x=1&client=1700000000000")),
            Ok(Some(1_700_000_000_000))
        );
        for bad in [
            "client=",
            "client=-5",
            "client=1.5",
            "client=abc",
            "client=99999999999999999999999",
        ] {
            assert_eq!(client_param(Some(bad)), Err(()), "{bad}");
        }
    }
}
