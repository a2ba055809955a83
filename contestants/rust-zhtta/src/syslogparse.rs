//! Syslog parsing (spec §7.1, part syslog-parse): RFC 5424, and RFC 3164 where the message is
//! in that form, strictly, on the message's bytes and without allocating. The spec's rules
//! of what is malformed are exact (VERSION 1 only, a PRI of at most 191, a BOM followed by
//! UTF-8), so that every contestant counts the same messages malformed; this is a small
//! parser of its own rather than a crate whose own reading of the RFCs would differ.

/// One parsed message; a nil field ("-") is `None`.
#[derive(Debug, Default, PartialEq)]
pub struct Message<'a> {
    pub pri: u8,
    pub timestamp: Option<&'a [u8]>,
    pub host: Option<&'a [u8]>,
    pub app: Option<&'a [u8]>,
    pub procid: Option<&'a [u8]>,
    pub msgid: Option<&'a [u8]>,
    pub sd_elements: u64,
    pub msg: &'a [u8],
    pub rfc3164: bool,
}

const BOM: &[u8] = b"\xef\xbb\xbf";
/// TIMESTAMP, HOSTNAME, APP-NAME, PROCID, MSGID: their longest values (spec §7.1).
const HEADER_LIMITS: [usize; 5] = [64, 255, 48, 128, 32];
const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// The message's fields, or `None` if the spec calls it malformed.
pub fn parse(buf: &[u8]) -> Option<Message<'_>> {
    let (pri, rest) = parse_pri(buf)?;
    match rest.first() {
        Some(b'1'..=b'9') => parse_5424(pri, rest),
        _ => parse_3164(pri, rest),
    }
}

fn parse_pri(buf: &[u8]) -> Option<(u8, &[u8])> {
    let rest = buf.strip_prefix(b"<")?;
    let digits = rest
        .iter()
        .take(4)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if !(1..=3).contains(&digits) || rest.get(digits) != Some(&b'>') {
        return None;
    }
    if digits > 1 && rest[0] == b'0' {
        return None;
    }
    let value = rest[..digits]
        .iter()
        .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
    let value = u8::try_from(value).ok().filter(|v| *v <= 191)?;
    Some((value, &rest[digits + 1..]))
}

/// A printable field of 1..=limit octets followed by SP: (value, or None for "-"; rest).
fn token(buf: &[u8], limit: usize) -> Option<(Option<&[u8]>, &[u8])> {
    let end = buf.iter().position(|&b| b == b' ')?;
    let value = &buf[..end];
    if end == 0 || end > limit || !value.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return None;
    }
    Some(((value != b"-").then_some(value), &buf[end + 1..]))
}

fn parse_5424(pri: u8, buf: &[u8]) -> Option<Message<'_>> {
    let mut rest = buf.strip_prefix(b"1 ")?;
    let mut fields = [None; 5];
    for (field, limit) in fields.iter_mut().zip(HEADER_LIMITS) {
        let (value, after) = token(rest, limit)?;
        *field = value;
        rest = after;
    }
    if fields[0].is_some_and(|t| !valid_timestamp(t)) {
        return None;
    }
    let (sd_elements, rest) = structured_data(rest)?;
    let mut msg = match rest.first() {
        None => rest,
        Some(b' ') => &rest[1..],
        Some(_) => return None,
    };
    if let Some(text) = msg.strip_prefix(BOM) {
        std::str::from_utf8(text).ok()?;
        msg = text;
    }
    let [timestamp, host, app, procid, msgid] = fields;
    Some(Message {
        pri,
        timestamp,
        host,
        app,
        procid,
        msgid,
        sd_elements,
        msg,
        rfc3164: false,
    })
}

/// full-date "T" full-time: DDDD-DD-DDTDD:DD:DD[.D{1,6}](Z|+hh:mm|-hh:mm).
fn valid_timestamp(t: &[u8]) -> bool {
    const SHAPE: &[u8] = b"DDDD-DD-DDTDD:DD:DD";
    if t.len() <= SHAPE.len() {
        return false;
    }
    let shaped = SHAPE.iter().zip(t).all(|(s, c)| match s {
        b'D' => c.is_ascii_digit(),
        _ => s == c,
    });
    let mut rest = &t[SHAPE.len()..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=6).contains(&digits) {
            return false;
        }
        rest = &fraction[digits..];
    }
    let zone = match rest {
        b"Z" => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()),
        _ => false,
    };
    shaped && zone
}

fn structured_data(buf: &[u8]) -> Option<(u64, &[u8])> {
    if let Some(rest) = buf.strip_prefix(b"-") {
        return Some((0, rest));
    }
    let (mut elements, mut rest) = (0, buf);
    while let Some(inside) = rest.strip_prefix(b"[") {
        rest = sd_element(inside)?;
        elements += 1;
    }
    (elements > 0).then_some((elements, rest))
}

