//! Sockets: TLS over a connection's own non-blocking socket, through rustls's unbuffered API
//! (`UnbufferedClientConnection`). rustls does no I/O and holds no buffer of its own there:
//! records are read into a buffer the worker lends for the read only, processed in place, and
//! what a read cut short (a partial record, a handshake message spanning records) is all a
//! connection keeps, usually nothing while a push stream idles. So thousands of held TLS
//! connections share a worker's buffers, as cleartext reads share `Inbox`'s. Each call here
//! touches the socket only when epoll says it is ready, so a TLS connection waits on the event
//! loop exactly as a cleartext one does and no thread ever blocks. Kernel receive stamps are
//! not taken over TLS (a record's bytes are not the answer's).

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::task::{ready, Context, Poll};

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncryptError, InsufficientSizeError, WriteTraffic,
};
use rustls::HandshakeKind;

use socket2::Socket;

use crate::conn::Conn;
use crate::plan::TlsClient;
use crate::stats::TlsRecordError;

/// Room a read has beyond what a connection kept: one whole record of the largest size
/// (16 KiB of payload, TLS 1.3's 256 bytes of expansion, the 5-byte header).
const READ_ROOM: usize = 16 * 1024 + 256 + 5;
/// The most plaintext encrypted at once (`write_all` goes in pieces of this size).
const SEAL_PIECE: usize = 64 * 1024;
/// Room for one record's header and tag beyond its payload, generously (TLS 1.2's explicit
/// nonce included); rustls says so when more is needed.
const RECORD_EXPANSION: usize = 64;

thread_local! {
    /// This worker's read buffer, lent to one connection for one read: a held connection owns
    /// no read buffer between reads.
    static INCOMING: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// This worker's buffer for records being sealed; what the socket does not take at once
    /// is copied to the connection's own `outgoing`.
    static SEALED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// A decrypted-bytes buffer a connection gave back once it read them all, for the next
    /// one that decrypts: a kept-alive connection then allocates none per answer, and a
    /// held one still owns none between records.
    static PLAIN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The largest decrypted-bytes buffer given back to the worker (larger ones are freed): one
/// read's records, with room to spare.
const PLAIN_KEPT: usize = 64 * 1024;

/// Where processing the records at hand stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    /// More records are needed (a partial one, or nothing, is left).
    NeedMore,
    /// The server sent `close_notify`.
    PeerClosed,
}

/// One connection's TLS state, boxed: it is large, and a client holds it only while its
/// connection is open (a cleartext client's `Option<Tls>` is a pointer's size).
pub struct Tls(Box<Session>);

impl std::ops::Deref for Tls {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl std::ops::DerefMut for Tls {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.0
    }
}

impl Tls {
    /// A new connection with its ClientHello sealed, ready to go.
    pub fn new(client: &TlsClient) -> io::Result<Tls> {
        let session = UnbufferedClientConnection::new(client.config.clone(), client.name.clone())
            .map_err(tls_error)?;
        let mut tls = Tls(Box::new(Session {
            session,
            pending: Vec::new(),
            plain: Vec::new(),
            plain_read: 0,
            outgoing: Vec::new(),
            peer_closed: false,
            eof: false,
            emptied: false,
        }));
        tls.process(&mut [])?;
        Ok(tls)
    }
}

/// What `Tls` holds: rustls's connection and the bytes rustls has not taken or given yet.
pub struct Session {
    session: UnbufferedClientConnection,
    /// Received bytes rustls has not consumed: a record the last read cut, or the records of
    /// a handshake message not yet whole. Empty, and unallocated, between whole records.
    pending: Vec<u8>,
    /// Decrypted bytes not yet read, and how many of them were (a reader's buffer may be
    /// smaller than a record). Given back to the worker once read.
    plain: Vec<u8>,
    plain_read: usize,
    /// Records the socket has not taken yet. Freed once written.
    outgoing: Vec<u8>,
    /// The server sent `close_notify`.
    peer_closed: bool,
    /// The socket reached its end (a read of 0 bytes).
    eof: bool,
    /// The last read left the socket empty: it took less than the room it was given.
    emptied: bool,
}

