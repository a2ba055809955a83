//! Where a request body ends (spec §1.1, RFC 9112 §6-7), decided strictly: a framing two
//! parsers could read differently is refused, so that no bytes after it are ever taken
//! for the next request.

/// How a request's body is framed, from its header fields.
#[derive(Debug, Default, PartialEq)]
pub struct Framing {
    pub content_length: Option<u64>,
    pub chunked: bool,
    /// Content-Length came with Transfer-Encoding: served by the chunked coding, and the
    /// connection closes after the answer (RFC 9112 §6.1).
    pub close: bool,
}

/// A framing the server refuses: answered with this status, then the connection closes.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub reason: &'static str,
}

const fn refuse(status: u16, reason: &'static str) -> Refusal {
    Refusal { status, reason }
}

pub fn framing(headers: &[httparse::Header], http11: bool) -> Result<Framing, Refusal> {
    let mut lengths = Vec::new();
    let mut codings = Vec::new();
    for header in headers {
        if header.name.eq_ignore_ascii_case("content-length") {
            lengths.extend(list(header.value));
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            codings.extend(list(header.value));
        }
    }
    if !codings.is_empty() {
        check_codings(&codings, http11)?;
        return Ok(Framing {
            content_length: None,
            chunked: true,
            close: !lengths.is_empty(),
        });
    }
    if lengths.is_empty() {
        return Ok(Framing::default());
    }
    Ok(Framing {
        content_length: Some(content_length(&lengths)?),
        ..Framing::default()
    })
}

/// The elements of a comma-separated field value, without their optional whitespace.
fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(|item| item.trim_ascii())
}

fn check_codings(codings: &[&[u8]], http11: bool) -> Result<(), Refusal> {
    if !http11 {
        return Err(refuse(400, "transfer-encoding in an http/1.0 request"));
    }
    let (last, before) = codings.split_last().expect("not empty");
    if !last.eq_ignore_ascii_case(b"chunked") {
        return Err(refuse(400, "chunked is not the final transfer coding"));
    }
    if before.iter().any(|c| c.eq_ignore_ascii_case(b"chunked")) {
        return Err(refuse(400, "chunked applied more than once"));
    }
    if !before.is_empty() {
        return Err(refuse(501, "unknown transfer coding"));
    }
    Ok(())
}

fn content_length(values: &[&[u8]]) -> Result<u64, Refusal> {
    let mut length = None;
    for value in values {
        let parsed = digits(value).ok_or(refuse(400, "malformed content-length"))?;
        if length.is_some_and(|seen| seen != parsed) {
            return Err(refuse(400, "differing content-length values"));
        }
        length = Some(parsed);
    }
    Ok(length.expect("not empty"))
}

/// `1*DIGIT` as a u64: no sign, no space, no overflow.
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// The end of a chunk line or trailer line: `Ok(Some(n))` with n the bytes up to and
/// including its CRLF, `Ok(None)` if it is not complete yet. A bare LF or CR is refused.
pub fn line_end(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    let Some(lf) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.contains(&b'\r') && !buf.ends_with(b"\r") {
            Err("bare cr in a chunk line")
        } else {
            Ok(None)
        };
    };
    match buf[..lf].iter().position(|&b| b == b'\r') {
        Some(cr) if cr + 1 == lf => Ok(Some(lf + 1)),
        Some(_) => Err("bare cr in a chunk line"),
        None => Err("chunk line ended by a bare lf"),
    }
}

/// A complete chunk-size line: its length with CRLF, and the chunk size.
pub fn parse_chunk_line(buf: &[u8]) -> Result<Option<(usize, u64)>, &'static str> {
    let Some(end) = line_end(buf)? else {
        return Ok(None);
    };
    let line = &buf[..end - 2];
    let hex_len = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if hex_len == 0 {
        return Err("malformed chunk size");
    }
    let size = line[..hex_len].iter().try_fold(0u64, |n, &b| {
        let digit = (b as char).to_digit(16).expect("hex digit");
        n.checked_mul(16)?.checked_add(u64::from(digit))
    });
    let size = size.ok_or("chunk size too large")?;
    if !chunk_extensions(&line[hex_len..]) {
        return Err("malformed chunk extension");
    }
    Ok(Some((end, size)))
}

