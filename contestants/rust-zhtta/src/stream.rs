//! A connection's byte stream, in cleartext or TLS (spec §12, §15), shared by the threads
//! that use it: the connection thread reads it, and responders and emitters write to it
//! while that thread waits in a read, as they do on a plain socket.
//!
//! rustls is a state machine with no IO of its own, so one lock guards it, and nobody holds
//! that lock while waiting for the client: a read takes bytes from the socket first, and
//! only then locks to decrypt them (answering whatever TLS asks, such as the handshake).
//! A write encrypts and sends under the lock, so records never interleave.

use crate::clock::lock;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// At most this many bytes are taken from the socket per read: rustls refuses more input
/// once 16 KiB of plaintext waits, and input of this size never yields more than that.
const WIRE_READ: usize = 16 * 1024;
/// A read into a smaller buffer takes the socket's bytes through one of this size.
const SMALL_READ: usize = 512;
/// How long a close_notify may wait for room in the socket: it is owed, not vital.
const CLOSE_NOTIFY_WAIT: Duration = Duration::from_secs(1);

pub struct Stream {
    tcp: TcpStream,
    tls: Option<Mutex<Tls>>,
}

struct Tls {
    session: ServerConnection,
    /// No close_notify is owed: one was sent, or TLS or the socket failed.
    closed: bool,
}

impl Stream {
    pub fn plain(tcp: TcpStream) -> Stream {
        Stream { tcp, tls: None }
    }

    /// The server side of a TLS connection; the handshake happens in the first reads.
    pub fn tls(tcp: TcpStream, config: Arc<ServerConfig>) -> io::Result<Stream> {
        let session = ServerConnection::new(config).map_err(io::Error::other)?;
        let tls = Tls {
            session,
            closed: false,
        };
        Ok(Stream {
            tcp,
            tls: Some(Mutex::new(tls)),
        })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.peer_addr()
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(timeout)
    }

    /// Shuts the socket down without ceremony: after a failure, or to wake the thread that
    /// reads it. A TLS stream whose writing side goes owes no close_notify any more.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if how != Shutdown::Read
            && let Some(tls) = &self.tls
        {
            lock(tls).closed = true;
        }
        self.tcp.shutdown(how)
    }

    /// The server is done writing: over TLS, close_notify first (spec §12), so that the
    /// client can tell a complete answer from a cut one; then the socket's writing side.
    pub fn close_write(&self) -> io::Result<()> {
        if let Some(tls) = &self.tls {
            lock(tls).close_notify(&self.tcp);
        }
        self.tcp.shutdown(Shutdown::Write)
    }

    fn read_tls(&self, tls: &Mutex<Tls>, buf: &mut [u8]) -> io::Result<usize> {
        let mut small = [0; SMALL_READ];
        loop {
            if let Some(n) = lock(tls).plaintext(buf)? {
                return Ok(n);
            }
            // Unlocked while the client is awaited; the caller's buffer holds the bytes.
            let len = buf.len();
            let wire = if len >= SMALL_READ {
                &mut buf[..WIRE_READ.min(len)]
            } else {
                &mut small[..]
            };
            let n = (&self.tcp).read(wire)?;
            if n == 0 {
                // The client ended TCP, with or without its close_notify: the end all the same.
                return Ok(0);
            }
            lock(tls).take_in(&self.tcp, &wire[..n])?;
        }
    }
}

impl Tls {
    /// Decrypted bytes into `buf`: `Some(0)` after the client's close_notify, `None` if
    /// none are waiting.
    fn plaintext(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if buf.is_empty() {
            return Ok(Some(0));
        }
        match self.session.reader().read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Hands bytes from the socket to rustls and sends what it answers (handshake
    /// messages, session tickets, or the alert of a failure, after which the connection
    /// is done: an error here ends it).
    fn take_in(&mut self, tcp: &TcpStream, mut wire: &[u8]) -> io::Result<()> {
        while !wire.is_empty() {
            if self.session.read_tls(&mut wire)? == 0 {
                break; // the client's close_notify: nothing after it is read
            }
            if let Err(error) = self.session.process_new_packets() {
                let _ = self.send(tcp);
                self.closed = true;
                return Err(io::Error::new(io::ErrorKind::InvalidData, error));
            }
        }
        self.send(tcp)
    }

    /// Writes every TLS record rustls has ready.
    fn send(&mut self, tcp: &TcpStream) -> io::Result<()> {
        while self.session.wants_write() {
            if let Err(error) = self.session.write_tls(&mut &*tcp) {
                self.closed = true;
                return Err(error);
            }
        }
        Ok(())
    }

    /// Owed once the handshake is done; a connection that never got that far (a truncated
    /// ClientHello) just closes.
    fn close_notify(&mut self, tcp: &TcpStream) {
        if self.closed || self.session.is_handshaking() {
            return;
        }
        self.closed = true;
        self.session.send_close_notify();
        let _ = tcp.set_write_timeout(Some(CLOSE_NOTIFY_WAIT));
        let _ = self.send(tcp);
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.tls {
            None => (&self.tcp).read(buf),
            Some(tls) => self.read_tls(tls, buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(tls) = &self.tls else {
            return (&self.tcp).write(buf);
        };
        let mut tls = lock(tls);
        let n = tls.session.writer().write(buf)?;
        tls.send(&self.tcp)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Stream {
    /// A TLS connection ended by any path but a failure gets its close_notify.
    fn drop(&mut self) {
        if let Some(tls) = &self.tls {
            lock(tls).close_notify(&self.tcp);
        }
    }
}
