//! Wire stage: HTTP/2 frames written by hand (RFC 9113 §4.1), for the abuse behaviours that
//! send what the `h2` crate will not (a stream reset the instant it opens, a header block
//! that never ends), and the header of each frame the server sends, read back. The request's
//! header block is HPACK encoded here once (RFC 7541): static-table indices and literals
//! without indexing or Huffman coding, so that the server's dynamic table stays empty.

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;

pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// RST_STREAM's error code CANCEL (RFC 9113 §7): the client no longer wants the stream.
pub const CANCEL: u32 = 0x8;

/// Appends one frame: its 9-byte header, then `payload`.
pub fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// The preface and an empty SETTINGS frame (every setting at its initial value).
pub fn opening() -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    out
}

/// A `GET` of `path` at `authority`: its HPACK header block.
pub fn request_block(authority: &str, path: &str, tls: bool) -> Vec<u8> {
    // Static table (RFC 7541 Appendix A): 2 `:method GET`, 6 and 7 `:scheme http`/`https`;
    // names 1 `:authority` and 4 `:path` with literal values.
    let mut block = vec![0x82, if tls { 0x87 } else { 0x86 }];
    literal(&mut block, 4, path.as_bytes());
    literal(&mut block, 1, authority.as_bytes());
    block
}

/// A header field of a new name, `name: value`, as a literal without indexing.
pub fn new_name_literal(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    block.push(0x00);
    string(block, name);
    string(block, value);
}

/// A header field of a new name, `name: value`, as a literal with incremental indexing:
/// the server stores it in its dynamic table (RFC 7541 §6.2.1).
pub fn indexed_literal(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    block.push(0x40);
    string(block, name);
    string(block, value);
}

/// A literal without indexing whose name is static-table entry `index` (< 15).
fn literal(block: &mut Vec<u8>, index: u8, value: &[u8]) {
    block.push(index);
    string(block, value);
}

/// A string literal, no Huffman coding: its length as a 7-bit prefix integer, then it.
fn string(block: &mut Vec<u8>, text: &[u8]) {
    integer(block, 0x00, 7, text.len());
    block.extend_from_slice(text);
}

/// An HPACK integer (RFC 7541 §5.1) of an `n`-bit prefix, the byte's other bits `high`.
fn integer(block: &mut Vec<u8>, high: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        block.push(high | value as u8);
        return;
    }
    block.push(high | max as u8);
    value -= max;
    while value >= 128 {
        block.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    block.push(value as u8);
}

/// A frame header read from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
}

impl FrameHead {
    /// The header at the start of `bytes`, once all 9 bytes are there.
    pub fn parse(bytes: &[u8]) -> Option<FrameHead> {
        let head = bytes.get(..HEADER_LEN)?;
        Some(FrameHead {
            len: u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize,
            kind: head[3],
            flags: head[4],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hpack_integer_past_its_prefix_continues_in_seven_bit_groups() {
        // RFC 7541 §C.1.2: 1337 with a 5-bit prefix is 31, 154, 10.
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
        out.clear();
        integer(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
    }

    #[test]
    fn a_frame_header_reads_back_as_written() {
        let mut out = Vec::new();
        frame(&mut out, RST_STREAM, 0, 3, &CANCEL.to_be_bytes());
        assert_eq!(out.len(), HEADER_LEN + 4);
        let head = FrameHead::parse(&out).unwrap();
        assert_eq!((head.len, head.kind, head.flags), (4, RST_STREAM, 0));
        assert_eq!(&out[5..9], &3u32.to_be_bytes());
        assert_eq!(FrameHead::parse(&out[..8]), None);
    }
}
