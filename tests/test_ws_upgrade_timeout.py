"""verify's WebSocket client (conformance/checks/wswire.py) gives up at its timeout when a TLS
server completes the handshake and never answers the upgrade, and does all its work in the
caller's thread. websockets' threaded client read a TLS 1.3 socket in one thread while it
wrote in another: the server's session tickets, read as the upgrade went out, lost 2 answers
in 300 upgrades, and once its reader thread hung in an SSL read that closing did not wake."""

import socket
import ssl
import threading
from types import SimpleNamespace

import pytest

from serverlab.base import httpclient
from serverlab.base.tlskeys import make_key_material
from serverlab.conformance.checks.wswire import open_ws
from serverlab.conformance.context import VerifyContext

TIMEOUT_S = 1.0
# Far beyond the timeout: a client that gives up returns long before it.
HUNG_S = 20.0


def silent_tls_server(tmp_path, done: threading.Event) -> tuple[int, str]:
    """A TLS server (TLS 1.3, session tickets sent at the handshake's end) that reads the
    upgrade request and never answers it, holding the connection until `done`; its port and
    CA certificate."""
    keys = make_key_material(tmp_path, "ecdsa-p256")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keys.cert, keys.key)
    listener = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve() -> None:
        conn, _ = listener.accept()
        held.append(context.wrap_socket(conn, server_side=True))
        held[-1].recv(1 << 16)
        done.wait(HUNG_S)

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], str(keys.ca_cert)


def test_an_upgrade_unanswered_over_tls_gives_up_at_its_timeout(tmp_path):
    done = threading.Event()
    port, ca = silent_tls_server(tmp_path, done)
    # The server under test as a case sees it: its TLS port and the run's CA.
    server = SimpleNamespace(tls_port=port, tls=SimpleNamespace(ca_cert=ca))
    ctx = VerifyContext(server, None, "v0", "ws.x", TIMEOUT_S, give_up_s=0.5, transport="tls")
    raised = []

    def attempt() -> None:
        try:
            with open_ws(ctx):
                pass
        except httpclient.HttpError as error:
            raised.append(str(error))

    client = threading.Thread(target=attempt, daemon=True)
    client.start()
    client.join(HUNG_S)
    done.set()
    assert not client.is_alive(), "the client hung after its upgrade timed out"
    assert raised and raised[0].startswith("WebSocket: TimeoutError"), raised


def test_a_websocket_connection_over_tls_starts_no_thread_of_its_own(tmp_path, monkeypatch):
    done = threading.Event()
    port, ca = silent_tls_server(tmp_path, done)
    server = SimpleNamespace(tls_port=port, tls=SimpleNamespace(ca_cert=ca))
    ctx = VerifyContext(server, None, "v0", "ws.x", TIMEOUT_S, give_up_s=0.5, transport="tls")
    # The server above answers nothing: the threads are counted at each read while the
    # upgrade waits.
    counted, original = [], ssl.SSLSocket.recv

    def counting_recv(sock, *args):
        counted.append(threading.active_count())
        return original(sock, *args)

    before = threading.active_count()
    monkeypatch.setattr(ssl.SSLSocket, "recv", counting_recv)
    with pytest.raises(httpclient.HttpError, match="WebSocket: TimeoutError"), open_ws(ctx):
        pass
    done.set()
    assert counted and set(counted) == {before}, (before, counted)
