//! Bytes read from one connection and the parse of the answer they carry. Shared by the
//! epoll clients and the io_uring loop so both read answers the same way.

use std::time::Instant;

use crate::http::{parse_head, BodyState, Head, ParseError, MAX_HEAD_BYTES};
use crate::stats::ErrorKind;

const INITIAL_BUFFER: usize = 4 * 1024;
/// Read buffers a worker keeps for its clients to borrow; more are freed.
const POOLED_BUFFERS: usize = 256;

thread_local! {
    /// This worker thread's spare read buffers. A held connection (a push stream, an idle
    /// kept-alive one) borrows one only while bytes are being read and parsed, so thousands
    /// of connections share a few buffers instead of holding 4 KiB each.
    static SPARE_BUFFERS: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The last header section this worker parsed and what it said. A server repeats its
    /// head byte for byte from one answer to the next (until its Date changes), on all of a
    /// worker's connections alike, and parsing is a pure function of those bytes, so a repeat
    /// is recognised by comparing them. Kept per worker, not per connection: thousands of
    /// held streams would each keep a copy of the same ~200 bytes.
    static LAST_HEAD: std::cell::RefCell<LastHead> = const { std::cell::RefCell::new(LastHead { bytes: Vec::new(), parsed: None }) };
}

/// A header section's bytes and its parse (with whether it answered a HEAD request).
struct LastHead {
    bytes: Vec<u8>,
    parsed: Option<(bool, Head)>,
}

/// A complete answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub close: bool,
    pub first_byte: Instant,
}

/// The answer being read: its head once parsed, and when its first byte came.
#[derive(Debug, Default)]
pub struct Progress {
    head: Option<(Head, BodyState)>,
    pub first_byte: Option<Instant>,
}

impl Progress {
    /// The answer's status, once its header section is parsed.
    pub fn status(&self) -> Option<u16> {
        self.head.as_ref().map(|(h, _)| h.status)
    }

    /// The answer a peer's close completes (a body delimited by the close), if any.
    pub fn ended_by_close(&self) -> Option<Answer> {
        match &self.head {
            Some((h, BodyState::UntilClose)) => Some(answer(h, self.first_byte)),
            _ => None,
        }
    }
}

#[derive(Default)]
pub struct Inbox {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Inbox {
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Gives the read buffer back to the worker's pool when nothing unparsed is in it (the
    /// next read borrows one again).
    pub fn lend_back(&mut self) {
        if self.start != self.end || self.buf.is_empty() {
            return;
        }
        self.clear();
        let buf = std::mem::take(&mut self.buf);
        if buf.len() == INITIAL_BUFFER {
            SPARE_BUFFERS.with_borrow_mut(|pool| {
                if pool.len() < POOLED_BUFFERS {
                    pool.push(buf);
                }
            });
        }
    }

    /// The bytes read and not yet parsed.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` unread bytes as parsed.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Nothing unparsed is left (no bytes beyond the last answer).
    pub fn is_drained(&self) -> bool {
        self.start == self.end
    }

    /// Free space for the next read, at most `limit` bytes, after making room.
    pub fn spare(&mut self, limit: Option<usize>) -> Result<&mut [u8], ErrorKind> {
        self.make_room()?;
        let stop = limit.map_or(self.buf.len(), |l| self.buf.len().min(self.end + l));
        Ok(&mut self.buf[self.end..stop])
    }

    /// Counts `n` bytes just read into `spare`.
    pub fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// Parses what the buffer holds; returns the answer once it is complete. Interim 1xx
    /// answers are skipped; body bytes go to `sink`.
    pub fn advance(
        &mut self,
        progress: &mut Progress,
        head_request: bool,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
    ) -> Result<Option<Answer>, ErrorKind> {
        let first_byte = progress.first_byte;
        self.advance_head(progress, head_request)?;
        let Some((h, body)) = progress.head.as_mut() else {
            return Ok(None);
        };
        let used = body.feed(&self.buf[self.start..self.end], sink)?;
        self.start += used;
        Ok(body.is_done().then(|| answer(h, first_byte)))
    }

    /// Parses the answer's header section if the buffer holds it (skipping interim 1xx
    /// answers), leaving the body unread.
    pub fn advance_head(
        &mut self,
        progress: &mut Progress,
        head_request: bool,
    ) -> Result<(), ErrorKind> {
        while progress.head.is_none() {
            let Some(h) = self.parse_head(head_request)? else {
                return Ok(());
            };
            self.start += h.head_len;
            if h.status >= 200 {
                progress.head = Some((h, BodyState::new(h.framing)));
            }
        }
        Ok(())
    }

