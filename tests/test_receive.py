"""conformance/checks/receive.py: reading a real socket until a deadline, and how a read
ended (data, the time up, an orderly close, a reset)."""

import socket
import struct
import time

from serverlab.conformance.checks.receive import End, receive, receive_all, time_left


def pair() -> tuple[socket.socket, socket.socket]:
    """A connected loopback TCP pair (client, server side)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    return client, server


def reset(sock: socket.socket) -> None:
    """Closes with a RST (SO_LINGER 0), as a crashing server would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_a_read_returns_what_arrived_and_then_the_orderly_close():
    client, server = pair()
    with client:
        server.sendall(b"hello")
        server.close()
        assert receive(client, time.monotonic() + 5) == b"hello"
        assert receive(client, time.monotonic() + 5) is End.CLOSED


def test_a_silent_peer_ends_the_read_at_the_deadline_and_a_past_deadline_reads_nothing():
    client, server = pair()
    with client, server:
        assert receive(client, time.monotonic() + 0.05) is End.TIMEOUT
        server.sendall(b"late")
        assert receive(client, time.monotonic() - 1) is End.TIMEOUT


def test_a_reset_is_told_apart_from_a_close():
    client, server = pair()
    with client:
        reset(server)
        assert receive_all(client, time.monotonic() + 5) == (b"", End.RESET)


def test_receiving_all_stops_at_the_size_asked_and_keeps_the_rest_for_later():
    client, server = pair()
    with client, server:
        server.sendall(b"0123456789")
        assert receive_all(client, time.monotonic() + 5, size=4) == (b"0123", None)
        assert receive_all(client, time.monotonic() + 0.2) == (b"456789", End.TIMEOUT)


def test_time_left_counts_down_to_the_deadline_and_stops():
    deadline = time.monotonic() + 0.05
    passes = []
    for remaining in time_left(deadline):
        passes.append(remaining)
        time.sleep(0.01)
    assert passes and all(0 < r <= 0.05 for r in passes)
    assert passes == sorted(passes, reverse=True)
    assert time.monotonic() >= deadline
