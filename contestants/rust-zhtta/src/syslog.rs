//! The syslog listener (spec §7): TCP with octet-counting or newline framing decided per
//! message, and UDP with one message per datagram; and RFC 5425 syslog over TLS (spec §15),
//! octet counting only. In count mode messages are counted, never buffered: the framer is a
//! state machine over the byte stream. In parse mode (spec §7.1) the `Gatherer` hands each
//! whole message to `syslogparse`; nothing is ever printed.

use crate::stats::{Stats, add, bump};
use crate::stream::Stream;
use crate::syslogparse;
use crate::threads::ThreadBudget;
use rustls::ServerConfig;
use std::io::{self, Read};
use std::net::{IpAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::thread;

const READ_BUFFER: usize = 32 * 1024;
const CONNECTION_STACK: usize = 64 * 1024;
/// A length prefix longer than this cannot be a real MSG-LEN (RFC 5425's grammar allows
/// ten digits); the frame is then read as a newline-framed message that happens to start
/// with digits, or over TLS refused.
const MAX_LENGTH_DIGITS: u64 = 10;

#[derive(Clone, Copy, Debug, Default)]
enum State {
    /// Between messages.
    #[default]
    Start,
    /// Reading an octet count: its value so far and how many digits were read.
    Length { value: u64, digits: u64 },
    /// Skipping the body of an octet-counted message.
    Counted { left: u64, total: u64 },
    /// Inside a newline-framed message of `len` bytes so far.
    Line { len: u64 },
    /// RFC 5425 only: a frame that is not `MSG-LEN SP` with MSG-LEN a decimal without a
    /// leading zero. Nothing after it is framed or counted.
    Refused,
}

/// Counts complete messages in a TCP byte stream, however it is split into reads.
#[derive(Default)]
pub struct Framer {
    state: State,
    /// RFC 5425 (spec §15): octet counting only, and a bad MSG-LEN ends the stream.
    octet_only: bool,
}

impl Framer {
    /// A framer for RFC 5425 over TLS: every frame octet-counted.
    pub fn octet_counted() -> Framer {
        Framer {
            state: State::Start,
            octet_only: true,
        }
    }

    /// A bad MSG-LEN was met (RFC 5425 only): the connection is to be closed.
    pub fn refused(&self) -> bool {
        matches!(self.state, State::Refused)
    }

    /// Feeds bytes and calls `on_message(length)` for each message they complete.
    pub fn feed(&mut self, data: &[u8], mut on_message: impl FnMut(u64)) {
        self.feed_at(data, |len, _, _| on_message(len));
    }

    /// `feed`, telling also where in `data` each message ends and the next frame begins.
    pub fn feed_at(&mut self, all: &[u8], mut on_message: impl FnMut(u64, usize, usize)) {
        let mut data = all;
        while !data.is_empty() {
            let at = all.len() - data.len();
            let used = match self.state {
                State::Refused => return,
                State::Start | State::Length { .. } => {
                    let (next, ended) = if self.octet_only {
                        (octet_length(self.state, data[0]), None)
                    } else {
                        text_length(self.state, data[0])
                    };
                    if let Some(len) = ended {
                        on_message(len, at, at + 1);
                    }
                    self.state = next;
                    1
                }
                State::Counted { left, total } => {
                    let take = left.min(data.len() as u64);
                    self.state = if take == left {
                        on_message(total, at + take as usize, at + take as usize);
                        State::Start
                    } else {
                        State::Counted {
                            left: left - take,
                            total,
                        }
                    };
                    take as usize
                }
                State::Line { len } => match data.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        on_message(len + end as u64, at + end, at + end + 1);
                        self.state = State::Start;
                        end + 1
                    }
                    None => {
                        self.state = State::Line {
                            len: len + data.len() as u64,
                        };
                        data.len()
                    }
                },
            };
            data = &data[used..];
        }
    }
}

/// `MSG-LEN SP`, one byte at a time, the same in both framings (RFC 6587's octet counting,
/// RFC 5425's): `NONZERO-DIGIT *9DIGIT`, then a space; `None` where `byte` does not go on
/// with it, which each framing reads its own way.
fn msg_len(state: State, byte: u8) -> Option<State> {
    Some(match (state, byte) {
        (State::Start, digit @ b'1'..=b'9') => State::Length {
            value: u64::from(digit - b'0'),
            digits: 1,
        },
        (State::Length { value, .. }, b' ') => State::Counted {
            left: value,
            total: value,
        },
        (State::Length { value, digits }, digit @ b'0'..=b'9') if digits < MAX_LENGTH_DIGITS => {
            State::Length {
                value: value * 10 + u64::from(digit - b'0'),
                digits: digits + 1,
            }
        }
        _ => return None,
    })
}

