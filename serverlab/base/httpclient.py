"""A small blocking HTTP/1.1 client over a raw socket, built on h11.

It exists (rather than urllib or requests) so that verify sees exact framing and headers,
can send malformed or oversize requests, and bounds every wait with a deadline.
"""

import contextlib
import json
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import h11

READ_SIZE = 65536


class HttpError(Exception):
    """The server did not give a usable answer: timeout, closed connection, bad framing."""


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    # One entry per body piece as received, with whether it started/ended an HTTP chunk.
    pieces: list[tuple[bytes, bool, bool]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((value for key, value in self.headers if key == name), None)

    def has_header(self, name: str) -> bool:
        return self.header(name) is not None

    @property
    def chunked(self) -> bool:
        return "chunked" in (self.header("transfer-encoding") or "").lower()

    @property
    def media_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def json(self):
        """The body parsed as JSON; HttpError if it is not JSON."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise HttpError(f"body is not JSON ({error}): {self.body[:80]!r}") from None


class Deadline:
    def __init__(self, seconds: float):
        self.expires = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.expires - time.monotonic()


class HttpConnection:
    """One client connection; requests run one after another (no pipelining)."""

    def __init__(
        self, host: str, port: int, timeout_s: float = 5.0, tls: ssl.SSLContext | None = None
    ):
        """`tls`: a client context to speak HTTPS with (the handshake is done here)."""
        self.host, self.port, self.timeout_s = host, port, timeout_s
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as error:
            raise HttpError(f"cannot connect to {host}:{port}: {error}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                self.sock = tls.wrap_socket(self.sock, server_hostname=host)
            except OSError as error:
                self.sock.close()
                raise HttpError(f"TLS handshake with {host}:{port} failed: {error}") from None
        self.h11 = h11.Connection(h11.CLIENT)
        self._eof = False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self) -> None:
        self.sock.close()

    def request(self, method, target, headers=(), body=b"", chunks=None, timeout_s=None):
        """Sends a request (a `body`, or `chunks` for a chunked body) and reads the answer."""
        self.send_request(method, target, headers, body, chunks)
        return self.read_response(timeout_s)

    def send_request(self, method, target, headers=(), body=b"", chunks=None) -> None:
        self._next_cycle()
        headers = [("Host", f"{self.host}:{self.port}"), *headers]
        if chunks is not None:
            headers.append(("Transfer-Encoding", "chunked"))
        elif body or method in ("POST", "PUT"):
            headers.append(("Content-Length", str(len(body))))
        events = [h11.Request(method=method, target=target, headers=headers)]
        events += [h11.Data(data=chunk) for chunk in (chunks if chunks is not None else [body])]
        events.append(h11.EndOfMessage())
        self._send(b"".join(self.h11.send(event) or b"" for event in events if event_ok(event)))

    def send_raw(self, raw: bytes, method: str = "GET") -> None:
        """Sends bytes as they are (a malformed request); the answer is read as usual."""
        self._next_cycle()
        self.h11.send(h11.Request(method=method, target="/", headers=[("Host", "raw")]))
        self.h11.send(h11.EndOfMessage())
        self._send(raw)

    def read_response(self, timeout_s=None) -> Response:
        started = time.monotonic()
        response = self.read_head(timeout_s)
        for data, chunk_start, chunk_end in self.iter_body(timeout_s):
            response.pieces.append((data, chunk_start, chunk_end))
        response.body = b"".join(piece for piece, _, _ in response.pieces)
        response.elapsed_s = time.monotonic() - started
        return response

    def read_head(self, timeout_s=None) -> Response:
        deadline = Deadline(timeout_s or self.timeout_s)
        while True:
            event = self._next_event(deadline, "the response head")
            if isinstance(event, h11.Response):
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]
                return Response(status=event.status_code, headers=headers)
            if not isinstance(event, h11.InformationalResponse):
                raise HttpError(f"unexpected {type(event).__name__} before the response head")

    def iter_body(self, timeout_s=None) -> Iterator[tuple[bytes, bool, bool]]:
        """The body as it arrives: (bytes, starts a chunk, ends a chunk), until its end."""
        deadline = Deadline(timeout_s or self.timeout_s)
        while True:
            event = self._next_event(deadline, "the response body")
            if isinstance(event, h11.EndOfMessage):
                return
            if isinstance(event, h11.Data):
                yield bytes(event.data), event.chunk_start, event.chunk_end

    def read_pipelined(self, timeout_s=None) -> Response:
        """The answer to a further request that went out inside an earlier `send_raw`."""
        self.send_raw(b"")
        return self.read_response(timeout_s)

    def wait_closed(self, timeout_s: float) -> bool:
        """True if the server closes the connection within the timeout (bytes are ignored)."""
        return self.read_until_closed(timeout_s)[1]

    def read_until_closed(self, timeout_s: float) -> tuple[bytes, bool]:
        """What the server sends past the last response read, and whether it then closes
        the connection within the timeout."""
        received = [bytes(self.h11.trailing_data[0])]
        deadline = Deadline(timeout_s)
        while deadline.remaining() > 0:
            self.sock.settimeout(deadline.remaining())
            try:
                data = self.sock.recv(READ_SIZE)
            except TimeoutError:
                break
            except OSError:
                return b"".join(received), True
            if not data:
                return b"".join(received), True
            received.append(data)
        return b"".join(received), False

    def _next_cycle(self) -> None:
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        elif self.h11.our_state is not h11.IDLE:
            raise HttpError("the server has closed this connection (no keep-alive)")

    def _send(self, data: bytes) -> None:
        # The server may answer (e.g. 431) and close before it read everything we sent;
        # the answer, if any, is still waiting in our receive buffer.
        with contextlib.suppress(OSError):
            self.sock.sendall(data)

    def _next_event(self, deadline: Deadline, what: str):
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as error:
                if self.h11.their_state is h11.ERROR and self._eof:
                    raise HttpError(f"connection closed by the server before {what}") from None
                raise HttpError(f"malformed HTTP from the server in {what}: {error}") from None
            if event is h11.NEED_DATA:
                self._receive(deadline, what)
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise HttpError(f"connection closed by the server before {what} was complete")
            return event

    def _receive(self, deadline: Deadline, what: str) -> None:
        remaining = deadline.remaining()
        if remaining <= 0:
            raise HttpError(f"timed out waiting for {what}")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(READ_SIZE)
        except TimeoutError:
            raise HttpError(f"timed out waiting for {what}") from None
        except OSError as error:
            data = b""
            if not isinstance(error, ConnectionResetError):
                raise HttpError(f"socket error waiting for {what}: {error}") from None
        self._eof = not data
        self.h11.receive_data(data)


def event_ok(event) -> bool:
    """Empty Data events are skipped: h11 would emit a zero-length chunk that ends the body."""
    return not (isinstance(event, h11.Data) and not event.data)


def get(port: int, target: str, timeout_s: float = 5.0, host: str = "127.0.0.1") -> Response:
    """One GET on a fresh connection."""
    with HttpConnection(host, port, timeout_s) as connection:
        return connection.request("GET", target, headers=[("Connection", "close")])


def post_json(port: int, target: str, payload, timeout_s: float = 5.0) -> Response:
    return call_json(port, "POST", target, payload, timeout_s)


def call_json(
    port: int, method: str, target: str, payload=None, timeout_s: float = 5.0
) -> Response:
    """One request on a connection of its own, with a JSON body unless `payload` is None."""
    with HttpConnection("127.0.0.1", port, timeout_s) as connection:
        headers = [("Connection", "close")]
        body = b""
        if payload is not None:
            body = json.dumps(payload).encode()
            headers.append(("Content-Type", "application/json"))
        return connection.request(method, target, headers=headers, body=body)
