"""Free loopback ports chosen by the OS, so that parallel runs never collide."""

import socket
from collections.abc import Container


def free_port(also_udp: bool = False, avoid: Container[int] = ()) -> int:
    """A TCP port on 127.0.0.1 free right now (and free for UDP too if asked), none of
    `avoid`: the kernel may hand out the port it just gave the last caller, who has not
    bound it yet."""
    for _attempt in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            if port not in avoid and (not also_udp or _udp_free(port)):
                return port
    raise OSError("no free loopback port found")


def _udp_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        try:
            udp.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False
