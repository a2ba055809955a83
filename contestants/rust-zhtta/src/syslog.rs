//! The syslog listener (spec §7): TCP with octet-counting or newline framing decided per
//! message, and UDP with one message per datagram. In count mode messages are counted, never
//! buffered: the framer is a state machine over the byte stream. In parse mode (spec §7.1)
//! the `Gatherer` hands each whole message to `syslogparse`; nothing is ever printed.

use crate::stats::{Stats, add, bump};
use crate::syslogparse;
use crate::threads::ThreadBudget;
use std::io::{self, Read};
use std::net::{IpAddr, TcpListener, TcpStream, UdpSocket};
use std::thread;

const READ_BUFFER: usize = 32 * 1024;
const CONNECTION_STACK: usize = 64 * 1024;
/// A length prefix longer than this cannot be a real MSG-LEN; the frame is then read as a
/// newline-framed message that happens to start with digits.
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
}

/// Counts complete messages in a TCP byte stream, however it is split into reads.
#[derive(Default)]
pub struct Framer {
    state: State,
}

impl Framer {
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
                State::Start => {
                    self.state = match data[0] {
                        b'\n' => State::Start,
                        digit @ b'1'..=b'9' => State::Length {
                            value: u64::from(digit - b'0'),
                            digits: 1,
                        },
                        _ => State::Line { len: 1 },
                    };
                    1
                }
                State::Length { value, digits } => {
                    self.state = match data[0] {
                        b' ' if value > 0 => State::Counted {
                            left: value,
                            total: value,
                        },
                        digit @ b'0'..=b'9' if digits < MAX_LENGTH_DIGITS => State::Length {
                            value: value * 10 + u64::from(digit - b'0'),
                            digits: digits + 1,
                        },
                        b'\n' => {
                            on_message(digits, at, at + 1);
                            State::Start
                        }
                        _ => State::Line { len: digits + 1 },
                    };
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

/// Whole messages from a TCP byte stream, for parsing: a message inside one read is a slice
/// of it, one spread over reads is gathered in `pending` (every byte since the last
/// message ended, of which the message is the last `length`).
#[derive(Default)]
pub struct Gatherer {
    framer: Framer,
    pending: Vec<u8>,
}

impl Gatherer {
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

fn accept_tcp(listener: &TcpListener, stats: &'static Stats, threads: &'static ThreadBudget) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            // Out of descriptors or a connection reset while queued: keep listening.
            thread::sleep(std::time::Duration::from_millis(10));
            continue;
        };
        bump(&stats.syslog_tcp_connections);
        // If no thread can be started, dropping the stream refuses this sender only.
        if stats
            .syslog_parse_mode
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            threads.spawn(CONNECTION_STACK, move || parse_tcp(stream, stats));
        } else {
            threads.spawn(CONNECTION_STACK, move || count_tcp(stream, stats));
        }
    }
}

/// Reads a connection until it closes, handing each read to `on_read`.
fn each_read(mut stream: TcpStream, mut on_read: impl FnMut(&[u8])) {
    let mut buffer = vec![0; READ_BUFFER];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => on_read(&buffer[..n]),
        }
    }
}

fn count_tcp(stream: TcpStream, stats: &'static Stats) {
    let mut framer = Framer::default();
    each_read(stream, |data| {
        let (mut messages, mut bytes) = (0, 0);
        framer.feed(data, |len| {
            messages += 1;
            bytes += len;
        });
        add(&stats.syslog_received, messages);
        add(&stats.syslog_bytes, bytes);
    });
}

fn parse_tcp(stream: TcpStream, stats: &'static Stats) {
    let mut gatherer = Gatherer::default();
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
    fn the_gatherer_hands_over_whole_messages_however_the_stream_is_cut() {
        let stream = b"13 <14>1 - h a - - -\n<14>1 - h b - - - x\n\n12x <0>1 - - -\n";
        for step in 1..8 {
            let mut gatherer = Gatherer::default();
            let mut seen = Vec::new();
            for piece in stream.chunks(step) {
                gatherer.feed(piece, |m| {
                    seen.push(String::from_utf8_lossy(m).into_owned())
                });
            }
            let want = [
                "<14>1 - h a -",
                " - -",
                "<14>1 - h b - - - x",
                "12x <0>1 - - -",
            ];
            assert_eq!(seen, want, "reads of {step}");
        }
    }

    #[test]
    fn udp_strips_one_trailing_newline() {
        assert_eq!(datagram_len(b"<14>hi\n"), 6);
        assert_eq!(datagram_len(b"<14>hi"), 6);
        assert_eq!(datagram_len(b"\n"), 0);
    }
}