impl Session {
    /// Runs the handshake to its end; whether it resumed an earlier session.
    pub async fn handshake(&mut self, conn: &Conn) -> io::Result<bool> {
        loop {
            self.flush(conn).await?;
            if !self.session.is_handshaking() {
                break;
            }
            if self.eof || self.peer_closed {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.pull(conn).await?;
        }
        Ok(self.session.handshake_kind() == Some(HandshakeKind::Resumed))
    }

    /// Writes the ClientHello and waits for the first record of the server's answer,
    /// which must be a handshake record opening with a ServerHello (type 2); a fatal alert
    /// instead is `tls_alert`, anything else `tls_handshake`. Nothing is given to rustls:
    /// the handshake is left there (a handshake flood's).
    pub async fn server_hello(&mut self, conn: &Conn) -> io::Result<()> {
        self.flush(conn).await?;
        // A record's header (type, version, length), then its first byte and the next: a
        // handshake message's type, or an alert's level and description.
        let mut head = [0u8; 7];
        let mut got = 0;
        while got < head.len() {
            conn.readable().await?;
            match conn.try_read_with(|socket| (&*socket).read(&mut head[got..])) {
                Some(Ok(0)) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Some(Ok(n)) => got += n,
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        match head {
            [22, _, _, _, _, 2, _] => Ok(()),
            [21, ..] => Err(tls_error(rustls::Error::AlertReceived(head[6].into()))),
            _ => Err(tls_error(rustls::Error::General("no ServerHello".into()))),
        }
    }

    /// Encrypts and writes all of `data`.
    pub async fn write_all(&mut self, conn: &Conn, data: &[u8]) -> io::Result<()> {
        for piece in data.chunks(SEAL_PIECE) {
            self.flush(conn).await?;
            self.seal(conn, piece)?;
        }
        self.flush(conn).await
    }

    /// Writes `data` now if the socket takes all of its records without waiting.
    pub fn try_write(&mut self, conn: &Conn, data: &[u8]) -> bool {
        self.outgoing.is_empty() && self.seal(conn, data).is_ok() && self.outgoing.is_empty()
    }

    /// Sends `close_notify`, if the socket takes it at once (the client is going away). What
    /// the socket holds is taken in first: a socket closed with unread bytes (a TLS 1.3
    /// server's session tickets, which a syslog sender never reads) ends with a reset, and a
    /// reset makes the server's kernel drop what it has not yet read of our last records.
    pub fn close(&mut self, conn: &Conn) {
        while !self.eof {
            match conn.read_unpolled(|socket| self.receive(socket)) {
                Ok(n) if n > 0 => self.drop_plain(),
                _ => break,
            }
        }
        if self.queue_close_notify().is_ok() {
            self.send_now(conn);
        }
    }

    /// Ends the connection in order, as a sender whose last records must all be read does:
    /// `close_notify`, our half of TCP shut, and the server's close awaited (what it still
    /// sends is read and dropped). Closing at once could meet bytes the server sent late (a
    /// TLS 1.3 server's session tickets), and the reset the kernel then sends makes the
    /// server's kernel drop what it had not yet read of our records.
    pub async fn goodbye(&mut self, conn: &Conn) {
        if self.queue_close_notify().is_err()
            || self.flush(conn).await.is_err()
            || conn.shut_write().is_err()
        {
            return;
        }
        while !self.eof && self.pull(conn).await.is_ok() {
            self.drop_plain();
        }
    }

    /// Waits until decrypted bytes, or the end of the stream, are there for `read_now`.
    pub async fn readable(&mut self, conn: &Conn) -> io::Result<()> {
        while self.plain.is_empty() && !self.peer_closed && !self.eof {
            self.pull(conn).await?;
        }
        Ok(())
    }

    /// Reads decrypted bytes without waiting; 0 at the end of the stream, whether the server
    /// said `close_notify` or just closed (as a cleartext read of 0 would tell), or when none
    /// are there.
    pub fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let unread = &self.plain[self.plain_read..];
        let n = unread.len().min(buf.len());
        buf[..n].copy_from_slice(&unread[..n]);
        self.plain_read += n;
        if self.plain_read == self.plain.len() {
            self.drop_plain();
        }
        Ok(n)
    }

    /// Whether everything the socket held at the last read was taken and read: no record is
    /// waiting in the socket or here, so after a complete answer the read readiness may be
    /// dropped (`Conn::expect_silence`) and the next read waits for the kernel's edge, not
    /// for a read that finds nothing (one system call a request on a kept-alive connection).
    pub fn caught_up(&self) -> bool {
        self.emptied && self.pending.is_empty() && self.plain.is_empty()
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
            if !self.plain.is_empty() || self.peer_closed || self.eof {
                return Poll::Ready(self.read_now(buf));
            }
            let read = ready!(conn.poll_read_with(cx, |socket| self.receive(socket)));
            // Records rustls answers with (a KeyUpdate's, an alert) go out now if they can.
            self.send_now(conn);
            read?;
        }
    }

    /// Seals `data` once the records held before are written; `poll_flush` writes what the
    /// socket did not take at once.
    pub fn poll_write(
        &mut self,
        conn: &Conn,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_flush(conn, cx))?;
        let piece = &data[..data.len().min(SEAL_PIECE)];
        self.seal(conn, piece)?;
        Poll::Ready(Ok(piece.len()))
    }

