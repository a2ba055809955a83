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
    assert {free_port() for _ in range(10)} == {taken[1]}


def test_a_kernel_that_repeats_a_port_still_gives_two_different_ones(monkeypatch):
    """Where the ephemeral range leaves no room below it (a run widened it), the kernel
    chooses; it may give two callers the same port in a row (CI once saw a server's HTTP
    and syslog ports equal, and its second bind fail); here it always does."""
    kernel = iter([40000, 40000, 40000, 40001])
    monkeypatch.setattr(ports, "_server_range", lambda: range(0))
    monkeypatch.setattr(ports, "_kernel_port", lambda: next(kernel))
    monkeypatch.setattr(ports, "_tcp_free", lambda port: True)
    monkeypatch.setattr(ports, "_udp_free", lambda port: True)
    http = free_port()
    assert free_port(also_udp=True) == http, "the kernel repeats itself here"
    assert free_port(also_udp=True, avoid={http}) == 40001