/// `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`, all of `rest`.
fn chunk_extensions(rest: &[u8]) -> bool {
    let mut at = 0;
    while at < rest.len() {
        at = skip_bws(rest, at);
        if rest.get(at) != Some(&b';') {
            return false;
        }
        at = skip_bws(rest, at + 1);
        let Some(after_name) = token(rest, at) else {
            return false;
        };
        at = after_name;
        let value_at = skip_bws(rest, at);
        if rest.get(value_at) == Some(&b'=') {
            let value_at = skip_bws(rest, value_at + 1);
            match token(rest, value_at).or_else(|| quoted_string(rest, value_at)) {
                Some(after_value) => at = after_value,
                None => return false,
            }
        }
    }
    true
}

fn skip_bws(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t')) {
        at += 1;
    }
    at
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn token(bytes: &[u8], at: usize) -> Option<usize> {
    let len = bytes[at..].iter().take_while(|&&b| is_tchar(b)).count();
    (len > 0).then_some(at + len)
}

fn quoted_string(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut at = at + 1;
    loop {
        match *bytes.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => match *bytes.get(at + 1)? {
                b'\t' | b' '..=b'~' | 0x80.. => at += 2,
                _ => return None,
            },
            b'\t' | b' ' | b'!' | b'#'..=b'[' | b']'..=b'~' | 0x80.. => at += 1,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(fields: &[(&str, &str)], http11: bool) -> Result<Framing, Refusal> {
        let headers: Vec<_> = fields
            .iter()
            .map(|&(name, value)| httparse::Header {
                name,
                value: value.as_bytes(),
            })
            .collect();
        framing(&headers, http11)
    }

    fn status(fields: &[(&str, &str)]) -> u16 {
        of(fields, true).unwrap_err().status
    }

    #[test]
    fn content_length_is_digits_and_one_value() {
        let five = Framing {
            content_length: Some(5),
            ..Framing::default()
        };
        assert_eq!(of(&[("Content-Length", "005")], true), Ok(five));
        assert!(of(&[("content-length", "5, 5"), ("Content-Length", "5")], true).is_ok());
        for bad in ["+5", "-5", "0x5", "5 0", "", "18446744073709551621"] {
            assert_eq!(status(&[("Content-Length", bad)]), 400, "{bad:?}");
        }
        assert_eq!(status(&[("Content-Length", "5, 6")]), 400);
        assert_eq!(
            status(&[("Content-Length", "5"), ("Content-Length", "6")]),
            400
        );
    }

    #[test]
    fn transfer_encoding_is_one_list_ending_in_chunked() {
        let chunked = of(&[("Transfer-Encoding", "Chunked")], true).unwrap();
        assert!(chunked.chunked && !chunked.close);
        let both = of(
            &[("Content-Length", "3"), ("Transfer-Encoding", "chunked")],
            true,
        );
        assert!(
            both.unwrap().close,
            "framed by chunked, closed after the answer"
        );
        for bad in ["chunked, gzip", "identity", "", "chunked, chunked"] {
            assert_eq!(status(&[("Transfer-Encoding", bad)]), 400, "{bad:?}");
        }
        assert_eq!(status(&[("Transfer-Encoding", "x-foo, chunked")]), 501);
        let two_lines = [
            ("Transfer-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
        ];
        assert_eq!(status(&two_lines), 501);
        let http10 = of(&[("Transfer-Encoding", "chunked")], false);
        assert_eq!(http10.unwrap_err().status, 400);
    }

    #[test]
    fn chunk_lines_follow_the_grammar() {
        assert_eq!(parse_chunk_line(b"5\r\nhello"), Ok(Some((3, 5))));
        assert_eq!(parse_chunk_line(b"005\r\n"), Ok(Some((5, 5))));
        let legal = b"5;name=value;flag;q=\"a b;c\"\r\n";
        assert_eq!(parse_chunk_line(legal), Ok(Some((legal.len(), 5))));
        assert_eq!(parse_chunk_line(b"5 ; a = b\r\n"), Ok(Some((11, 5))));
        assert_eq!(parse_chunk_line(b"5;a"), Ok(None), "incomplete");
        for bad in [
            &b"zz\r\n"[..],
            b"0x5\r\n",
            b"10000000000000005\r\n",
            b"5\nhello",
            b"5;a\rb\r\n",
            b"5;a\nhello",
            b"5;name=va\0lue\r\n",
            b"5;a b\r\n",
            b"5 \r\n",
        ] {
            assert!(parse_chunk_line(bad).is_err(), "{bad:?}");
        }
    }
}
