"""A gRPC client of verify's own, written from spec §16 and gRPC's PROTOCOL-HTTP2: calls as
HTTP/2 streams on the `h2` library's state machine (h2c, or TLS with ALPN h2), messages
length-prefixed, protobuf encoded and decoded by hand (the service's messages have a few
scalar fields each), status read from the trailers. It shares nothing with the engine or
with any gRPC library, so that a server passes by following the spec, not one stack.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

from serverlab.conformance.checks.receive import End, receive
from serverlab.conformance.outcome import CaseAborted

SERVICE = "/serverlab.v1.Lab/"
# gRPC status codes (grpc/grpc doc/statuscodes.md) the spec names.
CODES = {
    0: "OK",
    1: "CANCELLED",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    8: "RESOURCE_EXHAUSTED",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
}
VARINT, LENGTH_DELIMITED = 0, 2


class GrpcWireError(CaseAborted):
    """The connection could not be made or broke; the case fails with this reason."""


def code_name(code: int | None) -> str:
    return "no grpc-status" if code is None else CODES.get(code, str(code))


# --- protobuf, by hand -------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten-byte two's complement
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode(fields: list[tuple[int, int | bytes | str]]) -> bytes:
    """A message from (field number, value) pairs: ints as varints, bytes and str as
    length-delimited; proto3 leaves default values out, and so does this."""
    out = b""
    for number, value in fields:
        if isinstance(value, int):
            if value:
                out += _varint(number << 3 | VARINT) + _varint(value)
            continue
        data = value.encode() if isinstance(value, str) else value
        if data:
            out += _varint(number << 3 | LENGTH_DELIMITED) + _varint(len(data)) + data
    return out


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a varint runs past the message")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def decode(data: bytes) -> dict[int, int | bytes]:
    """Field number -> last value (varints as ints, length-delimited as bytes); other wire
    types (none in the service) are refused. ValueError if it does not decode."""
    fields: dict[int, int | bytes] = {}
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == VARINT:
            value, at = _read_varint(data, at)
            fields[number] = value - (1 << 64) if value >= 1 << 63 else value
        elif kind == LENGTH_DELIMITED:
            size, at = _read_varint(data, at)
            if at + size > len(data):
                raise ValueError("a field runs past the message")
            fields[number], at = data[at : at + size], at + size
        else:
            raise ValueError(f"field {number} has wire type {kind}, not in the service")
    return fields


def frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message: uncompressed, 4-byte big-endian length."""
    return b"\x00" + struct.pack("!I", len(message)) + message


# --- calls -------------------------------------------------------------------------------


