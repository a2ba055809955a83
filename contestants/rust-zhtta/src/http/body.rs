//! Request bodies as a `Read`: by Content-Length or by chunked transfer coding.

use super::conn::{Conn, Request};
use super::framing::{line_end, parse_chunk_line};
use std::io::{self, Read};

/// A chunk-size line or trailer line longer than this is hostile, not a body.
const MAX_FRAMING_LINE: usize = 8 * 1024;

enum State {
    Remaining(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailers,
    Done,
}

pub struct BodyReader<'c> {
    conn: &'c mut Conn,
    state: State,
    continue_pending: bool,
}

impl<'c> BodyReader<'c> {
    pub fn new(conn: &'c mut Conn, request: &Request) -> BodyReader<'c> {
        let state = if request.chunked {
            State::ChunkSize
        } else {
            match request.content_length {
                Some(n) if n > 0 => State::Remaining(n),
                _ => State::Done,
            }
        };
        let continue_pending = request.expect_continue && !matches!(state, State::Done);
        BodyReader {
            conn,
            state,
            continue_pending,
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        match self.conn.read_more()? {
            0 => Err(io::ErrorKind::UnexpectedEof.into()),
            _ => Ok(()),
        }
    }

    fn read_chunk_size(&mut self) -> io::Result<()> {
        loop {
            match parse_chunk_line(self.conn.buffered()).map_err(invalid)? {
                Some((used, size)) => {
                    self.conn.consume(used);
                    self.state = if size == 0 {
                        State::Trailers
                    } else {
                        State::ChunkData(size)
                    };
                    return Ok(());
                }
                None if self.conn.buffered().len() < MAX_FRAMING_LINE => self.fill()?,
                None => return Err(invalid("chunk line too long")),
            }
        }
    }

    fn read_chunk_end(&mut self) -> io::Result<()> {
        while self.conn.buffered().len() < 2 {
            self.fill()?;
        }
        if &self.conn.buffered()[..2] != b"\r\n" {
            return Err(invalid("chunk not followed by CRLF"));
        }
        self.conn.consume(2);
        self.state = State::ChunkSize;
        Ok(())
    }

    fn skip_trailers(&mut self) -> io::Result<()> {
        loop {
            let buffered = self.conn.buffered();
            match line_end(buffered).map_err(invalid)? {
                Some(2) => {
                    self.conn.consume(2);
                    self.state = State::Done;
                    return Ok(());
                }
                Some(line) => self.conn.consume(line),
                None if buffered.len() < MAX_FRAMING_LINE => self.fill()?,
                None => return Err(invalid("trailer line too long")),
            }
        }
    }

    fn read_data(&mut self, out: &mut [u8], remaining: u64) -> io::Result<(usize, u64)> {
        let want = out
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        let n = self.conn.read_into(&mut out[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok((n, remaining - n as u64))
    }
}

impl Read for BodyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if std::mem::take(&mut self.continue_pending) {
            self.conn.send_continue()?;
        }
        loop {
            match self.state {
                State::Done => return Ok(0),
                State::Remaining(remaining) | State::ChunkData(remaining) => {
                    let (n, left) = self.read_data(out, remaining)?;
                    let chunked = matches!(self.state, State::ChunkData(_));
                    self.state = match (chunked, left) {
                        (false, 0) => State::Done,
                        (false, left) => State::Remaining(left),
                        (true, 0) => State::ChunkEnd,
                        (true, left) => State::ChunkData(left),
                    };
                    return Ok(n);
                }
                State::ChunkSize => self.read_chunk_size()?,
                State::ChunkEnd => self.read_chunk_end()?,
                State::Trailers => self.skip_trailers()?,
            }
        }
    }
}

fn invalid(reason: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

#[derive(Debug)]
pub enum LimitedBodyError {
    TooLarge,
    Io(io::Error),
}

/// Reads a whole body that must not exceed `limit` bytes (JSON control bodies). A
/// Content-Length over the limit is refused before any byte is read.
pub fn read_limited(
    conn: &mut Conn,
    request: &Request,
    limit: usize,
) -> Result<Vec<u8>, LimitedBodyError> {
    if request.content_length.is_some_and(|n| n > limit as u64) && !request.chunked {
        return Err(LimitedBodyError::TooLarge);
    }
    let mut body = Vec::new();
    let reader = BodyReader::new(conn, request);
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut body)
        .map_err(LimitedBodyError::Io)?;
    if body.len() > limit {
        return Err(LimitedBodyError::TooLarge);
    }
    Ok(body)
}
