import subprocess
import sys

import pytest

import serverlab.base.ports as ports
from serverlab.base.ports import free_port


def test_a_port_to_avoid_is_never_given():
    with pytest.raises(OSError, match="no free loopback port"):
        free_port(avoid=range(65536))


def test_a_server_port_lies_below_the_range_the_kernel_gives_connections():
    low = int(ports.EPHEMERAL_RANGE.read_text().split()[0])
    chosen = {free_port(also_udp=True) for _ in range(20)}
    assert all(ports.LOWEST_SERVER_PORT <= port < low for port in chosen), chosen


def test_a_port_taken_below_the_range_is_never_given(monkeypatch):
    taken = range(ports.LOWEST_SERVER_PORT, ports.LOWEST_SERVER_PORT + 2)
    monkeypatch.setattr(ports, "_server_range", lambda: taken)
    monkeypatch.setattr(ports, "_tcp_free", lambda port: port != taken[0])
    monkeypatch.setattr(ports, "LEASE_S", 0.0)
    assert {free_port() for _ in range(10)} == {taken[1]}


def test_a_port_given_is_not_given_again_while_its_lease_lasts(monkeypatch):
    room = _unleased_room(2)
    monkeypatch.setattr(ports, "_server_range", lambda: room)
    assert {free_port(), free_port()} == set(room)
    with pytest.raises(OSError, match="no free loopback port"):
        free_port()


def test_a_port_another_process_chose_is_not_given_until_its_lease_ends(monkeypatch):
    """pytest's workers start servers side by side: a port one of them chose, and its
    server has not bound yet, is free to the kernel but leased to that process."""
    room = _unleased_room(1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_PORT, str(room[0])], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == str(room[0])
        monkeypatch.setattr(ports, "_server_range", lambda: room)
        with pytest.raises(OSError, match="no free loopback port"):
            free_port()
    finally:
        holder.kill()
        holder.wait()
    # The kernel dropped the lease with the process that held it.
    assert free_port() == room[0]


HOLD_A_PORT = """
import sys, time
import serverlab.base.ports as ports
ports._server_range = lambda: range(int(sys.argv[1]), int(sys.argv[1]) + 1)
print(ports.free_port(), flush=True)
time.sleep(60)
"""


def _unleased_room(size: int) -> range:
    """`size` ports in a row, free and leased by no one, this process included."""
    for low in range(ports.LOWEST_SERVER_PORT + 10_000, ports.LOWEST_SERVER_PORT, -size):
        room = range(low, low + size)
        if all(ports._tcp_free(p) and p not in ports._leases for p in room):
            return room
    raise AssertionError("no free room")


def test_a_kernel_that_repeats_a_port_still_gives_two_different_ones(monkeypatch):
    """Where the ephemeral range leaves no room below it (a run widened it), the kernel
    chooses; it may give two callers the same port in a row (CI once saw a server's HTTP
    and syslog ports equal, and its second bind fail); here it always does, and the lease
    on the first refuses the repeat."""
    kernel = iter([40000, 40000, 40000, 40001, 40002, 40003])
    monkeypatch.setattr(ports, "_server_range", lambda: range(0))
    monkeypatch.setattr(ports, "_kernel_port", lambda: next(kernel))
    monkeypatch.setattr(ports, "_tcp_free", lambda port: True)
    monkeypatch.setattr(ports, "_udp_free", lambda port: True)
    monkeypatch.setattr(ports, "_leases", {})
    assert free_port() == 40000
    assert free_port(also_udp=True) == 40001
    assert free_port(avoid={40002}) == 40003
