"""Receiving until a deadline, written once: the checks' raw clients (TLS records, HTTP/2
frames, WebSocket frames, plain answers) each read what a server sends in the time a case
allows, and tell apart how a read ended: data, the time up, an orderly close, a reset, or
a TLS connection closed without close_notify.

A deadline is a `time.monotonic()` instant; each read waits at most the time left to it.
"""

from __future__ import annotations

import enum
import socket
import ssl
import time
from collections.abc import Iterator

PIECE = 65536


class End(enum.Enum):
    """How a read ended without data."""

    TIMEOUT = "the deadline passed"
    CLOSED = "an orderly close (EOF; over TLS, after close_notify)"
    RESET = "a reset"
    UNCLEAN = "a TLS connection closed without close_notify"


def time_left(deadline: float) -> Iterator[float]:
    """The seconds left to `deadline`, once per pass of the caller's loop, until none."""
    while (remaining := deadline - time.monotonic()) > 0:
        yield remaining


def receive(sock: socket.socket, deadline: float, size: int = PIECE) -> bytes | End:
    """The next piece `sock` gives (at most `size` bytes) before `deadline`, or how it
    ended instead. Other socket errors are the caller's."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return End.TIMEOUT
    sock.settimeout(remaining)
    try:
        piece = sock.recv(size)
    except ssl.SSLEOFError:  # before OSError's kinds: it is one
        return End.UNCLEAN
    except TimeoutError:
        return End.TIMEOUT
    except ConnectionResetError:
        return End.RESET
    return piece or End.CLOSED


def receive_all(
    sock: socket.socket, deadline: float, size: int | None = None
) -> tuple[bytes, End | None]:
    """What `sock` gives until `deadline`, its end, or `size` bytes (None: no limit), and
    how the reading ended (None: `size` bytes arrived)."""
    received = b""
    while size is None or len(received) < size:
        piece = receive(sock, deadline, PIECE if size is None else size - len(received))
        if isinstance(piece, End):
            return received, piece
        received += piece
    return received, None
