//! One client connection: an input buffer shared by head parsing and body reading, and
//! the helpers that send whole responses.

use super::framing::{Refusal, framing};
use super::response::{Length, Sent, write_head};
use crate::stats::{Stats, bump};
use crate::stream::Stream;
use serde::Serialize;
use std::io::{self, Read, Write};
use std::sync::Arc;

/// Largest header section accepted; a bigger one gets 431.
pub const MAX_HEAD: usize = 64 * 1024;
const INITIAL_BUFFER: usize = 4 * 1024;
const MAX_HEADERS: usize = 256;

#[derive(Debug)]
pub enum HeadError {
    TooLarge,
    Malformed,
    /// A framing the server refuses (spec §1.1); the connection closes after the answer.
    Framing(Refusal),
    /// The socket failed; there is no one to answer.
    Io,
}

/// The parts of a request head the server acts on. Reused across requests on a
/// connection so that parsing does not allocate once the strings have grown.
#[derive(Default, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub keep_alive: bool,
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub expect_continue: bool,
    /// `Last-Event-ID` (spec §10); repeated lines joined by ", ".
    pub last_event_id: Option<String>,
    /// The fields of a WebSocket handshake (spec §11).
    pub upgrade: Upgrade,
}

#[derive(Default, Debug)]
pub struct Upgrade {
    /// `Upgrade` has the token `websocket`.
    pub websocket: bool,
    /// `Connection` has the token `upgrade`.
    pub connection: bool,
    /// `Sec-WebSocket-Key` and `Sec-WebSocket-Version`; repeated lines joined by ", ".
    pub key: Option<String>,
    pub version: Option<String>,
}

impl Request {
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    pub fn query(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, q)| q)
    }

    pub fn has_body(&self) -> bool {
        self.chunked || self.content_length.is_some_and(|n| n > 0)
    }

    fn fill(&mut self, parsed: &httparse::Request) -> Result<(), HeadError> {
        self.method.clear();
        self.method.push_str(parsed.method.unwrap_or(""));
        self.target.clear();
        self.target.push_str(parsed.path.unwrap_or(""));
        let http11 = parsed.version == Some(1);
        let framing = framing(parsed.headers, http11).map_err(HeadError::Framing)?;
        self.content_length = framing.content_length;
        self.chunked = framing.chunked;
        let mut close = framing.close;
        let mut keep_alive_token = false;
        self.expect_continue = false;
        self.last_event_id = None;
        self.upgrade = Upgrade::default();
        for header in parsed.headers.iter() {
            let value = std::str::from_utf8(header.value).map_err(|_| HeadError::Malformed)?;
            let name = header.name;
            if name.eq_ignore_ascii_case("connection") {
                close |= has_token(value, "close");
                keep_alive_token |= has_token(value, "keep-alive");
                self.upgrade.connection |= has_token(value, "upgrade");
            } else if name.eq_ignore_ascii_case("expect") {
                self.expect_continue = has_token(value, "100-continue");
            } else if name.eq_ignore_ascii_case("upgrade") {
                self.upgrade.websocket |= has_token(value, "websocket");
            } else if name.eq_ignore_ascii_case("sec-websocket-key") {
                join_field(&mut self.upgrade.key, value);
            } else if name.eq_ignore_ascii_case("sec-websocket-version") {
                join_field(&mut self.upgrade.version, value);
            } else if name.eq_ignore_ascii_case("last-event-id") {
                join_field(&mut self.last_event_id, value);
            }
        }
        self.keep_alive = !close && (http11 || keep_alive_token);
        Ok(())
    }
}

/// A field given on several lines is one comma-separated list (RFC 9110 §5.3).
fn join_field(field: &mut Option<String>, value: &str) {
    match field {
        Some(joined) => {
            joined.push_str(", ");
            joined.push_str(value);
        }
        None => *field = Some(value.to_owned()),
    }
}

fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|part| part.trim().eq_ignore_ascii_case(token))
}

pub struct Conn {
    /// Shared (not dup'ed) with a responder or an emitter that writes to it, so that a
    /// connection costs one descriptor however it is served.
    pub stream: Arc<Stream>,
    pub stats: &'static Stats,
    input: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
}

impl Conn {
    pub fn new(stream: Stream, stats: &'static Stats) -> Conn {
        Conn {
            stream: Arc::new(stream),
            stats,
            input: vec![0; INITIAL_BUFFER],
            start: 0,
            end: 0,
            out: Vec::with_capacity(512),
        }
    }