/// §7's start of a TCP frame, one byte at a time: digits and a space make an octet count;
/// anything else, digits ending in a newline included, is a newline-framed message (the
/// length of one that ends at this byte comes back with the next state).
fn text_length(state: State, byte: u8) -> (State, Option<u64>) {
    if let Some(next) = msg_len(state, byte) {
        return (next, None);
    }
    let next = match (state, byte) {
        (State::Start, b'\n') => State::Start,
        (State::Length { digits, .. }, b'\n') => return (State::Start, Some(digits)),
        (State::Length { digits, .. }, _) => State::Line { len: digits + 1 },
        _ => State::Line { len: 1 },
    };
    (next, None)
}

/// RFC 5425's `MSG-LEN SP` (spec §15): anything else is refused.
fn octet_length(state: State, byte: u8) -> State {
    msg_len(state, byte).unwrap_or(State::Refused)
}

/// Whole messages from a TCP byte stream, for parsing: a message inside one read is a slice
/// of it, one spread over reads is gathered in `pending` (every byte since the last
/// message ended, of which the message is the last `length`).
#[derive(Default)]
pub struct Gatherer {
    framer: Framer,
    pending: Vec<u8>,
}

impl Gatherer {
    fn new(framer: Framer) -> Gatherer {
        Gatherer {
            framer,
            pending: Vec::new(),
        }
    }

    pub fn feed(&mut self, data: &[u8], mut on_message: impl FnMut(&[u8])) {
        let Gatherer { framer, pending } = self;
        let mut from = 0;
        framer.feed_at(data, |len, end, next| {
            let len = len as usize;
            if pending.is_empty() {
                on_message(&data[end - len..end]);
            } else {
                pending.extend_from_slice(&data[from..end]);
                on_message(&pending[pending.len() - len..]);
                pending.clear();
            }
            from = next;
        });
        pending.extend_from_slice(&data[from..]);
    }
}

/// A connection's parse counts (spec §7.1), added to the server's once per read.
#[derive(Default)]
struct Tally {
    parsed: u64,
    malformed: u64,
    rfc3164: u64,
    sd_elements: u64,
    msg_bytes: u64,
}

impl Tally {
    fn add(&mut self, message: &[u8]) {
        match syslogparse::parse(message) {
            None => self.malformed += 1,
            Some(m) => {
                self.parsed += 1;
                self.rfc3164 += u64::from(m.rfc3164);
                self.sd_elements += m.sd_elements;
                self.msg_bytes += m.msg.len() as u64;
            }
        }
    }

    fn publish(self, stats: &Stats) {
        add(&stats.syslog_parsed, self.parsed);
        add(&stats.syslog_malformed, self.malformed);
        add(&stats.syslog_rfc3164, self.rfc3164);
        add(&stats.syslog_sd_elements, self.sd_elements);
        add(&stats.syslog_msg_bytes, self.msg_bytes);
    }
}

/// The length of a UDP message: the datagram without one trailing newline.
pub fn datagram_len(datagram: &[u8]) -> u64 {
    datagram.strip_suffix(b"\n").unwrap_or(datagram).len() as u64
}

pub fn start(
    address: IpAddr,
    port: u16,
    stats: &'static Stats,
    threads: &'static ThreadBudget,
) -> io::Result<()> {
    let tcp = TcpListener::bind((address, port))?;
    let udp = UdpSocket::bind((address, port))?;
    thread::Builder::new()
        .name("syslog-tcp".into())
        .spawn(move || accept_tcp(&tcp, stats, threads))?;
    thread::Builder::new()
        .name("syslog-udp".into())
        .spawn(move || receive_udp(&udp, stats))?;
    Ok(())
}

