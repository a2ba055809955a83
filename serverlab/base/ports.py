"""Free loopback ports for servers, chosen where no client's connection will take them."""

import random
import socket
import threading
import time
from collections.abc import Container
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Server ports come from below the ephemeral range: a port the kernel also hands out as a
# connection's source port can be taken, between its choosing and the server's bind, by any
# client on the machine (CI: a JVM's TLS port, once, beside tests opening thousands of
# connections). Below that range no connect() is given it. The lowest is above Ray's
# default worker ports (10002-19999), which the lab's nodes bind as they start workers.
LOWEST_SERVER_PORT = 20000
# Room enough below the ephemeral range to choose at random; a run that widened the range
# to the bottom leaves none, and then the kernel's own choice is taken.
MIN_ROOM = 1000
# A port given out stays leased this long: between its choosing and its server's bind, any
# other process choosing ports (pytest's workers, two runs side by side) would find it free
# too (CI: a reference server's bind refused, the port chosen by another worker's server
# a moment before). Every server binds its ports well within this; once bound, a port
# guards itself.
LEASE_S = 60.0
# The lease is an abstract Unix socket of this name: the kernel drops it with its holder,
# so a process that dies leaves none behind, and no file is ever written.
LEASE_NAME = "serverlab-port-{port}"

_leases: dict[int, tuple[float, socket.socket]] = {}
_leases_lock = threading.Lock()


def free_port(also_udp: bool = False, avoid: Container[int] = ()) -> int:
    """A TCP port on 127.0.0.1 free right now (and free for UDP too if asked), none of
    `avoid`, and leased for LEASE_S: no caller in this or another process is given it
    again before its server can bind it (the kernel, choosing, may repeat the port it just
    gave)."""
    room = _server_range()
    with _leases_lock:
        _expire_leases()
        for _attempt in range(50):
            port = random.choice(room) if room else _kernel_port()
            free = port not in avoid and _tcp_free(port) and (not also_udp or _udp_free(port))
            if free and _lease(port):
                return port
    raise OSError("no free loopback port found")


def _lease(port: int) -> bool:
    """Leases the port to this process for LEASE_S; False if any process holds it now."""
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        holder.bind("\0" + LEASE_NAME.format(port=port))
    except OSError:
        holder.close()
        return False
    _leases[port] = (time.monotonic() + LEASE_S, holder)
    return True


def _expire_leases() -> None:
    now = time.monotonic()
    for port, (until, holder) in list(_leases.items()):
        if until <= now:
            holder.close()
            del _leases[port]


def _server_range() -> range:
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    return range(LOWEST_SERVER_PORT, low) if low - LOWEST_SERVER_PORT >= MIN_ROOM else range(0)


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        tcp.bind(("127.0.0.1", 0))
        return tcp.getsockname()[1]


def _tcp_free(port: int) -> bool:
    return _bindable(socket.SOCK_STREAM, port)


def _udp_free(port: int) -> bool:
    return _bindable(socket.SOCK_DGRAM, port)


def _bindable(kind: socket.SocketKind, port: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False