    /// `parse_head` of the unparsed bytes, remembered for the next identical head (on any
    /// of this worker's connections).
    fn parse_head(&mut self, head_request: bool) -> Result<Option<Head>, ErrorKind> {
        let bytes = &self.buf[self.start..self.end];
        LAST_HEAD.with_borrow_mut(|last| {
            if let Some((request, head)) = last.parsed {
                if request == head_request && bytes.starts_with(&last.bytes) {
                    return Ok(Some(head));
                }
            }
            let parsed = parse_head(bytes, head_request)?;
            if let Some(head) = parsed {
                last.bytes.clear();
                last.bytes.extend_from_slice(&bytes[..head.head_len]);
                last.parsed = Some((head_request, head));
            }
            Ok(parsed)
        })
    }

    /// Frees buffer space for the next read, growing only while a header section is
    /// incomplete (bounded by the 64 KiB limit, which `parse_head` enforces).
    fn make_room(&mut self) -> Result<(), ErrorKind> {
        if self.buf.is_empty() {
            self.buf = SPARE_BUFFERS
                .with_borrow_mut(Vec::pop)
                .unwrap_or_else(|| vec![0; INITIAL_BUFFER]);
        }
        if self.start == self.end {
            self.clear();
        }
        if self.end < self.buf.len() {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            return Ok(());
        }
        if self.buf.len() > MAX_HEAD_BYTES {
            return Err(ParseError::HeadTooLarge.into());
        }
        let grown = (self.buf.len() * 2).min(MAX_HEAD_BYTES + 1);
        self.buf.resize(grown, 0);
        Ok(())
    }
}

/// A body sink for answers whose body is not looked at.
pub fn discard(_: &[u8]) -> Result<(), ParseError> {
    Ok(())
}

fn answer(head: &Head, first_byte: Option<Instant>) -> Answer {
    Answer {
        status: head.status,
        close: head.close,
        first_byte: first_byte.unwrap_or_else(Instant::now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(inbox: &mut Inbox, progress: &mut Progress, bytes: &[u8]) -> Option<Answer> {
        let mut rest = bytes;
        loop {
            let spare = inbox.spare(None).unwrap();
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            inbox.filled(n);
            rest = &rest[n..];
            let done = inbox.advance(progress, false, &mut |_| Ok(())).unwrap();
            if done.is_some() || rest.is_empty() {
                return done;
            }
        }
    }

    #[test]
    fn an_answer_split_anywhere_completes_once_and_leaves_what_follows() {
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for split in 1..answer.len() {
            let mut inbox = Inbox::default();
            let mut progress = Progress::default();
            assert!(feed(&mut inbox, &mut progress, &answer[..split]).is_none());
            let done = feed(&mut inbox, &mut progress, &answer[split..]).expect("complete");
            assert_eq!(done.status, 200);
            assert!(inbox.is_drained());
        }
        let mut inbox = Inbox::default();
        let mut progress = Progress::default();
        let mut two = answer.to_vec();
        two.extend_from_slice(b"HTTP/1.1");
        assert!(feed(&mut inbox, &mut progress, &two).is_some());
        assert!(!inbox.is_drained());
    }

    #[test]
    fn a_repeated_head_reads_as_before_on_any_connection_and_a_changed_one_is_parsed_again() {
        // Two connections of one worker: the head remembered is the worker's.
        let mut inboxes = [Inbox::default(), Inbox::default()];
        let first = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let changed = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes";
        for (i, bytes) in [
            (0, &first[..]),
            (1, &first[..]),
            (1, &changed[..]),
            (0, &first[..]),
        ] {
            let mut progress = Progress::default();
            let answer = feed(&mut inboxes[i], &mut progress, bytes).expect("complete");
            assert_eq!(answer.status, 200);
            assert!(
                inboxes[i].is_drained(),
                "the body length came from this head"
            );
        }
        let inbox = &mut inboxes[0];
        let mut progress = Progress::default();
        let teapot = b"HTTP/1.1 418 No\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            feed(inbox, &mut progress, teapot).map(|a| a.status),
            Some(418)
        );
    }

    #[test]
    fn a_drained_buffer_goes_back_to_the_pool_and_unparsed_bytes_stay() {
        let mut inbox = Inbox::default();
        let mut progress = Progress::default();
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab";
        assert!(feed(&mut inbox, &mut progress, head).is_none());
        // A head cut in two is kept with its buffer.
        let mut cut = Inbox::default();
        feed(&mut cut, &mut Progress::default(), b"HTTP/1.1 200");
        cut.lend_back();
        assert_eq!(cut.unread(), b"HTTP/1.1 200");
        assert!(feed(&mut inbox, &mut progress, b"cd").is_some());
        let held = inbox.buf.as_ptr();
        inbox.lend_back();
        assert!(inbox.buf.is_empty());
        let mut other = Inbox::default();
        other.spare(None).unwrap();
        assert_eq!(
            other.buf.as_ptr(),
            held,
            "the next read borrows the same buffer"
        );
    }

    #[test]
    fn interim_answers_are_skipped_and_a_close_ends_an_unframed_body() {
        let mut inbox = Inbox::default();
        let mut progress = Progress::default();
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\npartial";
        assert!(feed(&mut inbox, &mut progress, bytes).is_none());
        assert_eq!(progress.ended_by_close().map(|a| a.status), Some(200));
    }
}
