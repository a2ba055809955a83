"""Talking to `GET /ws` (spec §11) with Python's `websockets`, not with serverlab's own code.

One client, `WsClient`, in the caller's thread alone: websockets' sans-I/O protocol does the
handshake, the framing (compression off unless a case offers it on purpose) and the answers
to pings and closes; the client moves bytes between it and its own socket. A case reads
whole messages or frames, and may write broken bytes of its own, which no client library
sends.

Not websockets' threaded client: it reads a TLS socket in one thread while it writes in
another, two threads on one OpenSSL object. Over TLS 1.3 the server's session tickets
arrive as the upgrade request is written, and against the reference server 2 upgrades in
300 (three held at a time) never got their answer, and the reader thread of one hung in its
SSL read; the same loop from one thread got all 900 answers, and the threaded client over
TLS 1.2 (no tickets after the handshake) all 450.
"""

from __future__ import annotations

import json
import socket
import time
from contextlib import contextmanager

import websockets
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import enable_client_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from serverlab.base import httpclient
from serverlab.conformance.checks.receive import End, receive
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

# What a failing WebSocket connection raises; the case turns it into a FAIL with its reason.
WS_ERRORS = (websockets.exceptions.WebSocketException, TimeoutError, OSError)
# The largest message a case reads (websockets' max_size).
MAX_MESSAGE = 2**20
DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


def ws_uri(ctx: VerifyContext) -> str:
    """ws://, or wss:// on the TLS port when a case of part `tls` carries this one."""
    return f"{ctx.origin('ws')}/ws"


def _tls(ctx: VerifyContext):
    return ctx.tls_context(["http/1.1"]) if ctx.transport == "tls" else None


@contextmanager
def open_ws(ctx: VerifyContext, compression: str | None = None, close_handshake: bool = True):
    """A client connection, with no pings of its own (the server's pongs are ours to ask
    for). Leaving it closes it with a close handshake (unless the server closed first), or
    without one (`close_handshake=False`), as when a client dies."""
    connection = None
    try:
        connection = WsClient(ctx, compression)
        yield connection
    except WS_ERRORS as error:
        raise httpclient.HttpError(f"WebSocket: {type(error).__name__}: {error}") from None
    finally:
        if connection is not None:
            connection.close(ctx.give_up_s if close_handshake else None)


def receive_json(connection: WsClient, timeout_s: float, what: str):
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


def send_json(connection: WsClient, document) -> None:
    connection.send(json.dumps(document))


def subscribe(connection: WsClient, events: list[str], ctx, outcome: Outcome) -> dict:
    """Subscribes and checks the `subscribed` reply; the subscribe message sent."""
    message = {"type": "subscribe", "events": events}
    send_json(connection, message)
    reply = receive_json(connection, ctx.give_up_s, "the subscribed reply")
    wanted = {"type": "subscribed", "events": events}
    if reply != wanted:
        outcome.abort(f"subscribe answered {reply!r}"[:200] + f", expected {wanted!r}")
    return message