    /// Writes every record held, polling the socket.
    pub fn poll_flush(&mut self, conn: &Conn, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.outgoing.is_empty() {
            let records = &self.outgoing;
            let n = ready!(conn.poll_write_with(cx, |socket| (&*socket).write(records)))?;
            self.wrote(n);
        }
        Poll::Ready(Ok(()))
    }

    /// Takes what the socket holds into rustls, waiting for it if nothing is there.
    async fn pull(&mut self, conn: &Conn) -> io::Result<()> {
        loop {
            conn.readable().await?;
            if let Some(read) = conn.try_read_with(|socket| self.receive(socket)) {
                // Records rustls answers with (a KeyUpdate's, an alert) go out now if they can.
                self.send_now(conn);
                return read.map(drop);
            }
        }
    }

    /// One read of the socket into the worker's buffer, after the bytes this connection
    /// kept, and the records it completes processed; the bytes read (0 at the end). What
    /// the read did not complete is kept; a read that would block leaves everything as it
    /// was (the error is the socket's, for the readiness to be cleared).
    fn receive(&mut self, socket: &Socket) -> io::Result<usize> {
        INCOMING.with_borrow_mut(|buf| {
            let kept = self.pending.len();
            if buf.len() < kept + READ_ROOM {
                buf.resize(kept + READ_ROOM, 0);
            }
            buf[..kept].copy_from_slice(&self.pending);
            let room = buf.len() - kept;
            let n = (&*socket).read(&mut buf[kept..])?;
            self.eof |= n == 0;
            self.emptied = n < room;
            let filled = kept + n;
            let (used, outcome) = match self.process(&mut buf[..filled]) {
                Ok(used) => (used, Ok(n)),
                Err(e) => (filled, Err(e)),
            };
            self.keep(&buf[used..filled]);
            outcome
        })
    }

    /// Keeps `left`, the bytes rustls has not consumed: nothing at all in the usual case (the
    /// buffer is freed), nothing either once the server said `close_notify` (what follows it
    /// is never read).
    fn keep(&mut self, left: &[u8]) {
        if left.is_empty() || self.peer_closed {
            self.pending = Vec::new();
        } else {
            // Its room is reused while records come cut (a large body's).
            self.pending.clear();
            self.pending.extend_from_slice(left);
        }
    }