/// An SD-NAME: 1-32 printable octets but '=', ']' and '"'; returns what follows it.
fn sd_name(buf: &[u8]) -> Option<&[u8]> {
    let n = buf
        .iter()
        .take(32)
        .take_while(|&&b| (0x21..=0x7e).contains(&b) && !matches!(b, b'=' | b']' | b'"'))
        .count();
    (n > 0).then(|| &buf[n..])
}

/// One element whose '[' is taken: what follows its ']'.
fn sd_element(buf: &[u8]) -> Option<&[u8]> {
    let mut rest = sd_name(buf)?;
    while let Some(param) = rest.strip_prefix(b" ") {
        rest = sd_name(param)?.strip_prefix(b"=\"")?;
        rest = sd_value(rest)?;
    }
    rest.strip_prefix(b"]")
}

/// A PARAM-VALUE whose opening quote is taken: what follows its closing quote.
fn sd_value(buf: &[u8]) -> Option<&[u8]> {
    let mut i = 0;
    while i < buf.len() {
        match buf[i] {
            b'\\' if matches!(buf.get(i + 1), Some(b'"' | b'\\' | b']')) => i += 2,
            b'"' => return Some(&buf[i + 1..]),
            b'\\' | b']' => return None,
            _ => i += 1,
        }
    }
    None
}

/// "Mmm dd hh:mm:ss " (16 octets), the day padded with a space.
fn valid_3164_timestamp(t: &[u8]) -> bool {
    t.len() >= 16
        && MONTHS.contains(&&t[..3])
        && t[3] == b' '
        && matches!(t[4], b' ' | b'1'..=b'3')
        && t[5].is_ascii_digit()
        && t[6] == b' '
        && [7, 8, 10, 11, 13, 14]
            .iter()
            .all(|&i| t[i].is_ascii_digit())
        && t[9] == b':'
        && t[12] == b':'
        && t[15] == b' '
}

fn parse_3164(pri: u8, buf: &[u8]) -> Option<Message<'_>> {
    if !valid_3164_timestamp(buf) {
        return None;
    }
    let (host, mut rest) = token(&buf[16..], 255)?;
    let (mut app, mut procid) = (None, None);
    if let Some((tag, pid, after)) = tag(rest) {
        (app, procid) = (Some(tag), pid);
        rest = after.strip_prefix(b" ").unwrap_or(after);
    }
    Some(Message {
        pri,
        timestamp: Some(&buf[..15]),
        host,
        app,
        procid,
        msgid: None,
        sd_elements: 0,
        msg: rest,
        rfc3164: true,
    })
}

/// A 3164 TAG, its PID if any, and what follows the ':'.
type Tag<'a> = (&'a [u8], Option<&'a [u8]>, &'a [u8]);

/// TAG (1-32 of [A-Za-z0-9_./-]), an optional "[PID]", then ':'.
fn tag(buf: &[u8]) -> Option<Tag<'_>> {
    let n = buf
        .iter()
        .take(32)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-'))
        .count();
    if n == 0 {
        return None;
    }
    let (name, rest) = buf.split_at(n);
    if let Some(rest) = rest.strip_prefix(b":") {
        return Some((name, None, rest));
    }
    let inside = rest.strip_prefix(b"[")?;
    let close = inside.iter().take(129).position(|&b| b == b']')?;
    let pid = &inside[..close];
    let printable = pid
        .iter()
        .all(|b| (0x21..=0x7e).contains(b) && !matches!(b, b'[' | b'\\'));
    if close == 0 || !printable {
        return None;
    }
    let after = inside[close + 1..].strip_prefix(b":")?;
    Some((name, Some(pid), after))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::spec_vectors::{entries, latin1, string, syslog, text};
    use serde_json::{Value, json};

    /// A parsed message's fields as the spec's vectors write them.
    fn fields(m: &Message) -> Value {
        let field = |f: Option<&[u8]>| f.map(text);
        json!({
            "pri": m.pri, "timestamp": field(m.timestamp), "host": field(m.host),
            "app": field(m.app), "procid": field(m.procid), "msgid": field(m.msgid),
            "sd_elements": m.sd_elements, "msg": text(m.msg), "rfc3164": m.rfc3164,
        })
    }

    #[test]
    fn the_specs_parsed_vectors_are_taken_apart_field_by_field() {
        let vectors = syslog();
        for vector in entries(&vectors, "parsed") {
            let input = latin1(string(vector, "input"));
            let m = parse(&input).unwrap_or_else(|| panic!("{}: malformed", vector["name"]));
            assert_eq!(fields(&m), vector["fields"], "{}", vector["name"]);
        }
    }

    #[test]
    fn the_specs_malformed_vectors_are_malformed() {
        let vectors = syslog();
        for vector in entries(&vectors, "malformed") {
            let input = latin1(string(vector, "input"));
            assert_eq!(parse(&input), None, "{}", vector["name"]);
        }
    }
}
