//! Sockets: TLS over a connection's own non-blocking socket. rustls's `ClientConnection` does
//! no I/O of its own: records come in through `read_tls` and `process_new_packets`, and go out
//! through `write_tls`, each called here on the engine's socket only when epoll says it is
//! ready, so a TLS connection waits on the event loop exactly as a cleartext one does and no
//! thread ever blocks. Kernel receive stamps are not taken over TLS (a record's bytes are not
//! the answer's).

use std::io::{self, Read, Write};
use std::task::{ready, Context, Poll};

use rustls::{ClientConnection, HandshakeKind};

use crate::conn::Conn;
use crate::plan::TlsClient;

/// One connection's TLS state (boxed: it is large, and a client holds it only while its
/// connection is open).
pub struct Tls {
    session: Box<ClientConnection>,
    /// The socket reached its end (a read of 0 bytes).
    eof: bool,
}

impl Tls {
    pub fn new(client: &TlsClient) -> io::Result<Tls> {
        let session =
            ClientConnection::new(client.config.clone(), client.name.clone()).map_err(tls_error)?;
        Ok(Tls {
            session: Box::new(session),
            eof: false,
        })
    }

    /// Runs the handshake to its end; whether it resumed an earlier session.
    pub async fn handshake(&mut self, conn: &Conn) -> io::Result<bool> {
        while self.session.is_handshaking() {
            self.flush(conn).await?;
            if self.session.is_handshaking() {
                if self.eof {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                self.pull(conn).await?;
                self.process(conn)?;
            }
        }
        // TLS 1.3: the client's Finished is still to go.
        self.flush(conn).await?;
        Ok(self.session.handshake_kind() == Some(HandshakeKind::Resumed))
    }

    /// Encrypts and writes all of `data`.
    pub async fn write_all(&mut self, conn: &Conn, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.session.writer().write(data)?;
            data = &data[n..];
            self.flush(conn).await?;
        }
        Ok(())
    }

    /// Writes `data` now if the socket takes all of its records without waiting.
    pub fn try_write(&mut self, conn: &Conn, data: &[u8]) -> bool {
        if self.session.writer().write_all(data).is_err() {
            return false;
        }
        self.try_flush(conn)
    }

    /// Sends `close_notify`, if the socket takes it at once (the client is going away). What
    /// the socket holds is taken in first: a socket closed with unread bytes (a TLS 1.3
    /// server's session tickets, which a syslog sender never reads) ends with a reset, and a
    /// reset makes the server's kernel drop what it has not yet read of our last records.
    pub fn close(&mut self, conn: &Conn) {
        let session = &mut self.session;
        while let Ok(n) = conn.read_unpolled(|socket| {
            let mut socket = socket;
            session.read_tls(&mut socket)
        }) {
            if n == 0 || session.process_new_packets().is_err() {
                break;
            }
        }
        self.session.send_close_notify();
        self.try_flush(conn);
    }

    /// Ends the connection in order, as a sender whose last records must all be read does:
    /// `close_notify`, our half of TCP shut, and the server's close awaited (what it still
    /// sends is read and dropped). Closing at once could meet bytes the server sent late (a
    /// TLS 1.3 server's session tickets), and the reset the kernel then sends makes the
    /// server's kernel drop what it had not yet read of our records.
    pub async fn goodbye(&mut self, conn: &Conn) {
        self.session.send_close_notify();
        if self.flush(conn).await.is_err() || conn.shut_write().is_err() {
            return;
        }
        let mut sink = [0u8; 512];
        while !self.eof && self.pull(conn).await.is_ok() {
            if self.session.process_new_packets().is_err() {
                return;
            }
            while matches!(self.session.reader().read(&mut sink), Ok(n) if n > 0) {}
        }
    }

    /// Waits until decrypted bytes, or the end of the stream, are there for `read_now`.
    pub async fn readable(&mut self, conn: &Conn) -> io::Result<()> {
        loop {
            let state = self.process(conn)?;
            if state.plaintext_bytes_to_read() > 0 || state.peer_has_closed() || self.eof {
                return Ok(());
            }
            self.pull(conn).await?;
        }
    }

    /// Reads decrypted bytes without waiting; 0 at the end of the stream, whether the server
    /// said `close_notify` or just closed (as a cleartext read of 0 would tell).
    pub fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.session.reader().read(buf) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }

    /// The protocol the server picked by ALPN (`h2` for HTTP/2), if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.session.alpn_protocol()
    }

    /// Reads decrypted bytes, polling the socket for records when none are there (HTTP/2's
    /// transport); 0 at the end of the stream.
    pub fn poll_read(
        &mut self,
        conn: &Conn,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let state = self.process(conn)?;
            if state.plaintext_bytes_to_read() > 0 {
                return Poll::Ready(self.read_now(buf));
            }
            if state.peer_has_closed() || self.eof {
                return Poll::Ready(Ok(0));
            }
            let session = &mut self.session;
            let read = ready!(conn.poll_read_with(cx, |mut socket| session.read_tls(&mut socket)))?;
            self.eof |= read == 0;
        }
    }

    /// Takes `data` into rustls once the records it held are written; `poll_flush` writes
    /// the new ones.
    pub fn poll_write(
        &mut self,
        conn: &Conn,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_flush(conn, cx))?;
        Poll::Ready(self.session.writer().write(data))
    }

    /// Writes every record rustls holds, polling the socket.
    pub fn poll_flush(&mut self, conn: &Conn, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.session.wants_write() {
            let session = &mut self.session;
            ready!(conn.poll_write_with(cx, |mut socket| session.write_tls(&mut socket)))?;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes what the socket holds into rustls, waiting for it if nothing is there.
    async fn pull(&mut self, conn: &Conn) -> io::Result<()> {
        let session = &mut self.session;
        loop {
            conn.readable().await?;
            let read = conn.try_read_with(|socket| {
                let mut socket = socket;
                session.read_tls(&mut socket)
            });
            if let Some(read) = read {
                self.eof |= read? == 0;
                return Ok(());
            }
        }
    }

    /// Decrypts the records taken in; on a TLS error the alert rustls queued goes out if
    /// the socket takes it at once.
    fn process(&mut self, conn: &Conn) -> io::Result<rustls::IoState> {
        match self.session.process_new_packets() {
            Ok(state) => Ok(state),
            Err(e) => {
                self.try_flush(conn);
                Err(tls_error(e))
            }
        }
    }

    /// Writes every record rustls holds, waiting for the socket as needed.
    async fn flush(&mut self, conn: &Conn) -> io::Result<()> {
        while self.session.wants_write() {
            let session = &mut self.session;
            conn.write_with(|socket| {
                let mut socket = socket;
                session.write_tls(&mut socket)
            })
            .await?;
        }
        Ok(())
    }

    /// Writes the records rustls holds if the socket takes them all now.
    fn try_flush(&mut self, conn: &Conn) -> bool {
        let mut records = Vec::new();
        while self.session.wants_write() {
            if self.session.write_tls(&mut records).is_err() {
                return false;
            }
        }
        records.is_empty() || conn.try_write(&records)
    }
}

/// A rustls error as an I/O error that still carries it (`ErrorKind::from_io` reads it).
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}
