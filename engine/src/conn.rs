//! One client TCP connection on the worker's event loop. It wraps the raw socket in `AsyncFd`
//! rather than `tokio::net::TcpStream` for one reason: after a complete answer the read
//! readiness can be dropped without a system call, so the next read waits for the kernel's
//! edge instead of first trying a `read` that is certain to fail with EAGAIN. That saves one
//! system call per request on kept-alive connections, most of a generator's CPU cost.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::task::{Context, Poll, Waker};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::ledger::{Ledger, OpenConnection};

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
        let guard = conn.fd.writable().await?;
        // The first writable edge of a fresh socket means the connect finished; SO_ERROR
        // tells how.
        if let Some(err) = guard.get_inner().take_error()? {
            return Err(err);
        }
        Ok(conn)
    }

    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|inner| inner.get_ref().write(data)) {
                Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// Writes all of `data` at once if the socket's buffer takes it without waiting.
    pub fn try_write(&self, data: &[u8]) -> bool {
        matches!(self.fd.get_ref().write(data), Ok(n) if n == data.len())
    }

    /// Waits until the socket is readable, reading nothing (the readiness is kept for the
    /// read that follows).
    pub async fn readable(&self) -> io::Result<()> {
        self.fd.readable().await.map(drop)
    }

    /// Reads what is there without waiting; `None` if nothing was (the readiness is then
    /// cleared, so `readable` waits for the next edge).
    pub fn try_read(&self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(mut guard)) = self.fd.poll_read_ready(&mut cx) else {
            return None;
        };
        match guard.try_io(|inner| inner.get_ref().read(buf)) {
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => None,
            Ok(result) => Some(result),
            Err(_would_block) => None,
        }
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

/// Sets a boolean socket option that socket2 has no setter for.
pub(crate) fn switch_on(socket: &Socket, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a pointer to an int that outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
