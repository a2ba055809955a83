//! One client TCP connection on the worker's event loop. It wraps the raw socket in `AsyncFd`
//! rather than `tokio::net::TcpStream` for one reason: after a complete answer the read
//! readiness can be dropped without a system call, so the next read waits for the kernel's
//! edge instead of first trying a `read` that is certain to fail with EAGAIN. That saves one
//! system call per request on kept-alive connections, most of a generator's CPU cost.
//!
//! Waits go through `poll_read_ready` and `poll_write_ready` (one task drives a connection,
//! so one waker per direction is enough) rather than `readable()` and `writable()`, whose
//! futures carry a waiter node: 176 bytes where a `poll_fn` takes 16, inside the task of
//! every held connection, whose size is that of the largest future it awaits.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::ledger::{Ledger, OpenConnection};
use crate::system::switch_on;

pub struct ConnOptions {
    pub source: Option<Ipv4Addr>,
    pub recv_buffer: Option<u32>,
    /// Disable Nagle: needed when a request is several writes (trickled bodies, batches);
    /// a request written at once on a fresh connection never waits for an ACK anyway.
    pub no_delay: bool,
}

pub struct Conn {
    fd: AsyncFd<Socket>,
    _open: OpenConnection,
}

impl Conn {
    /// Connects without blocking the event loop; the connection is counted as open in the
    /// ledger while it lives.
    pub async fn connect(
        addr: SocketAddr,
        options: &ConnOptions,
        ledger: &Ledger,
    ) -> io::Result<Conn> {
        let socket = new_socket(options)?;
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        // SAFETY: the socket owns its descriptor, and `AsyncFd` owns the socket until drop.
        let fd = unsafe {
            AsyncFd::register_with_interest(socket, Interest::READABLE | Interest::WRITABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        let conn = Conn {
            fd,
            _open: ledger.opened(),
        };
        let guard = std::future::poll_fn(|cx| conn.fd.poll_write_ready(cx)).await?;
        // The first writable edge of a fresh socket means the connect finished; SO_ERROR
        // tells how.
        if let Some(err) = guard.get_inner().take_error()? {
            return Err(err);
        }
        Ok(conn)
    }

    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write_with(|mut socket| socket.write(data)).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Waits until the socket is writable and writes once through `write` (TLS writes its
    /// records this way); the bytes written, never 0.
    pub async fn write_with(
        &self,
        mut write: impl FnMut(&Socket) -> io::Result<usize>,
    ) -> io::Result<usize> {
        match std::future::poll_fn(|cx| self.poll_write_with(cx, &mut write)).await? {
            0 => Err(io::ErrorKind::WriteZero.into()),
            n => Ok(n),
        }
    }

    /// Writes all of `data` at once if the socket's buffer takes it without waiting.
    pub fn try_write(&self, data: &[u8]) -> bool {
        matches!(self.fd.get_ref().write(data), Ok(n) if n == data.len())
    }

    /// Writes what the socket's buffer takes now, without waiting: the bytes taken, 0 if
    /// none (TLS keeps the rest of its records for a write that waits).
    pub fn write_now(&self, data: &[u8]) -> io::Result<usize> {
        match self.fd.get_ref().write(data) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(0)
            }
            other => other,
        }
    }

    /// Waits until the socket is readable, reading nothing (the readiness is kept for the
    /// read that follows).
    pub async fn readable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.fd.poll_read_ready(cx).map_ok(drop)).await
    }

    /// Reads what is there without waiting; `None` if nothing was (the readiness is then
    /// cleared, so `readable` waits for the next edge).
    pub fn try_read(&self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        self.try_read_with(|socket| (&*socket).read(buf))
    }

    /// As `try_read`, with the kernel's receive stamp of the bytes (time since the epoch),
    /// when stamps are enabled and the read carried data.
    pub fn try_read_stamped(
        &self,
        buf: &mut [u8],
    ) -> Option<io::Result<(usize, Option<Duration>)>> {
        self.try_read_with(|socket| recv_stamped(socket, buf))
    }

    /// Reads through `read` (TLS reads its records this way) without waiting, as `try_read`.
    pub fn try_read_with<T>(
        &self,
        mut read: impl FnMut(&Socket) -> io::Result<T>,
    ) -> Option<io::Result<T>> {
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(mut guard)) = self.fd.poll_read_ready(&mut cx) else {
            return None;
        };
        match guard.try_io(|inner| read(inner.get_ref())) {
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => None,
            Ok(result) => Some(result),
            Err(_would_block) => None,
        }
    }

    /// Shuts our sending half: the peer reads the end of our stream after our last bytes.
    pub fn shut_write(&self) -> io::Result<()> {
        self.fd.get_ref().shutdown(std::net::Shutdown::Write)
    }

    /// Reads through `read` at once, whatever the loop knows of the socket's readiness (a
    /// goodbye as the run ends, when the loop may no longer be turning); `WouldBlock` if
    /// nothing is there.
    pub fn read_unpolled<T>(&self, read: impl FnOnce(&Socket) -> io::Result<T>) -> io::Result<T> {
        read(self.fd.get_ref())
    }

    /// Reads once through `read` when the socket is readable, registering `cx` to be woken
    /// when it is not (HTTP/2's transport polls the socket this way, on the same loop).
    pub fn poll_read_with<T>(
        &self,
        cx: &mut Context<'_>,
        mut read: impl FnMut(&Socket) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            let mut guard = std::task::ready!(self.fd.poll_read_ready(cx))?;
            match guard.try_io(|inner| read(inner.get_ref())) {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => {}
            }
        }
    }

    /// Writes once through `write` when the socket is writable, as `poll_read_with`.
    pub fn poll_write_with(
        &self,
        cx: &mut Context<'_>,
        mut write: impl FnMut(&Socket) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = std::task::ready!(self.fd.poll_write_ready(cx))?;
            match guard.try_io(|inner| write(inner.get_ref())) {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => {}
            }
        }
    }

    /// Asks the kernel to stamp the segments it receives (`SO_TIMESTAMPNS`), for
    /// `try_read_stamped`.
    pub fn enable_stamps(&self) -> io::Result<()> {
        crate::stamps::Stamps::enable(self.fd.get_ref())
    }

    /// Forgets the read readiness after a complete answer: nothing more is expected until the
    /// next request is written, and any later arrival raises a fresh edge.
    pub fn expect_silence(&self) {
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(Ok(mut guard)) = self.fd.poll_read_ready(&mut cx) {
            guard.clear_ready();
        }
    }
}