/// RFC 5425 syslog (spec §15) on `listener`: TLS, then octet-counted frames, counted as
/// the TCP ones are and by the same counters; each sender on a thread of its own.
pub fn start_tls(
    listener: TcpListener,
    config: &Arc<ServerConfig>,
    stats: &'static Stats,
    threads: &'static ThreadBudget,
) -> io::Result<()> {
    let config = Arc::clone(config);
    thread::Builder::new()
        .name("syslog-tls".into())
        .spawn(move || {
            accept(&listener, stats, threads, move |tcp| {
                Stream::tls(tcp, Arc::clone(&config)).ok()
            })
        })?;
    Ok(())
}

fn accept_tcp(listener: &TcpListener, stats: &'static Stats, threads: &'static ThreadBudget) {
    accept(listener, stats, threads, |tcp| Some(Stream::plain(tcp)));
}

/// Accepts senders for good; `wrap` makes a sender's stream (cleartext, or TLS whose
/// handshake happens in the sender's thread).
fn accept(
    listener: &TcpListener,
    stats: &'static Stats,
    threads: &'static ThreadBudget,
    wrap: impl Fn(TcpStream) -> Option<Stream>,
) {
    for tcp in listener.incoming() {
        let Ok(tcp) = tcp else {
            // Out of descriptors or a connection reset while queued: keep listening.
            thread::sleep(std::time::Duration::from_millis(10));
            continue;
        };
        bump(&stats.syslog_tcp_connections);
        let Some(stream) = wrap(tcp) else { continue };
        // If no thread can be started, dropping the stream refuses this sender only.
        threads.spawn(CONNECTION_STACK, move || receive_tcp(stream, stats));
    }
}

/// A sender's messages, counted (or parsed too, spec §7.1) as they arrive. Over TLS the
/// frames are octet-counted only (RFC 5425), and a bad MSG-LEN ends the connection.
fn receive_tcp(stream: Stream, stats: &'static Stats) {
    let framer = if stream.is_tls() {
        Framer::octet_counted()
    } else {
        Framer::default()
    };
    if stats
        .syslog_parse_mode
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        parse_tcp(&stream, Gatherer::new(framer), stats);
    } else {
        count_tcp(&stream, framer, stats);
    }
    // Over TLS, close_notify: an answer to the sender's, or the end after a bad frame.
    let _ = stream.close_write();
}

/// Reads a connection until it closes, or `on_read` returns false.
fn each_read(mut stream: &Stream, mut on_read: impl FnMut(&[u8]) -> bool) {
    let mut buffer = vec![0; READ_BUFFER];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) if on_read(&buffer[..n]) => {}
            Ok(_) => return,
        }
    }
}

fn count_tcp(stream: &Stream, mut framer: Framer, stats: &'static Stats) {
    each_read(stream, |data| {
        let (mut messages, mut bytes) = (0, 0);
        framer.feed(data, |len| {
            messages += 1;
            bytes += len;
        });
        add(&stats.syslog_received, messages);
        add(&stats.syslog_bytes, bytes);
        !framer.refused()
    });
}

fn parse_tcp(stream: &Stream, mut gatherer: Gatherer, stats: &'static Stats) {
    each_read(stream, |data| {
        let (mut messages, mut bytes, mut tally) = (0, 0, Tally::default());
        gatherer.feed(data, |message| {
            messages += 1;
            bytes += message.len() as u64;
            tally.add(message);
        });
        // Parse counts first: a reader that sees `received` complete sees them complete.
        tally.publish(stats);
        add(&stats.syslog_received, messages);
        add(&stats.syslog_bytes, bytes);
        !gatherer.framer.refused()
    });
}

