import pytest

from serverlab.base.ports import free_port


def test_a_port_to_avoid_is_never_given():
    with pytest.raises(OSError, match="no free loopback port"):
        free_port(avoid=range(65536))


def test_a_kernel_that_repeats_a_port_still_gives_two_different_ones(monkeypatch):
    """The kernel may give two callers the same port in a row (CI once saw a server's
    HTTP and syslog ports equal, and its second bind fail); here it always does."""
    import serverlab.base.ports as ports

    class SamePort:
        def __init__(self, *args):
            self.port = 40000 if SamePort.calls < 3 else 40001
            SamePort.calls += 1

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def bind(self, address):
            pass

        def getsockname(self):
            return ("127.0.0.1", self.port)

    SamePort.calls = 0
    monkeypatch.setattr(ports.socket, "socket", SamePort)
    monkeypatch.setattr(ports, "_udp_free", lambda port: True)
    http = free_port()
    assert free_port(also_udp=True) == http, "the kernel repeats itself here"
    assert free_port(also_udp=True, avoid={http}) == 40001