class WsClient:
    """A WebSocket client on its own socket, in one thread (see the module's docstring)."""

    def __init__(self, ctx: VerifyContext, compression: str | None = None):
        extensions = enable_client_permessage_deflate(None) if compression == "deflate" else None
        self.protocol = ClientProtocol(
            parse_uri(ws_uri(ctx)), extensions=extensions, max_size=MAX_MESSAGE
        )
        port = ctx.tls_port if ctx.transport == "tls" else ctx.port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=ctx.timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.frames: list[Frame] = []
        try:
            self._handshake(ctx)
        except BaseException:
            self.sock.close()
            raise

    def _handshake(self, ctx: VerifyContext) -> None:
        """TLS if the case carries WebSocket over it, then the upgrade; what failed, raised."""
        deadline = time.monotonic() + ctx.timeout_s
        if ctx.transport == "tls":
            self.sock = _tls(ctx).wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.request = self.protocol.connect()
        self.protocol.send_request(self.request)
        self._flush()
        events = []
        while self.protocol.state is State.CONNECTING:
            got = self._pump(deadline, events)
            if got is End.TIMEOUT:
                raise TimeoutError("timed out while waiting for handshake response")
            if isinstance(got, End):
                break
        if self.protocol.state is not State.OPEN:
            raise self.protocol.handshake_exc or ConnectionError("closed before the 101")
        self.response = next(e for e in events if isinstance(e, Response))
        self.frames = [e for e in events if isinstance(e, Frame)]

    def close(self, timeout_s: float | None) -> None:
        """A close handshake if the connection is still open and `timeout_s` is given (the
        answer awaited that long), then the socket closed."""
        try:
            if timeout_s is not None and self.protocol.state is State.OPEN:
                self.send_close(1000, "")
                self.close_code(timeout_s)
        except (*WS_ERRORS, httpclient.HttpError):
            pass  # the server's part; a case that cares asked for it itself
        finally:
            self.sock.close()

    # Messages, as a client library gives them.

    def send(self, message) -> None:
        """A text (str) or binary (bytes) message, or one in fragments (an iterable of str)."""
        parts = [message] if isinstance(message, str | bytes) else list(message)
        for number, part in enumerate(parts):
            data, fin = (part.encode() if isinstance(part, str) else part), number == len(parts) - 1
            if number:
                self.protocol.send_continuation(data, fin)
            elif isinstance(part, str):
                self.protocol.send_text(data, fin)
            else:
                self.protocol.send_binary(data, fin)
        self._flush()

    def recv(self, timeout: float) -> str | bytes:
        """The next whole message: text as str, binary as bytes. TimeoutError if none comes
        within `timeout`; websockets' ConnectionClosed if the connection closes first."""
        deadline = time.monotonic() + timeout
        parts: list[Frame] = []
        while True:
            while self.frames:
                frame = self.frames.pop(0)
                if frame.opcode in DATA:
                    parts.append(frame)
                    if frame.fin:
                        data = b"".join(part.data for part in parts)
                        return data.decode() if parts[0].opcode is Opcode.TEXT else data
            if self.protocol.close_rcvd is not None:
                raise ConnectionClosed(self.protocol.close_rcvd, self.protocol.close_sent)
            got = self._pump(deadline, self.frames)
            if got is End.TIMEOUT:
                raise TimeoutError(f"no message in {timeout:g} s")
            if isinstance(got, End):
                raise ConnectionClosed(self.protocol.close_rcvd, self.protocol.close_sent)

    def ping(self, data: bytes) -> _Pong:
        self.protocol.send_ping(data)
        self._flush()
        return _Pong(self, data)

    # Frames and bytes, for the cases that break the rules.

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_json(self, document) -> None:
        self.send(json.dumps(document))

    def send_close(self, code: int, reason: str) -> None:
        self.protocol.send_close(code, reason)
        self._flush()

    def next_message(self, timeout_s: float, what: str):
        """The next data frame's payload; None if the server closed instead."""
        deadline = time.monotonic() + timeout_s
        while True:
            data = [frame for frame in self.frames if frame.opcode in DATA]
            self.frames = []
            if data:
                return data[0].data
            if self.protocol.close_rcvd or not self._receive(deadline, what):
                return None

    def close_code(self, timeout_s: float) -> int | None:
        """The code of the server's close frame (answered as a client does); None if the
        server closed TCP without one. HttpError if it does neither in time."""
        deadline = time.monotonic() + timeout_s
        while self.protocol.close_rcvd is None:
            if not self._receive(deadline, "a close frame"):
                return None
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
        """`_pump` into `frames`: False at EOF, HttpError naming `what` if the time is up."""
        got = self._pump(deadline, self.frames)
        if got is End.TIMEOUT:
            raise httpclient.HttpError(f"timed out waiting for {what}")
        return not isinstance(got, End)

    def _pump(self, deadline: float, into: list) -> bytes | End:
        """Feeds the protocol what arrives before `deadline`, adds its events to `into` and
        sends its answers (pongs, a close's reply); what arrived, or how reading ended."""
        got = receive(self.sock, deadline)
        if got is End.TIMEOUT:
            return got
        if isinstance(got, End):
            self.protocol.receive_eof()
        else:
            self.protocol.receive_data(got)
        into += self.protocol.events_received()
        self._flush()
        return got

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:  # b"" asks to half-close; the client closes the socket itself
                try:
                    self.sock.sendall(data)
                except OSError:
                    return


class _Pong:
    """The answer to one ping: `wait` reads until a pong with its payload comes (keeping
    the messages that come before it for `recv`)."""

    def __init__(self, client: WsClient, data: bytes):
        self.client, self.data = client, data

    def wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        frames = self.client.frames
        while not any(f.opcode is Opcode.PONG and f.data == self.data for f in frames):
            if isinstance(self.client._pump(deadline, frames), End):
                return False
        self.client.frames = [f for f in frames if f.opcode is not Opcode.PONG]
        return True
