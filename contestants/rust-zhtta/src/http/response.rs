//! Response heads. Written into a caller's buffer so that a small response leaves in one
//! `write` call.

use crate::clock::append_http_date;
use std::io::Write;

/// The outcome a handler reports: what status went out, and whether the connection may
/// carry another request.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub status: u16,
    pub keep_alive: bool,
}

#[derive(Clone, Copy, Debug)]
pub enum Length {
    Known(u64),
    Chunked,
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Appends a full response head. `extra` holds whole header lines, each ending in CRLF.
pub fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    length: Length,
    extra: &str,
    keep_alive: bool,
) {
    // Writing into a Vec cannot fail.
    let _ = write!(out, "HTTP/1.1 {} {}\r\nDate: ", status, reason(status));
    append_http_date(out);
    let _ = write!(out, "\r\nContent-Type: {content_type}\r\n");
    match length {
        Length::Known(n) => {
            let _ = write!(out, "Content-Length: {n}\r\n");
        }
        Length::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(extra.as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_carries_date_type_and_length() {
        let mut out = Vec::new();
        write_head(
            &mut out,
            405,
            "application/json",
            Length::Known(7),
            "Allow: GET\r\n",
            false,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\nDate: "));
        assert!(text.contains("\r\nContent-Type: application/json\r\n"));
        assert!(text.contains("\r\nContent-Length: 7\r\n"));
        assert!(text.contains("\r\nConnection: close\r\n"));
        assert!(text.ends_with("Allow: GET\r\n\r\n"));
    }
}