    /// Processes the records in `incoming` until rustls needs more: decrypted bytes go to
    /// `plain`, records to send to `outgoing`. The bytes consumed. On a TLS error the alert
    /// rustls queued goes to `outgoing` too (the caller sends it if it can).
    fn process(&mut self, incoming: &mut [u8]) -> io::Result<usize> {
        let mut used = 0;
        loop {
            let (discard, stop) = self.step(&mut incoming[used..]);
            used += discard;
            match stop {
                Ok(None) => {}
                Ok(Some(stop)) => {
                    self.peer_closed |= stop == Stop::PeerClosed;
                    return Ok(used);
                }
                Err(e) => {
                    // After an error rustls hands out what it queued (the alert) first.
                    let _ = self.step(&mut incoming[used..]);
                    return Err(self.error_now(e));
                }
            }
        }
    }

    /// A TLS error as what it is at this point: the handshake's, a fatal alert, or a bad
    /// record on a connection whose handshake ended (`tls_record`).
    fn error_now(&self, e: rustls::Error) -> io::Error {
        if self.session.is_handshaking() || matches!(e, rustls::Error::AlertReceived(_)) {
            tls_error(e)
        } else {
            io::Error::new(io::ErrorKind::InvalidData, TlsRecordError(e))
        }
    }

    /// Processes what this connection kept (before sealing: rustls then knows the bytes it
    /// already saw of a handshake message, and may have records of its own to send first).
    fn settle(&mut self) -> io::Result<()> {
        let mut kept = std::mem::take(&mut self.pending);
        let used = self.process(&mut kept)?;
        kept.drain(..used);
        self.pending = kept;
        Ok(())
    }

    /// One state of rustls's: the bytes of `incoming` to discard, and where it stopped, if
    /// it did.
    fn step(&mut self, incoming: &mut [u8]) -> (usize, Result<Option<Stop>, rustls::Error>) {
        let status = self.session.process_tls_records(incoming);
        let mut discard = status.discard;
        let state = match status.state {
            Ok(state) => state,
            Err(e) => return (discard, Err(e)),
        };
        let stop = match state {
            ConnectionState::ReadTraffic(mut records) => {
                while let Some(record) = records.next_record() {
                    match record {
                        Ok(record) => {
                            discard += record.discard;
                            if self.plain.capacity() == 0 {
                                self.plain = PLAIN.take();
                            }
                            self.plain.extend_from_slice(record.payload);
                        }
                        Err(e) => return (discard, Err(e)),
                    }
                }
                None
            }
            ConnectionState::EncodeTlsData(mut records) => {
                encode(&mut self.outgoing, |out| records.encode(out));
                None
            }
            // The records are in `outgoing`, which the next write empties.
            ConnectionState::TransmitTlsData(sent) => {
                sent.done();
                None
            }
            ConnectionState::PeerClosed => Some(Stop::PeerClosed),
            // Nothing more to do with these bytes: the handshake awaits the server's, or
            // the connection is idle (the states that also allow sending).
            _ => Some(Stop::NeedMore),
        };
        (discard, Ok(stop))
    }

    /// Seals `data` and writes what the socket takes at once; the rest stays in `outgoing`.
    fn seal(&mut self, conn: &Conn, data: &[u8]) -> io::Result<()> {
        SEALED.with_borrow_mut(|out| {
            out.clear();
            self.encrypt(data, out)?;
            // Behind records still waiting, these wait too.
            let sent = if self.outgoing.is_empty() {
                conn.write_now(out)?
            } else {
                0
            };
            self.outgoing.extend_from_slice(&out[sent..]);
            Ok(())
        })
    }