fn receive_udp(socket: &UdpSocket, stats: &'static Stats) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        if let Ok((n, _)) = socket.recv_from(&mut buffer) {
            let len = datagram_len(&buffer[..n]);
            if len > 0
                && stats
                    .syslog_parse_mode
                    .load(std::sync::atomic::Ordering::Relaxed)
            {
                let mut tally = Tally::default();
                tally.add(&buffer[..len as usize]);
                tally.publish(stats);
            }
            if len > 0 {
                bump(&stats.syslog_received);
                add(&stats.syslog_bytes, len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&[u8]]) -> Vec<u64> {
        let mut framer = Framer::default();
        let mut lengths = Vec::new();
        for part in parts {
            framer.feed(part, |len| lengths.push(len));
        }
        lengths
    }

    #[test]
    fn octet_counted_messages() {
        assert_eq!(frames(&[b"5 hello3 abc"]), vec![5, 3]);
    }

    #[test]
    fn octet_counted_body_may_contain_newlines() {
        assert_eq!(frames(&[b"6 a\nb\nc\n"]), vec![6]);
    }

    #[test]
    fn newline_framed_messages_and_empty_lines() {
        assert_eq!(frames(&[b"<14>hello\n\n<14>x\n"]), vec![9, 5]);
    }

    #[test]
    fn framing_may_be_mixed_on_one_connection() {
        assert_eq!(
            frames(&[b"<1>a\n3 xyz<2>bc\n10 0123456789"]),
            vec![4, 3, 5, 10]
        );
    }

    #[test]
    fn a_message_split_across_reads_is_one_message() {
        assert_eq!(
            frames(&[b"1", b"2 hello", b" world!", b"<1", b"4>x\n"]),
            vec![12, 5]
        );
    }

    #[test]
    fn an_incomplete_message_is_not_counted() {
        assert_eq!(frames(&[b"10 short"]), Vec::<u64>::new());
        assert_eq!(frames(&[b"<14>no newline"]), Vec::<u64>::new());
    }

    #[test]
    fn digits_without_a_space_are_a_newline_framed_message() {
        assert_eq!(frames(&[b"12ab\n123\n"]), vec![4, 3]);
        assert_eq!(frames(&[b"123456789012345 x\n"]), vec![17]);
    }

    #[test]
    fn the_gatherer_hands_over_the_specs_framed_vectors_whole_however_the_stream_is_cut() {
        let vectors = crate::spec_vectors::syslog();
        for vector in crate::spec_vectors::entries(&vectors, "framed") {
            let stream = crate::spec_vectors::latin1(crate::spec_vectors::string(vector, "stream"));
            for step in 1..8 {
                let mut gatherer = Gatherer::default();
                let mut seen = Vec::new();
                for piece in stream.chunks(step) {
                    gatherer.feed(piece, |m| seen.push(crate::spec_vectors::text(m)));
                }
                assert_eq!(
                    serde_json::json!(seen),
                    vector["messages"],
                    "reads of {step}"
                );
            }
        }
    }

    /// The lengths an RFC 5425 framer counts, and whether it refused the stream.
    fn octet_frames(parts: &[&[u8]]) -> (Vec<u64>, bool) {
        let mut framer = Framer::octet_counted();
        let mut lengths = Vec::new();
        for part in parts {
            framer.feed(part, |len| lengths.push(len));
        }
        (lengths, framer.refused())
    }

    #[test]
    fn rfc_5425_frames_are_counted_however_they_are_cut() {
        assert_eq!(octet_frames(&[b"5 hello3 abc"]), (vec![5, 3], false));
        assert_eq!(
            octet_frames(&[b"1", b"0 0123", b"456789"]),
            (vec![10], false)
        );
        assert_eq!(octet_frames(&[b"6 a\nb\nc\n"]), (vec![6], false));
        assert_eq!(octet_frames(&[b"4 abc"]), (vec![], false), "incomplete");
    }

    #[test]
    fn a_bad_msg_len_is_refused_and_nothing_after_it_counts() {
        for bad in [
            &b"05 hello"[..],
            b"0 x",
            b"<14>newline framed\n",
            b"12345678901 x",
            b"5x hello",
            b"\n",
        ] {
            let stream = [&b"1 a"[..], bad, b"1 b"].concat();
            assert_eq!(octet_frames(&[&stream]), (vec![1], true), "{bad:?}");
        }
        assert_eq!(
            octet_frames(&[b"9999999999 x"]),
            (vec![], false),
            "ten digits"
        );
    }

    #[test]
    fn the_gatherer_refuses_as_its_framer_does() {
        let mut gatherer = Gatherer::new(Framer::octet_counted());
        let mut seen = Vec::new();
        gatherer.feed(b"3 abc", |m| seen.push(m.to_vec()));
        gatherer.feed(b"x3 def", |m| seen.push(m.to_vec()));
        assert_eq!(seen, [b"abc".to_vec()]);
        assert!(gatherer.framer.refused());
    }

    #[test]
    fn udp_strips_one_trailing_newline() {
        assert_eq!(datagram_len(b"<14>hi\n"), 6);
        assert_eq!(datagram_len(b"<14>hi"), 6);
        assert_eq!(datagram_len(b"\n"), 0);
    }
}
