//! The syslog listener (spec §7): TCP with octet-counting or newline framing decided per
//! message, and UDP with one message per datagram. Messages are counted, never parsed or
//! printed, and never buffered: the framer is a state machine over the byte stream.

use crate::stats::{Stats, add, bump};
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
    pub fn feed(&mut self, mut data: &[u8], mut on_message: impl FnMut(u64)) {
        while !data.is_empty() {
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
                            on_message(digits);
                            State::Start
                        }
                        _ => State::Line { len: digits + 1 },
                    };
                    1
                }
                State::Counted { left, total } => {
                    let take = left.min(data.len() as u64);
                    self.state = if take == left {
                        on_message(total);
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
                        on_message(len + end as u64);
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
        threads.spawn(CONNECTION_STACK, move || count_tcp(stream, stats));
    }
}

fn count_tcp(mut stream: TcpStream, stats: &'static Stats) {
    let mut framer = Framer::default();
    let mut buffer = vec![0; READ_BUFFER];
    loop {
        let n = match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let (mut messages, mut bytes) = (0, 0);
        framer.feed(&buffer[..n], |len| {
            messages += 1;
            bytes += len;
        });
        add(&stats.syslog_received, messages);
        add(&stats.syslog_bytes, bytes);
    }
}

fn receive_udp(socket: &UdpSocket, stats: &'static Stats) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        if let Ok((n, _)) = socket.recv_from(&mut buffer) {
            let len = datagram_len(&buffer[..n]);
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
    fn udp_strips_one_trailing_newline() {
        assert_eq!(datagram_len(b"<14>hi\n"), 6);
        assert_eq!(datagram_len(b"<14>hi"), 6);
        assert_eq!(datagram_len(b"\n"), 0);
    }
}