    /// Appends `data`'s records to `out` (after any records rustls queued first).
    fn encrypt(&mut self, data: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let records = data.len().div_ceil(16 * 1024).max(1);
        let mut room = data.len() + records * RECORD_EXPANSION;
        loop {
            let mut writer = match self.writable()? {
                Some(writer) => writer,
                None => return Err(io::ErrorKind::NotConnected.into()),
            };
            let at = out.len();
            out.resize(at + room, 0);
            match writer.encrypt(data, &mut out[at..]) {
                Ok(n) => {
                    out.truncate(at + n);
                    return Ok(());
                }
                Err(EncryptError::InsufficientSize(InsufficientSizeError { required_size })) => {
                    out.truncate(at);
                    room = required_size;
                }
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
    }

    /// rustls's sending state, once what it queued before is in `outgoing` (`None` during
    /// the handshake or after the connection closed).
    fn writable(&mut self) -> io::Result<Option<WriteTraffic<'_, ClientConnectionData>>> {
        self.settle()?;
        let status = self.session.process_tls_records(&mut self.pending);
        match status.state.map_err(tls_error)? {
            ConnectionState::WriteTraffic(writer) => Ok(Some(writer)),
            _ => Ok(None),
        }
    }

    /// Queues `close_notify` in `outgoing`.
    fn queue_close_notify(&mut self) -> io::Result<()> {
        SEALED.with_borrow_mut(|out| {
            out.clear();
            out.resize(RECORD_EXPANSION * 2, 0);
            let Some(mut writer) = self.writable()? else {
                return Err(io::ErrorKind::NotConnected.into());
            };
            let n = writer
                .queue_close_notify(out)
                .map_err(|e| io::Error::other(e.to_string()))?;
            self.outgoing.extend_from_slice(&out[..n]);
            Ok(())
        })
    }

    /// Writes every record held, waiting for the socket as needed.
    async fn flush(&mut self, conn: &Conn) -> io::Result<()> {
        while !self.outgoing.is_empty() {
            let records = &self.outgoing;
            let n = conn.write_with(|socket| (&*socket).write(records)).await?;
            self.wrote(n);
        }
        Ok(())
    }

    /// Writes what the socket takes of the records held, without waiting.
    fn send_now(&mut self, conn: &Conn) {
        if !self.outgoing.is_empty() {
            if let Ok(n) = conn.write_now(&self.outgoing) {
                self.wrote(n);
            }
        }
    }

    /// Drops the `n` records' bytes the socket took; frees the buffer once all went.
    fn wrote(&mut self, n: usize) {
        if n >= self.outgoing.len() {
            self.outgoing = Vec::new();
        } else {
            self.outgoing.drain(..n);
        }
    }

    /// Forgets the decrypted bytes held; their buffer goes back to the worker.
    fn drop_plain(&mut self) {
        let mut plain = std::mem::take(&mut self.plain);
        self.plain_read = 0;
        if plain.capacity() <= PLAIN_KEPT {
            plain.clear();
            PLAIN.with_borrow_mut(|spare| {
                if spare.capacity() < plain.capacity() {
                    *spare = plain;
                }
            });
        }
    }
}

/// Appends what `encode` writes to `out`, giving it the room it asks for.
fn encode(out: &mut Vec<u8>, mut encode: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>) {
    let at = out.len();
    let mut room = 1024;
    loop {
        out.resize(at + room, 0);
        match encode(&mut out[at..]) {
            Ok(n) => {
                out.truncate(at + n);
                return;
            }
            Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                room = required_size
            }
            Err(EncodeError::AlreadyEncoded) => return out.truncate(at),
        }
    }
}