@dataclass
class Call:
    """What came back on one call's stream so far."""

    stream_id: int
    headers: dict[str, str] = field(default_factory=dict)
    trailers: dict[str, str] = field(default_factory=dict)
    messages: list[bytes] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.time() per message
    buffer: bytes = b""
    ended: bool = False
    reset: str | None = None  # the RST_STREAM's error code name
    problem: str | None = None  # a message that broke the framing

    @property
    def trailers_only(self) -> bool:
        return self.ended and not self.trailers and "grpc-status" in self.headers

    @property
    def code(self) -> int | None:
        """grpc-status, from the trailers (or a trailers-only answer's headers)."""
        text = (self.headers if self.trailers_only else self.trailers).get("grpc-status")
        return int(text) if text and text.isdigit() else None

    @property
    def grpc_message(self) -> str | None:
        return (self.headers if self.trailers_only else self.trailers).get("grpc-message")

    def take(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 5 and self.problem is None:
            if self.buffer[0] not in (0, 1):
                self.problem = f"a message's compression flag is {self.buffer[0]}"
                return
            if self.buffer[0] == 1:
                self.problem = "a compressed message, though the call asked for none"
                return
            size = struct.unpack("!I", self.buffer[1:5])[0]
            if len(self.buffer) < 5 + size:
                return
            self.messages.append(self.buffer[5 : 5 + size])
            self.arrivals.append(time.time())
            self.buffer = self.buffer[5 + size :]

    def outcome(self) -> str:
        """One line for `observed`: how the call ended."""
        if self.reset:
            return f"RST_STREAM {self.reset} after {len(self.messages)} messages"
        if not self.ended:
            return f"not ended, {len(self.messages)} messages"
        status = self.headers.get(":status", "?")
        form = "trailers-only " if self.trailers_only else ""
        return f"{status}, {form}{code_name(self.code)}, {len(self.messages)} messages"


class GrpcWire:
    """One HTTP/2 connection carrying gRPC calls, read until deadlines."""

    def __init__(self, sock: socket.socket, authority: str, scheme: str):
        self.sock, self.authority, self.scheme = sock, authority, scheme
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config)
        self.calls: dict[int, Call] = {}
        self.closed = False
        self.h2.initiate_connection()
        self.flush()

    @classmethod
    def open(cls, port: int, timeout_s: float, tls: ssl.SSLContext | None = None) -> GrpcWire:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
                if sock.selected_alpn_protocol() != "h2":
                    raise GrpcWireError(f"ALPN chose {sock.selected_alpn_protocol()!r}, not h2")
        except OSError as error:
            raise GrpcWireError(f"connecting to port {port}: {error}") from None
        return cls(sock, f"127.0.0.1:{port}", "https" if tls else "http")

    def close(self) -> None:
        self.sock.close()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError as error:
                raise GrpcWireError(f"sending: {error}") from None

    def start(self, method: str, timeout: str | None = None, path: str | None = None) -> Call:
        """Opens a call (its HEADERS) on a new stream; `timeout` is grpc-timeout's value."""
        stream_id = self.h2.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", self.scheme),
            (":authority", self.authority),
            (":path", path or SERVICE + method),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        if timeout:
            headers.append(("grpc-timeout", timeout))
        self.h2.send_headers(stream_id, headers)
        self.flush()
        self.calls[stream_id] = call = Call(stream_id)
        return call

    def send(self, call: Call, message: bytes, end: bool, deadline: float) -> None:
        """One message on the call, as flow control lets it go; `end` ends our side."""
        data = frame(message)
        while data and not (call.ended or call.reset):
            window = min(
                self.h2.local_flow_control_window(call.stream_id),
                self.h2.max_outbound_frame_size,
            )
            if window <= 0:
                if call.ended or call.reset or not self.pump(deadline):
                    return  # the server answered (or reset) before taking it all
                continue
            piece, data = data[:window], data[window:]
            try:
                self.h2.send_data(call.stream_id, piece, end_stream=end and not data)
            except h2.exceptions.StreamClosedError:
                return  # the server reset the stream while we sent: the call reads why
            self.flush()

    def end(self, call: Call) -> None:
        self.h2.end_stream(call.stream_id)
        self.flush()

    def cancel(self, call: Call) -> None:
        self.h2.reset_stream(call.stream_id, h2.errors.ErrorCodes.CANCEL)
        self.flush()

    def unary(self, method: str, message: bytes, deadline: float, **start) -> Call:
        call = self.start(method, **start)
        self.send(call, message, True, deadline)
        self.wait(call, deadline)
        return call

    def wait(self, call: Call, deadline: float, messages: int | None = None) -> Call:
        """Reads until the call ends, or has `messages` messages, or the deadline."""
        while not (call.ended or call.reset):
            if messages is not None and len(call.messages) >= messages:
                break
            if not self.pump(deadline):
                break
        return call

    def pump(self, deadline: float) -> bool:
        """Reads one piece and applies its events; False at the deadline or the close."""
        piece = receive(self.sock, deadline) if not self.closed else End.CLOSED
        if isinstance(piece, End):
            self.closed = piece is not End.TIMEOUT
            return False
        try:
            events = self.h2.receive_data(piece)
        except h2.exceptions.ProtocolError as error:
            raise GrpcWireError(f"the server broke HTTP/2: {error}") from None
        for event in events:
            self._apply(event)
        self.flush()
        return True

    def _apply(self, event) -> None:
        call = self.calls.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.DataReceived):
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        if call is None:
            return
        if isinstance(event, h2.events.ResponseReceived):
            call.headers = dict(event.headers)
        elif isinstance(event, h2.events.TrailersReceived):
            call.trailers = dict(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            call.take(event.data)
        elif isinstance(event, h2.events.StreamEnded):
            call.ended = True
        elif isinstance(event, h2.events.StreamReset) and not call.ended:
            call.reset = _error_name(event.error_code)


def _error_name(code: int) -> str:
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return hex(code)
