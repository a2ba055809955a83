"""Syslog over TLS for tests/reference_server.py (spec §15, RFC 5425, part `syslog-tls`).

Correct by default: octet-counted frames only, and a bad MSG-LEN ends the connection with
close_notify. Each `syslog_tls_*` fault of the reference server breaks one rule here, so
that verify's syslog-tls cases can be shown failing on exactly what they check.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import tempfile
import threading
from pathlib import Path

MAX_MESSAGE = 65536  # more than RFC 5425's 8192 octets a receiver SHOULD take
MSG_LEN = re.compile(rb"([1-9][0-9]{0,4}) ")
PARTIAL_LEN = re.compile(rb"(?:[1-9][0-9]{0,4})?")
# The syslog_tls_lenient fault: any digits, then any one byte, as a length (64-bit).
LENIENT_LEN = re.compile(rb"([0-9]+)([^0-9])")
HANDSHAKE_RECORD = b"\x16"
FAULTS = {
    "syslog_tls_lenient": "RFC 5425 frames read as §7 reads TCP: a leading zero taken, a "
    "64-bit length that wraps, newline framing for the rest, the connection kept",
    "syslog_tls_drops_batch": "a bad MSG-LEN loses the messages read with it",
    "syslog_tls_per_read": "each read of the syslog TLS port framed alone: a frame cut "
    "across TLS records is lost",
    "syslog_tls_counts_cut": "a frame cut short by the close is counted",
    "syslog_tls_serial": "syslog TLS connections served one at a time, handshake and all",
    "syslog_tls_plain_fallback": "a connection that opens without a TLS record is read as "
    "plain syslog (one connection at a time)",
    "syslog_tls_other_cert": "the syslog TLS port serves a certificate of another CA",
}


class FramingLost(Exception):
    """A bad MSG-LEN: RFC 5425 gives no way to find the next frame."""


class Rfc5425Framer:
    def __init__(self, server):
        self.server, self.buffer = server, b""

    def feed(self, data: bytes) -> None:
        """Counts every complete frame; FramingLost at a bad MSG-LEN, after the frames
        before it are counted."""
        self.buffer += data
        found = []
        try:
            while (message := self.next_frame()) is not None:
                found.append(message)
                if not self.server.has_fault("syslog_tls_drops_batch"):
                    self.count(found.pop())
        finally:
            if self.server.has_fault("syslog_tls_per_read"):
                self.buffer = b""
        for message in found:
            self.count(message)

    def count(self, message: bytes) -> None:
        if message:
            self.server.count_syslog(message)

    def close(self) -> None:
        if self.buffer and self.server.has_fault("syslog_tls_counts_cut"):
            self.count(self.buffer)

    def next_frame(self) -> bytes | None:
        if self.server.has_fault("syslog_tls_lenient"):
            return self.next_lenient()
        head = MSG_LEN.match(self.buffer)
        if head is None:
            if PARTIAL_LEN.fullmatch(self.buffer):
                return None
            raise FramingLost
        return self.take(head.end(), int(head.group(1)))

    def take(self, start: int, length: int) -> bytes | None:
        if len(self.buffer) < start + length:
            return None
        message = self.buffer[start : start + length]
        self.buffer = self.buffer[start + length :]
        return message

    def next_lenient(self) -> bytes | None:
        head = LENIENT_LEN.match(self.buffer)
        if head:
            return self.take(head.end(), int(head.group(1)) % 2**64)
        if self.buffer[:1].isdigit():
            return None
        newline = self.buffer.find(b"\n")
        return None if newline < 0 else self.take(newline + 1, 0)


async def serve_connection(server, reader, writer) -> None:
    """One RFC 5425 connection on the event loop; the handshake is done by asyncio."""
    server.counters.syslog_tcp += 1
    framer = Rfc5425Framer(server)
    try:
        while data := await reader.read(65536):
            framer.feed(data)
        framer.close()
    except FramingLost:
        pass
    except (ConnectionError, ssl.SSLError):
        return
    finally:
        writer.close()


def context_for(server, cert: str, key: str) -> ssl.SSLContext:
    if not server.has_fault("syslog_tls_other_cert"):
        return server.tls_context(cert, key)
    from serverlab.base.tlskeys import make_key_material

    other = make_key_material(Path(tempfile.mkdtemp(prefix="other-ca-")) / "tls", "ecdsa-p256")
    return server.tls_context(str(other.cert), str(other.key))


# Faults served by blocking sockets in threads: a handshake inline in the accept loop, a
# peek before the handshake, and a close without close_notify (asyncio answers the client's
# close_notify by itself).
THREADED_FAULTS = frozenset({"syslog_tls_serial", "syslog_tls_plain_fallback", "no_close_notify"})


async def listen(server, hosts: list[str], port: int, cert: str, key: str) -> None:
    context = context_for(server, cert, key)
    if server.faults & THREADED_FAULTS:
        for host in hosts:
            listener = socket.create_server((host, port))
            start_thread(accept_loop, server, listener, context)
        return

    async def on_connection(reader, writer):
        await serve_connection(server, reader, writer)

    secure = await asyncio.start_server(on_connection, hosts, port, ssl=context)
    await secure.start_serving()


def start_thread(target, *args) -> None:
    thread = threading.Thread(target=target, args=args)
    thread.daemon = True
    thread.start()


def accept_loop(server, listener: socket.socket, context: ssl.SSLContext) -> None:
    """With syslog_tls_serial, one connection at a time, as a loop blocked in SSL_accept
    would serve them; else a thread per connection."""
    while True:
        conn, _ = listener.accept()
        if server.has_fault("syslog_tls_serial"):
            serve_blocking(server, conn, context)
        else:
            start_thread(serve_blocking, server, conn, context)


def serve_blocking(server, conn: socket.socket, context: ssl.SSLContext) -> None:
    server.counters.syslog_tcp += 1
    stream = conn
    with contextlib.suppress(OSError, FramingLost):
        peek = server.has_fault("syslog_tls_plain_fallback")
        if not peek or conn.recv(1, socket.MSG_PEEK) == HANDSHAKE_RECORD:
            stream = context.wrap_socket(conn, server_side=True)
        framer = Rfc5425Framer(server)
        while data := stream.recv(65536):
            framer.feed(data)
        framer.close()
    with contextlib.suppress(OSError):
        if isinstance(stream, ssl.SSLSocket) and not server.has_fault("no_close_notify"):
            stream = stream.unwrap()
    stream.close()
    conn.close()
