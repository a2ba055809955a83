"""Kernel memory of one server's TCP sockets, read through sock_diag as `ss -tm` reads it.

Execution stage: the monitor asks the kernel (NETLINK_SOCK_DIAG, one dump per address family,
filtered in the kernel by local port) for the memory of the sockets whose local port is
the server's: its listener and every connection it accepted. `/proc/net/sockstat` is never
used: it counts every socket of the machine, the load engine's included.

Per socket, the memory is what the kernel charged to it (`ss -tm`'s skmem fields): data
received and not yet read (r), data queued to send (w), memory reserved ahead (f), options
(o) and the backlog (bl). Sockets in TIME-WAIT hold none and are not asked for.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_REQ_BYTECODE = 1
INET_DIAG_SKMEMINFO = 7
INET_DIAG_BC_S_GE, INET_DIAG_BC_S_LE = 2, 3  # enum inet_diag_bc_op_code
TCP_ESTABLISHED, TCP_TIME_WAIT = 1, 6
# Every state but TIME-WAIT (bit n = state n).
STATES = 0xFFF & ~(1 << TCP_TIME_WAIT)
# skmem fields, in the kernel's order (SK_MEMINFO_*).
SKMEM = ("r", "rb", "t", "tb", "f", "w", "o", "bl", "d")
CHARGED = ("r", "f", "w", "o", "bl")
_HEADER = struct.Struct("=IHHII")
_DIAG_MSG_LEN = 72  # struct inet_diag_msg


@dataclass(frozen=True)
class SocketMemory:
    """One reading: the sockets found, those established, and the bytes charged to them."""

    sockets: int
    established: int
    kernel_bytes: int

    def as_dict(self) -> dict:
        return {
            "sockets": self.sockets,
            "established": self.established,
            "kernel_bytes": self.kernel_bytes,
        }


def open_socket() -> socket.socket:
    """A sock_diag socket, in the calling thread's network namespace (call it from inside
    the server's namespace, and it reads that namespace's sockets)."""
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)


FAMILIES = (socket.AF_INET, socket.AF_INET6)


def read(sock: socket.socket, port: int, families: tuple[int, ...] = FAMILIES) -> SocketMemory:
    """The memory of the TCP sockets with local port `port`, IPv4 and IPv6 (or only the
    `families` given: each dump walks the kernel's whole TCP hash table)."""
    sockets = established = charged = 0
    for family in families:
        for state, skmem in _dump(sock, family, port):
            sockets += 1
            established += state == TCP_ESTABLISHED
            charged += sum(skmem.get(name, 0) for name in CHARGED)
    return SocketMemory(sockets, established, charged)


def _request(family: int, port: int, seq: int) -> bytes:
    bytecode = _bytecode(port)
    attr = struct.pack("=HH", 4 + len(bytecode), INET_DIAG_REQ_BYTECODE) + bytecode
    ext = 1 << (INET_DIAG_SKMEMINFO - 1)
    body = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, ext, 0, STATES) + bytes(48) + attr
    flags = NLM_F_REQUEST | NLM_F_DUMP
    return _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body


def _bytecode(port: int) -> bytes:
    """Kernel-side filter "sport >= port and sport <= port". struct inet_diag_bc_op
    {u8 code; u8 yes; u16 no}: a jump of `no` past the end (remaining + 4) rejects the
    socket; each port test is followed by an op whose `no` holds the port."""
    op = struct.Struct("=BBH")
    return b"".join(
        (
            op.pack(INET_DIAG_BC_S_GE, 8, 16 + 4),
            op.pack(0, 0, port),
            op.pack(INET_DIAG_BC_S_LE, 8, 8 + 4),
            op.pack(0, 0, port),
        )
    )


def _dump(sock: socket.socket, family: int, port: int):
    """Yields (state, skmem fields) of each socket the kernel returns."""
    sock.send(_request(family, port, seq=family))
    while True:
        data = sock.recv(1 << 16)
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
            if kind == NLMSG_DONE:
                return
            if kind == NLMSG_ERROR:
                (errno,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                if errno:
                    raise OSError(-errno, f"sock_diag refused the request (port {port})")
                return
            message = data[offset + _HEADER.size : offset + length]
            yield message[1], _skmem(message[_DIAG_MSG_LEN:])
            offset += (length + 3) & ~3


def _skmem(attrs: bytes) -> dict[str, int]:
    offset = 0
    while offset + 4 <= len(attrs):
        length, kind = struct.unpack_from("=HH", attrs, offset)
        if length < 4:
            break
        if kind == INET_DIAG_SKMEMINFO:
            count = min(len(SKMEM), (length - 4) // 4)
            values = struct.unpack_from(f"={count}I", attrs, offset + 4)
            return dict(zip(SKMEM, values, strict=False))
        offset += (length + 3) & ~3
    return {}
