//! HTTP/1.1 on the client side: the request bytes (built once per run) and an incremental
//! response parser that never trusts the server: every length is bounded, every framing error
//! is a typed `ParseError`, and body bytes are streamed to a sink instead of being stored.
//! Framing that could be read two ways (RFC 9112 §6.3: both Content-Length and
//! Transfer-Encoding, Content-Length values that disagree, a transfer coding that does not
//! end in chunked) is an error, never a guess: the answer counts as `parse` and its
//! connection is not used again. The engine sends such framing only when a plan's own
//! headers say so.

use crate::plan::ValidPlan;

/// A response header section larger than this is refused (the spec's 64 KiB limit).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed status line or header")]
    BadHead,
    #[error("header section over 64 KiB")]
    HeadTooLarge,
    #[error("bad Content-Length")]
    BadLength,
    #[error("both Content-Length and Transfer-Encoding")]
    LengthAndTransferEncoding,
    #[error("Transfer-Encoding does not end in one chunked coding")]
    BadTransferEncoding,
    #[error("malformed chunked encoding")]
    BadChunk,
    #[error("body larger than the client accepts")]
    BodyTooLarge,
    #[error("a gRPC message compressed unasked, or one that does not decode")]
    BadMessage,
}

/// Builds the bytes of one request to the target's path. `close` asks the server to close
/// after answering.
pub fn build_request(
    plan: &ValidPlan,
    method: &str,
    content_type: Option<&str>,
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    build_request_to(plan, &plan.target.path, method, content_type, body, close)
}

/// Builds the bytes of one request to `path` (one of the plan's weighted paths).
pub fn build_request_to(
    plan: &ValidPlan,
    path: &str,
    method: &str,
    content_type: Option<&str>,
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len());
    let head = head_to(plan, path, method, content_type, body.len() as u64, close);
    out.extend_from_slice(&head);
    out.extend_from_slice(body);
    out
}

/// The header section alone, for bodies that are streamed (slow upload).
pub fn request_head(
    plan: &ValidPlan,
    method: &str,
    content_type: Option<&str>,
    body_len: u64,
    close: bool,
) -> Vec<u8> {
    head_to(
        plan,
        &plan.target.path,
        method,
        content_type,
        body_len,
        close,
    )
}

fn head_to(
    plan: &ValidPlan,
    path: &str,
    method: &str,
    content_type: Option<&str>,
    body_len: u64,
    close: bool,
) -> Vec<u8> {
    use std::fmt::Write;
    let mut head = String::with_capacity(256);
    let _ = write!(
        head,
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: serverlab-load/{}\r\n",
        plan.target.authority,
        env!("CARGO_PKG_VERSION")
    );
    let user_sets = |name: &str| {
        plan.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    if close && !user_sets("connection") {
        head.push_str("Connection: close\r\n");
    }
    if let Some(ct) = content_type.filter(|_| !user_sets("content-type")) {
        let _ = write!(head, "Content-Type: {ct}\r\n");
    }
    // A plan that frames its body itself is sent as it says, never with a second framing.
    let user_frames = user_sets("content-length") || user_sets("transfer-encoding");
    if !user_frames && (body_len > 0 || method != "GET" && method != "HEAD") {
        let _ = write!(head, "Content-Length: {body_len}\r\n");
    }
    for (name, value) in &plan.headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// What the header section said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub head_len: usize,
    pub framing: Framing,
    /// The server will close the connection after this response.
    pub close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// Parses a header section; `Ok(None)` means more bytes are needed. Interim `1xx` responses
/// are reported as heads with an empty body so the caller can skip them.
pub fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, ParseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
            return Err(ParseError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
        Err(_) => return Err(ParseError::BadHead),
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(ParseError::HeadTooLarge);
    }
    let status = response.code.ok_or(ParseError::BadHead)?;
    let http10 = response.version == Some(0);
    let mut length = None;
    let mut codings = Codings::default();
    let mut close = http10;
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(parse_length(h.value, length)?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            codings.add(h.value);
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = has_token(h.value, b"close") || (http10 && !has_token(h.value, b"keep-alive"));
        }
    }
    let chunked = codings.chunked()?;
    if chunked && length.is_some() {
        return Err(ParseError::LengthAndTransferEncoding);
    }
    let bodiless = head_request || status < 200 || status == 204 || status == 304;
    let framing = match (bodiless, chunked, length) {
        (true, _, _) => Framing::Empty,
        (false, true, _) => Framing::Chunked,
        (false, false, Some(0)) => Framing::Empty,
        (false, false, Some(n)) => Framing::Length(n),
        (false, false, None) => Framing::UntilClose,
    };
    let close = close || framing == Framing::UntilClose;
    Ok(Some(Head {
        status,
        head_len,
        framing,
        close,
    }))
}