    /// Reads the next request head. `Ok(false)` means the client closed the connection
    /// between requests (or mid-head, which leaves nothing to answer).
    pub fn read_head(&mut self, request: &mut Request) -> Result<bool, HeadError> {
        loop {
            if self.start < self.end {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut parsed = httparse::Request::new(&mut headers);
                match parsed.parse(&self.input[self.start..self.end]) {
                    Ok(httparse::Status::Complete(head_len)) => {
                        request.fill(&parsed)?;
                        self.consume(head_len);
                        return Ok(true);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
                    Err(_) => return Err(HeadError::Malformed),
                }
            }
            if self.end - self.start >= MAX_HEAD {
                return Err(HeadError::TooLarge);
            }
            match self.read_more() {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(_) => return Err(HeadError::Io),
            }
        }
    }

    pub fn buffered(&self) -> &[u8] {
        &self.input[self.start..self.end]
    }

    pub fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Appends what the socket has to the input buffer; 0 means end of stream. Grows the
    /// buffer up to a little over MAX_HEAD so that a head of MAX_HEAD bytes still fits.
    pub fn read_more(&mut self) -> io::Result<usize> {
        if self.end == self.input.len() {
            if self.start > 0 {
                self.input.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = (self.input.len() * 2).min(MAX_HEAD + INITIAL_BUFFER);
                if grown == self.input.len() {
                    return Err(io::Error::new(io::ErrorKind::OutOfMemory, "input full"));
                }
                self.input.resize(grown, 0);
            }
        }
        let n = (&*self.stream).read(&mut self.input[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Body bytes: first what is buffered, then straight from the socket into `out`
    /// (no copy through the buffer for large uploads).
    pub fn read_into(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buffered = self.buffered();
        if buffered.is_empty() {
            return (&*self.stream).read(out);
        }
        let n = buffered.len().min(out.len());
        out[..n].copy_from_slice(&buffered[..n]);
        self.consume(n);
        Ok(n)
    }

    pub fn send(
        &mut self,
        status: u16,
        content_type: &str,
        extra: &str,
        body: &[u8],
        keep_alive: bool,
    ) -> io::Result<Sent> {
        self.send_head(
            status,
            content_type,
            Length::Known(body.len() as u64),
            extra,
            keep_alive,
            body,
        )
    }

    /// Sends a head (and an optional first part of the body) in one write.
    pub fn send_head(
        &mut self,
        status: u16,
        content_type: &str,
        length: Length,
        extra: &str,
        keep_alive: bool,
        body: &[u8],
    ) -> io::Result<Sent> {
        self.out.clear();
        write_head(
            &mut self.out,
            status,
            content_type,
            length,
            extra,
            keep_alive,
        );
        self.out.extend_from_slice(body);
        (&*self.stream).write_all(&self.out)?;
        bump(&self.stats.responses_total);
        Ok(Sent { status, keep_alive })
    }

    pub fn send_json<T: Serialize>(
        &mut self,
        status: u16,
        value: &T,
        keep_alive: bool,
    ) -> io::Result<Sent> {
        let body = serde_json::to_vec(value).map_err(io::Error::other)?;
        self.send(status, "application/json", "", &body, keep_alive)
    }

    pub fn send_error(&mut self, status: u16, reason: &str, keep_alive: bool) -> io::Result<Sent> {
        self.send_error_with(status, reason, "", keep_alive)
    }

    pub fn send_error_with(
        &mut self,
        status: u16,
        reason: &str,
        extra: &str,
        keep_alive: bool,
    ) -> io::Result<Sent> {
        let body = serde_json::json!({ "error": reason }).to_string();
        self.send(
            status,
            "application/json",
            extra,
            body.as_bytes(),
            keep_alive,
        )
    }

    /// Tells a client that sent `Expect: 100-continue` to go on with its body.
    pub fn send_continue(&mut self) -> io::Result<()> {
        (&*self.stream).write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(head: &str) -> Result<Request, HeadError> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut parsed = httparse::Request::new(&mut headers);
        parsed.parse(head.as_bytes()).unwrap();
        let mut request = Request::default();
        request.fill(&parsed).map(|_| request)
    }

    #[test]
    fn keep_alive_follows_version_and_connection_header() {
        assert!(parse("GET / HTTP/1.1\r\n\r\n").unwrap().keep_alive);
        assert!(
            !parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
                .unwrap()
                .keep_alive
        );
        assert!(!parse("GET / HTTP/1.0\r\n\r\n").unwrap().keep_alive);
        assert!(
            parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .unwrap()
                .keep_alive
        );
    }

    #[test]
    fn body_framing_is_read_from_headers() {
        let request = parse("POST /x?a=1 HTTP/1.1\r\nContent-Length: 12\r\n\r\n").unwrap();
        assert_eq!(request.content_length, Some(12));
        assert_eq!(request.path(), "/x");
        assert_eq!(request.query(), Some("a=1"));
        let chunked = parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert!(chunked.chunked && chunked.has_body());
        assert!(parse("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n").is_err());
        let both = "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
        let both = parse(both).unwrap();
        assert!(
            both.chunked && !both.keep_alive,
            "framed by chunked, then closed"
        );
    }
}
