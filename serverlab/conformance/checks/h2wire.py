"""HTTP/2 frames on a raw socket, for what a well-behaved client library refuses to send:
frames that break RFC 9113, and streams beyond the server's advertised limit (spec §13).

Frames are read with `hyperframe` and header blocks written with `hpack` (the codecs under
the `h2` library), over a TLS socket with ALPN `h2` or a cleartext one (h2c).
"""

import socket
import struct
import time

import hpack
from hyperframe.frame import Frame, GoAwayFrame, SettingsFrame

from serverlab.conformance.checks.receive import End, receive

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
WINDOW_UPDATE, CONTINUATION = 0x8, 0x9
UNKNOWN_TYPE = 0x20  # no frame type of RFC 9113 nor of a registered extension
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
DEFAULT_MAX_FRAME_SIZE, LARGEST_FRAME_SIZE = 2**14, 2**24 - 1  # RFC 9113 §4.2, §6.5.2
ERROR_NAMES = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}
CLOSED = "closed"


def raw_frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    """One frame as bytes, whatever it breaks (hyperframe refuses to build bad ones)."""
    return (
        struct.pack("!I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack("!I", stream_id)
        + payload
    )


def settings_payload(values: dict[int, int]) -> bytes:
    return b"".join(struct.pack("!HI", key, value) for key, value in values.items())


class H2Wire:
    """One HTTP/2 client connection driven frame by frame."""

    def __init__(self, sock: socket.socket, authority: str, scheme: str):
        self.sock, self.authority, self.scheme = sock, authority, scheme
        self.buffer = b""
        # Literal header fields never indexed: every block decodes on its own, so a frame
        # the server drops cannot put its decoder's table out of step with ours.
        self.encoder = hpack.Encoder()
        self.server_settings: dict[int, int] = {}

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def start(self, settings: dict[int, int], timeout_s: float) -> None:
        """The preface and our SETTINGS; then the server's SETTINGS, acknowledged."""
        self.send(PREFACE + raw_frame(SETTINGS, 0, 0, settings_payload(settings)))
        deadline = time.monotonic() + timeout_s
        while True:
            frame = self.read_frame(deadline)
            if frame is None or frame == CLOSED:
                raise OSError("no SETTINGS frame from the server after the preface")
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                self.server_settings = dict(frame.settings)
                self.send(raw_frame(SETTINGS, ACK, 0, b""))
                return

    def header_block(self, method: str, target: str) -> bytes:
        fields = [
            (":method", method),
            (":scheme", self.scheme),
            (":authority", self.authority),
            (":path", target),
        ]
        return self.encoder.encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in fields])

    def request(self, stream_id: int, target: str) -> None:
        block = self.header_block("GET", target)
        self.send(raw_frame(HEADERS, END_HEADERS | END_STREAM, stream_id, block))

    def read_frame(self, deadline: float):
        """The next frame; CLOSED when the server closed; None at the deadline."""
        header = self._read(9, deadline)
        if header is None or header == CLOSED:
            return header
        frame, length = Frame.parse_frame_header(memoryview(header))
        body = self._read(length, deadline) if length else b""
        if body is None or body == CLOSED:
            return body
        frame.parse_body(memoryview(body))
        return frame

    def _read(self, size: int, deadline: float):
        while len(self.buffer) < size:
            try:
                piece = receive(self.sock, deadline)
            except OSError:  # a TLS error: closed all the same
                piece = End.CLOSED
            if piece is End.TIMEOUT:
                return None
            if isinstance(piece, End):  # a reset or an unclean TLS end too
                return CLOSED
            self.buffer += piece
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


def goaway_code(frame) -> str | None:
    return (
        ERROR_NAMES.get(frame.error_code, hex(frame.error_code))
        if isinstance(frame, GoAwayFrame)
        else None
    )