/// A Content-Length field value, agreeing with the one already seen (`before`). Repeats of
/// one value, as further fields or a list (`5, 5`), are taken as that value (RFC 9110 §8.6
/// allows it); differing values, empty elements and anything but digits are refused.
fn parse_length(value: &[u8], before: Option<u64>) -> Result<u64, ParseError> {
    let mut length = before;
    for text in tokens(value) {
        if text.is_empty() || text.len() > 19 || !text.iter().all(u8::is_ascii_digit) {
            return Err(ParseError::BadLength);
        }
        let n = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or(ParseError::BadLength)?;
        if length.is_some_and(|l| l != n) {
            return Err(ParseError::BadLength);
        }
        length = Some(n);
    }
    length.ok_or(ParseError::BadLength)
}

/// The transfer codings of every Transfer-Encoding field, in order.
#[derive(Default)]
struct Codings {
    present: bool,
    chunked: u32,
    last_chunked: bool,
}

impl Codings {
    fn add(&mut self, value: &[u8]) {
        self.present = true;
        for coding in tokens(value).filter(|t| !t.is_empty()) {
            let chunked = coding.eq_ignore_ascii_case(b"chunked");
            self.chunked += u32::from(chunked);
            self.last_chunked = chunked;
        }
    }

    /// Whether the body is chunked. A response's codings must end in chunked, applied once:
    /// the spec has no other framing, and the engine decodes no other coding.
    fn chunked(&self) -> Result<bool, ParseError> {
        match (self.present, self.chunked, self.last_chunked) {
            (false, _, _) => Ok(false),
            (true, 1, true) => Ok(true),
            _ => Err(ParseError::BadTransferEncoding),
        }
    }
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(|t| t.trim_ascii())
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    tokens(value).any(|t| t.eq_ignore_ascii_case(token))
}

/// Incremental decoder of a chunked body; hands data to the caller without copying.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: ChunkState,
    size: u64,
    size_digits: u8,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLf,
    FinalLf,
    Done,
}

impl ChunkedDecoder {
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consumes bytes from `input`, calling `data` with each piece of body. Returns how many
    /// bytes were consumed; fewer than `input.len()` only once the body is complete.
    pub fn feed(
        &mut self,
        input: &[u8],
        data: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
    ) -> Result<usize, ParseError> {
        let mut i = 0;
        while i < input.len() && self.state != ChunkState::Done {
            if self.state == ChunkState::Data {
                let take = (self.size.min((input.len() - i) as u64)) as usize;
                data(&input[i..i + take])?;
                i += take;
                self.size -= take as u64;
                if self.size == 0 {
                    self.state = ChunkState::DataCr;
                }
                continue;
            }
            self.step(input[i])?;
            i += 1;
        }
        Ok(i)
    }

    fn step(&mut self, byte: u8) -> Result<(), ParseError> {
        use ChunkState::*;
        self.state = match (self.state, byte) {
            (Size, b) if b.is_ascii_hexdigit() => {
                if self.size_digits >= 15 {
                    return Err(ParseError::BodyTooLarge);
                }
                self.size_digits += 1;
                self.size = self.size * 16 + u64::from((b as char).to_digit(16).unwrap_or(0));
                Size
            }
            (Size, b';' | b' ' | b'\t') if self.size_digits > 0 => Extension,
            (Size | Extension, b'\r') if self.size_digits > 0 => SizeLf,
            (Extension, b'\n') => return Err(ParseError::BadChunk),
            (Extension, _) => Extension,
            (SizeLf, b'\n') if self.size == 0 => TrailerStart,
            (SizeLf, b'\n') => Data,
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.size_digits = 0;
                Size
            }
            (TrailerStart, b'\r') => FinalLf,
            (TrailerLine, b'\r') => TrailerLf,
            (TrailerStart | TrailerLine, _) => TrailerLine,
            (TrailerLf, b'\n') => TrailerStart,
            (FinalLf, b'\n') => Done,
            _ => return Err(ParseError::BadChunk),
        };
        Ok(())
    }
}