/// A rustls error as an I/O error that still carries it (`ErrorKind::from_io` reads it).
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;

    use rustls::crypto::ring;
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    use rustls::{ClientConfig, RootCertStore, ServerConfig, ServerConnection, StreamOwned};

    use super::*;
    use crate::conn::ConnOptions;
    use crate::ledger::Ledger;
    use crate::stats::Counters;

    /// A record larger than one read of the lent buffer: it arrives over several reads.
    const LARGE: usize = 40_000;

    /// The current-thread runtime the tests below run on, as a worker's.
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A connection to `addr`, Nagle off, counted in a ledger of its own.
    async fn connect(addr: std::net::SocketAddr) -> Conn {
        let ledger = Ledger::new(Arc::new(Counters::default()), 0.0);
        let options = ConnOptions {
            source: None,
            recv_buffer: None,
            no_delay: true,
        };
        Conn::connect(addr, &options, &ledger).await.unwrap()
    }

    /// A rustls server on loopback: answers a line with a small event, the next line with a
    /// large one, then says `close_notify`. The client trusts its self-signed certificate.
    fn server() -> (
        std::net::SocketAddr,
        TlsClient,
        std::thread::JoinHandle<Vec<u8>>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let provider = Arc::new(ring::default_provider());
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            let session = ServerConnection::new(Arc::new(server)).unwrap();
            let mut stream = StreamOwned::new(session, socket);
            let mut lines = Vec::new();
            let answers = [b"data: 1\n\n".to_vec(), vec![b'x'; LARGE]];
            let mut byte = [0u8];
            for answer in answers {
                // Each answer waits for a line, so the small one is read alone.
                while byte[0] != b'\n' {
                    stream.read_exact(&mut byte).unwrap();
                    lines.push(byte[0]);
                }
                byte[0] = 0;
                stream.write_all(&answer).unwrap();
                stream.flush().unwrap();
            }
            stream.conn.send_close_notify();
            stream.flush().unwrap();
            lines
        });
        let name = ServerName::try_from("localhost").unwrap();
        let client = TlsClient {
            config: Arc::new(client),
            name,
        };
        (addr, client, serving)
    }

    /// What a connection holds of its own beyond rustls's state, in bytes of capacity.
    fn held(tls: &Tls) -> usize {
        tls.pending.capacity() + tls.plain.capacity() + tls.outgoing.capacity()
    }

    async fn read_all(tls: &mut Tls, conn: &Conn) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            tls.readable(conn).await.unwrap();
            let n = tls.read_now(&mut buf).unwrap();
            if n == 0 {
                return got;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn a_held_connection_keeps_no_buffer_between_records_and_every_byte_arrives() {
        let (addr, client, serving) = server();
        runtime().block_on(async {
            let conn = connect(addr).await;
            let mut tls = Tls::new(&client).unwrap();
            assert!(
                !tls.handshake(&conn).await.unwrap(),
                "a first handshake is full"
            );
            assert_eq!(held(&tls), 0, "nothing held after the handshake");
            tls.write_all(&conn, b"GET /sse\n").await.unwrap();
            assert_eq!(held(&tls), 0, "nothing held once the request went");
            tls.readable(&conn).await.unwrap();
            let mut event = [0u8; 64];
            let n = tls.read_now(&mut event).unwrap();
            assert_eq!(&event[..n], b"data: 1\n\n");
            assert_eq!(held(&tls), 0, "nothing held once the event was read");
            tls.write_all(&conn, b"more\n").await.unwrap();
            let rest = read_all(&mut tls, &conn).await;
            assert_eq!(rest.len(), LARGE);
            assert!(rest.iter().all(|&b| b == b'x'));
            assert!(tls.peer_closed, "the stream ended by close_notify");
        });
        assert_eq!(serving.join().unwrap(), b"GET /sse\nmore\n");
    }

    #[test]
    fn only_a_read_that_empties_the_socket_lets_the_readiness_go() {
        let (addr, client, serving) = server();
        runtime().block_on(async {
            let conn = connect(addr).await;
            let mut tls = Tls::new(&client).unwrap();
            tls.handshake(&conn).await.unwrap();
            tls.write_all(&conn, b"GET /sse\n").await.unwrap();
            tls.readable(&conn).await.unwrap();
            assert!(!tls.caught_up(), "the event is there, not yet read");
            let mut event = [0u8; 64];
            tls.read_now(&mut event).unwrap();
            assert!(tls.caught_up(), "the small event's read emptied the socket");
            tls.write_all(&conn, b"more\n").await.unwrap();
            // The server's large answer and its close_notify all wait in the socket, more
            // than one read's room: the first read is cut short.
            let lines = std::thread::spawn(move || serving.join().unwrap());
            while !lines.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            tls.readable(&conn).await.unwrap();
            tls.drop_plain();
            assert!(!tls.caught_up(), "records are left in the socket");
            let rest = read_all(&mut tls, &conn).await;
            assert!(
                rest.len() < LARGE,
                "the first read's bytes were dropped above"
            );
            assert!(tls.peer_closed);
        });
    }
}
