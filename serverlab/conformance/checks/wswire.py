"""Talking to `GET /ws` (spec §11) with Python's `websockets`, not with serverlab's own code.

Well-formed traffic goes through its threaded client, with compression off unless a case
offers it on purpose. Broken frames, which no client library sends, go through `RawWebSocket`:
websockets' sans-I/O protocol does the handshake and reads the server's frames, and the case
writes its own bytes beside it.
"""

import contextlib
import json
import socket
import time
from contextlib import contextmanager

import websockets
from websockets.client import ClientProtocol
from websockets.frames import Frame
from websockets.protocol import State
from websockets.sync.client import ClientConnection, connect
from websockets.uri import parse_uri

from serverlab.base import httpclient
from serverlab.conformance.checks.receive import End, receive
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

# What a failing websockets client raises; the case turns it into a FAIL with its reason.
WS_ERRORS = (websockets.exceptions.WebSocketException, TimeoutError, OSError)


def ws_uri(ctx: VerifyContext) -> str:
    """ws://, or wss:// on the TLS port when a case of part `tls` carries this one."""
    return f"{ctx.origin('ws')}/ws"


def _tls(ctx: VerifyContext):
    return ctx.tls_context(["http/1.1"]) if ctx.transport == "tls" else None


class _WakingConnection(ClientConnection):
    """websockets' client connection, whose socket is shut down before it is closed. Over
    TLS 1.3 its reader thread may sit in an SSL read (the server's session tickets made the
    socket readable, and no record followed); closing the descriptor does not wake that read,
    so an upgrade that timed out waited for the thread forever (seen once under load in
    `make test`). A shutdown does wake it."""

    def close_socket(self) -> None:
        with contextlib.suppress(OSError):  # not connected, or already closed
            socket.socket.shutdown(self.socket, socket.SHUT_RDWR)
        super().close_socket()


@contextmanager
def open_ws(ctx: VerifyContext, compression: str | None = None):
    """A client connection; no pings of its own, so the server's pongs are ours to ask for."""
    try:
        with connect(
            ws_uri(ctx),
            create_connection=_WakingConnection,
            compression=compression,
            open_timeout=ctx.timeout_s,
            close_timeout=ctx.give_up_s,
            ping_interval=None,
            max_size=2**20,
            ssl=_tls(ctx),
        ) as connection:
            yield connection
    except WS_ERRORS as error:
        raise httpclient.HttpError(f"WebSocket: {type(error).__name__}: {error}") from None


def receive_json(connection: ClientConnection, timeout_s: float, what: str):
    """The next message, parsed; HttpError if none comes or it is not JSON text."""
    try:
        message = connection.recv(timeout=timeout_s)
    except TimeoutError:
        raise httpclient.HttpError(f"timed out waiting for {what}") from None
    except WS_ERRORS as error:
        raise httpclient.HttpError(f"waiting for {what}: {type(error).__name__}: {error}") from None
    if not isinstance(message, str):
        raise httpclient.HttpError(f"{what}: a binary message")
    try:
        return json.loads(message)
    except json.JSONDecodeError:
        raise httpclient.HttpError(f"{what} is not JSON: {message[:80]!r}") from None


def send_json(connection: ClientConnection, document) -> None:
    connection.send(json.dumps(document))


def subscribe(connection: ClientConnection, events: list[str], ctx, outcome: Outcome) -> dict:
    """Subscribes and checks the `subscribed` reply; the subscribe message sent."""
    message = {"type": "subscribe", "events": events}
    send_json(connection, message)
    reply = receive_json(connection, ctx.give_up_s, "the subscribed reply")
    wanted = {"type": "subscribed", "events": events}
    if reply != wanted:
        outcome.abort(f"subscribe answered {reply!r}"[:200] + f", expected {wanted!r}")
    return message


class RawWebSocket:
    """A WebSocket client on a plain socket that can also write bytes of its own."""

    def __init__(self, ctx: VerifyContext):
        self.timeout_s = ctx.timeout_s
        self.protocol = ClientProtocol(parse_uri(ws_uri(ctx)))
        port = ctx.tls_port if ctx.transport == "tls" else ctx.port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=ctx.timeout_s)
        if ctx.transport == "tls":
            self.sock = _tls(ctx).wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.protocol.send_request(self.protocol.connect())
        self._flush()
        self.events: list = []
        deadline = time.monotonic() + ctx.timeout_s
        while self.protocol.state is State.CONNECTING and self._receive(deadline, "the 101"):
            pass
        if self.protocol.state is not State.OPEN:
            self.sock.close()
            raise httpclient.HttpError(f"WebSocket handshake: {self.protocol.handshake_exc}")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_json(self, document) -> None:
        self.protocol.send_text(json.dumps(document).encode())
        self._flush()

    def send_close(self, code: int, reason: str) -> None:
        self.protocol.send_close(code, reason)
        self._flush()

    def next_message(self, timeout_s: float, what: str):
        """The next data frame's payload; None if the server closed instead."""
        deadline = time.monotonic() + timeout_s
        while True:
            frames = [event for event in self.events if isinstance(event, Frame)]
            self.events = []
            for frame in frames:
                if frame.opcode.name in ("TEXT", "BINARY", "CONT"):
                    return frame.data
            if self.protocol.close_rcvd or not self._receive(deadline, what):
                return None

    def close_code(self, timeout_s: float) -> int | None:
        """The code of the server's close frame (answered as a client does); None if the
        server closed TCP without one. HttpError if it does neither in time."""
        deadline = time.monotonic() + timeout_s
        while self.protocol.close_rcvd is None:
            if not self._receive(deadline, "a close frame"):
                return None
        self._flush()
        return self.protocol.close_rcvd.code

    def wait_closed(self, timeout_s: float) -> bool:
        """True if the server closed the TCP connection within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        try:
            while self._receive(deadline, "the TCP close"):
                pass
        except httpclient.HttpError:
            return False
        return True

    def _receive(self, deadline: float, what: str) -> bool:
        """Feeds the protocol what arrives next; False at EOF."""
        data = receive(self.sock, deadline)
        if data is End.TIMEOUT:
            raise httpclient.HttpError(f"timed out waiting for {what}")
        if isinstance(data, End):
            data = b""
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        self.events += self.protocol.events_received()
        self._flush()
        return bool(data)

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:  # b"" asks to half-close; the case closes the socket itself
                try:
                    self.sock.sendall(data)
                except OSError:
                    return
