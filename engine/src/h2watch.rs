//! Wire: a watch over the HTTP/2 frames a server sends, read from the bytes as they come in
//! (before the `h2` crate decodes them), for the abuses `h2` does not bound by itself: a
//! header block that never ends, and floods of SETTINGS or PING frames, each of which `h2`
//! answers (an acknowledgement per frame). It keeps nine bytes of a frame header and a few
//! counts, whatever the server sends.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use crate::stats::ErrorKind;

/// The longest a header block may stay open (HEADERS or PUSH_PROMISE without END_HEADERS,
/// until the CONTINUATION that ends it): a server sends a block's frames back to back.
pub const HEADER_BLOCK_LIMIT: Duration = Duration::from_secs(1);
/// SETTINGS frames, or PING frames, a server may send within `FLOOD_WINDOW`: a server sends
/// one SETTINGS frame, and now and then another, and a PING now and then (a keep-alive, a
/// bandwidth probe); each one costs the engine an acknowledgement.
pub const FLOOD_FRAMES: u32 = 100;
pub const FLOOD_WINDOW: Duration = Duration::from_secs(1);

const HEAD_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// Frames of one kind counted within a window that starts at the first of them.
#[derive(Default)]
struct Burst {
    since: Option<Instant>,
    count: u32,
}

impl Burst {
    /// Counts one frame; whether more than `FLOOD_FRAMES` came within `FLOOD_WINDOW`.
    fn flooded(&mut self) -> bool {
        let now = Instant::now();
        match self.since {
            Some(since) if now.duration_since(since) < FLOOD_WINDOW => self.count += 1,
            _ => (self.since, self.count) = (Some(now), 1),
        }
        self.count > FLOOD_FRAMES
    }
}

/// The frames of one connection as they are read, whole or cut anywhere.
pub struct Watch {
    head: [u8; HEAD_LEN],
    /// Bytes of `head` read so far.
    have: usize,
    /// Payload bytes of the current frame still to pass over.
    skip: usize,
    block_open: bool,
    /// The limit of a header block, and when the open one must have ended.
    block_limit: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    settings: Burst,
    pings: Burst,
}

impl Watch {
    /// A watch whose header blocks must end within `block_limit`.
    pub fn new(block_limit: Duration) -> Watch {
        Watch {
            head: [0; HEAD_LEN],
            have: 0,
            skip: 0,
            block_open: false,
            block_limit,
            deadline: None,
            settings: Burst::default(),
            pings: Burst::default(),
        }
    }

    /// Reads the frames `bytes` hold or continue; the kind of abuse they show, if any.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), ErrorKind> {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (HEAD_LEN - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == HEAD_LEN {
                self.have = 0;
                let [a, b, c, kind, flags, ..] = self.head;
                self.skip = u32::from_be_bytes([0, a, b, c]) as usize;
                self.frame(kind, flags)?;
            }
        }
        if !self.block_open {
            self.deadline = None;
        } else if self.deadline.is_none() {
            self.deadline = Some(Box::pin(tokio::time::sleep(self.block_limit)));
        }
        Ok(())
    }

    fn frame(&mut self, kind: u8, flags: u8) -> Result<(), ErrorKind> {
        match kind {
            HEADERS | PUSH_PROMISE => self.block_open = flags & END_HEADERS == 0,
            CONTINUATION if flags & END_HEADERS != 0 => self.block_open = false,
            SETTINGS if flags & ACK == 0 && self.settings.flooded() => {
                return Err(ErrorKind::H2SettingsFlood)
            }
            PING if flags & ACK == 0 && self.pings.flooded() => return Err(ErrorKind::H2PingFlood),
            _ => {}
        }
        Ok(())
    }

    /// Whether a header block has stayed open past its limit; otherwise the task is woken
    /// when it does (the connection's reader polls this before each read).
    pub fn overdue(&mut self, cx: &mut Context<'_>) -> bool {
        self.deadline
            .as_mut()
            .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 1];
        out.extend_from_slice(payload);
        out
    }

    #[tokio::test]
    async fn a_header_block_is_open_until_a_continuation_ends_it_however_the_bytes_are_cut() {
        let mut bytes = frame(HEADERS, 0, &[0x88; 40]);
        bytes.extend(frame(CONTINUATION, 0, &[0; 20]));
        let end = frame(CONTINUATION, END_HEADERS, &[0; 3]);
        let mut watch = Watch::new(HEADER_BLOCK_LIMIT);
        for piece in bytes.chunks(7) {
            watch.feed(piece).unwrap();
        }
        assert!(watch.block_open && watch.deadline.is_some());
        watch.feed(&end).unwrap();
        assert!(!watch.block_open && watch.deadline.is_none());
        watch.feed(&frame(HEADERS, END_HEADERS, &[0x88])).unwrap();
        assert!(!watch.block_open);
    }

    #[test]
    fn the_101st_settings_or_ping_within_a_second_is_a_flood_and_acks_are_not_counted() {
        let mut watch = Watch::new(HEADER_BLOCK_LIMIT);
        let settings = frame(SETTINGS, 0, &[0, 3, 0, 0, 0, 100]);
        let acks = frame(SETTINGS, ACK, &[]).repeat(500);
        watch.feed(&acks).unwrap();
        watch.feed(&settings.repeat(100)).unwrap();
        assert_eq!(watch.feed(&settings), Err(ErrorKind::H2SettingsFlood));
        let ping = frame(PING, 0, &[7; 8]);
        let mut watch = Watch::new(HEADER_BLOCK_LIMIT);
        watch.feed(&frame(PING, ACK, &[7; 8]).repeat(500)).unwrap();
        watch.feed(&ping.repeat(100)).unwrap();
        assert_eq!(watch.feed(&ping), Err(ErrorKind::H2PingFlood));
    }
}