/// Body framing state of one response in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyState {
    Remaining(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
}

impl BodyState {
    pub fn new(framing: Framing) -> BodyState {
        match framing {
            Framing::Empty => BodyState::Remaining(0),
            Framing::Length(n) => BodyState::Remaining(n),
            Framing::Chunked => BodyState::Chunked(ChunkedDecoder::default()),
            Framing::UntilClose => BodyState::UntilClose,
        }
    }

    pub fn is_done(&self) -> bool {
        match self {
            BodyState::Remaining(n) => *n == 0,
            BodyState::Chunked(d) => d.is_done(),
            BodyState::UntilClose => false,
        }
    }

    /// Feeds received bytes; returns how many belong to this body.
    pub fn feed(
        &mut self,
        input: &[u8],
        data: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
    ) -> Result<usize, ParseError> {
        match self {
            BodyState::Remaining(n) => {
                let take = (*n).min(input.len() as u64) as usize;
                if take > 0 {
                    data(&input[..take])?;
                }
                *n -= take as u64;
                Ok(take)
            }
            BodyState::Chunked(d) => d.feed(input, data),
            BodyState::UntilClose => {
                data(input)?;
                Ok(input.len())
            }
        }
    }
}

/// Every unreadable answer is counted as a `parse` error.
impl From<ParseError> for crate::stats::ErrorKind {
    fn from(_: ParseError) -> Self {
        crate::stats::ErrorKind::Parse
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(framing: Framing, pieces: &[&[u8]]) -> Result<(Vec<u8>, bool), ParseError> {
        let mut state = BodyState::new(framing);
        let mut body = Vec::new();
        for piece in pieces {
            state.feed(piece, &mut |d: &[u8]| {
                body.extend_from_slice(d);
                Ok(())
            })?;
        }
        Ok((body, state.is_done()))
    }

    fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes.get(i).copied().unwrap_or(7).clamp(1, rest.len());
            out.extend_from_slice(format!("{n:x};ext=1\r\n").as_bytes());
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
            i += 1;
        }
        out.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
        out
    }

    #[test]
    fn head_framing_rules() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 84\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.status, h.framing, h.close),
            (200, Framing::Length(84), false)
        );
        let h = parse_head(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.framing, h.close), (Framing::Chunked, true));
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let h = parse_head(b"HTTP/1.1 204 No\r\nContent-Length: 5\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Empty);
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nX: y", false), Ok(None));
    }

    #[test]
    fn head_errors_are_typed() {
        assert_eq!(
            parse_head(b"garbage\r\n\r\n", false),
            Err(ParseError::BadHead)
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false),
            Err(ParseError::BadLength)
        );
        assert_eq!(
            parse_head(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false
            ),
            Err(ParseError::BadLength)
        );
        let mut huge = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
        huge.resize(MAX_HEAD_BYTES + 10, b'a');
        assert_eq!(parse_head(&huge, false), Err(ParseError::HeadTooLarge));
    }

    fn framing(head: &str) -> Result<Framing, ParseError> {
        let wire = format!("HTTP/1.1 200 OK\r\n{head}\r\n\r\n");
        parse_head(wire.as_bytes(), false).map(|h| h.expect("a whole head").framing)
    }

    #[test]
    fn framing_that_reads_two_ways_is_an_error() {
        for (head, error) in [
            (
                "Content-Length: 5\r\nContent-Length: 6",
                ParseError::BadLength,
            ),
            ("Content-Length: 5, 6", ParseError::BadLength),
            ("Content-Length: 5,", ParseError::BadLength),
            ("Content-Length: 5x", ParseError::BadLength),
            ("Content-Length: +5", ParseError::BadLength),
            ("Content-Length:", ParseError::BadLength),
            (
                "Content-Length: 5\r\nTransfer-Encoding: chunked",
                ParseError::LengthAndTransferEncoding,
            ),
            (
                "Transfer-Encoding: chunked\r\nContent-Length: 5",
                ParseError::LengthAndTransferEncoding,
            ),
            ("Transfer-Encoding: gzip", ParseError::BadTransferEncoding),
            (
                "Transfer-Encoding: chunked, gzip",
                ParseError::BadTransferEncoding,
            ),
            (
                "Transfer-Encoding: chunked, chunked",
                ParseError::BadTransferEncoding,
            ),
            ("Transfer-Encoding:", ParseError::BadTransferEncoding),
            (
                "Transfer-Encoding: gzip\r\nContent-Length: 5",
                ParseError::BadTransferEncoding,
            ),
        ] {
            assert_eq!(framing(head), Err(error), "{head}");
        }
    }

    #[test]
    fn one_framing_said_more_than_once_is_accepted() {
        for (head, expected) in [
            ("Content-Length: 5, 5", Framing::Length(5)),
            ("Content-Length: 5\r\nContent-Length: 5", Framing::Length(5)),
            ("Content-Length:  7 ", Framing::Length(7)),
            ("Transfer-Encoding: gzip, chunked", Framing::Chunked),
            (
                "Transfer-Encoding: gzip\r\nTransfer-Encoding: Chunked",
                Framing::Chunked,
            ),
        ] {
            assert_eq!(framing(head), Ok(expected), "{head}");
        }
    }

    #[test]
    fn a_plan_that_frames_its_body_gets_no_second_framing() {
        let plan = |headers: serde_json::Value| {
            crate::plan::Plan::from_value(serde_json::json!({
                "target": "http://127.0.0.1:1/up", "requests": 10, "method": "POST",
                "body": "hello", "headers": headers}))
            .unwrap()
            .validate()
            .unwrap()
        };
        let text = |plan: &ValidPlan| {
            let request = build_request(plan, "POST", None, &plan.body, false);
            String::from_utf8(request).unwrap().to_ascii_lowercase()
        };
        let own = text(&plan(serde_json::json!([])));
        assert_eq!(own.matches("content-length: 5\r\n").count(), 1, "{own}");
        for header in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
            let sent = text(&plan(serde_json::json!([header])));
            let framing =
                sent.matches("content-length").count() + sent.matches("transfer-encoding").count();
            assert_eq!(framing, 1, "{sent}");
        }
    }

    #[test]
    fn chunked_rejects_garbage_and_huge_sizes() {
        assert_eq!(
            decode_all(Framing::Chunked, &[b"zz\r\n"]),
            Err(ParseError::BadChunk)
        );
        assert_eq!(
            decode_all(Framing::Chunked, &[b"3\r\nabcX"]),
            Err(ParseError::BadChunk)
        );
        assert_eq!(
            decode_all(Framing::Chunked, &[b"ffffffffffffffffff\r\n"]),
            Err(ParseError::BodyTooLarge)
        );
        let (body, done) = decode_all(Framing::Chunked, &[b"3\r\nabc\r\n0\r\n"]).unwrap();
        assert_eq!((body.as_slice(), done), (&b"abc"[..], false));
    }

    proptest! {
        #[test]
        fn chunked_survives_any_split(body in proptest::collection::vec(any::<u8>(), 0..600),
                                      sizes in proptest::collection::vec(1usize..50, 0..20),
                                      cut in proptest::collection::vec(0usize..700, 0..8)) {
            let wire = chunked(&body, &sizes);
            let mut cuts: Vec<usize> = cut.into_iter().map(|c| c % (wire.len() + 1)).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for c in cuts.into_iter().chain([wire.len()]) {
                pieces.push(&wire[prev..c]);
                prev = c;
            }
            let (got, done) = decode_all(Framing::Chunked, &pieces).unwrap();
            prop_assert!(done);
            prop_assert_eq!(got, body);
        }

        #[test]
        fn head_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_head(&bytes, false);
        }

        #[test]
        fn chunked_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_all(Framing::Chunked, &[&bytes]);
        }

        #[test]
        fn length_framing_takes_exactly_n(n in 0u64..500, extra in 0usize..50) {
            let wire = vec![b'x'; n as usize + extra];
            let mut state = BodyState::new(Framing::Length(n));
            let used = state.feed(&wire, &mut |_: &[u8]| Ok(())).unwrap();
            prop_assert_eq!(used as u64, n);
            prop_assert!(state.is_done());
        }
    }
}