/// A socket asking for receive timestamps, held while stamped connections come and go. The
/// kernel switches timestamping on while any socket asks for it, and switching it on or off
/// patches the kernel's code (on a VM, tens of microseconds); with this one held through the
/// run, each connection's request is only a counter's increment. The kernel switches it on
/// from a work queue, a while later; until then loopback TCP segments carry no stamp a reader
/// is given. So it returns once a segment over a loopback pair of its own came with a stamp,
/// or after 200 ms (then the first answers may go unmeasured).
pub fn hold_stamping() -> io::Result<Socket> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let client = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None)?;
    crate::stamps::Stamps::enable(&client)?;
    client.connect(&listener.local_addr()?.into())?;
    client.set_read_timeout(Some(Duration::from_millis(100)))?;
    let (mut server, _) = listener.accept()?;
    let mut buf = [0u8; 1];
    for _ in 0..200 {
        server.write_all(b"x")?;
        if recv_stamped(&client, &mut buf)?.1.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(client)
}

/// One `recvmsg` into `buf`, with room for a timestamp control message.
fn recv_stamped(socket: &Socket, buf: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
    // Room for one cmsghdr and a timespec, 8-byte aligned as control messages need.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: every pointer in `msg` refers to a buffer that outlives the call.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel wrote `msg_controllen` bytes of the control buffer.
    let written =
        unsafe { std::slice::from_raw_parts(control.as_ptr().cast::<u8>(), msg.msg_controllen) };
    Ok((n as usize, crate::stamps::stamp_in(written)))
}

pub(crate) fn new_socket(options: &ConnOptions) -> io::Result<Socket> {
    let socket = Socket::new(
        Domain::IPV4,
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    if options.no_delay {
        socket.set_nodelay(true)?;
    }
    if let Some(size) = options.recv_buffer {
        socket.set_recv_buffer_size(size as usize)?;
    }
    if let Some(ip) = options.source {
        // Lets the kernel pick the port at connect time per (source, destination) pair
        // instead of at bind time per source, so each source address yields a full range.
        switch_on(&socket, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT)?;
        socket.bind(&SocketAddr::V4(SocketAddrV4::new(ip, 0)).into())?;
    }
    Ok(socket)
}
