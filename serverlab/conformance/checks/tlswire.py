"""Raw TLS records for the versions this machine's OpenSSL no longer speaks (spec §12).

Python's `ssl` on OpenSSL 3 cannot offer SSL 3.0, and offers TLS 1.0 and 1.1 only at
security level 0, so a refusal check built on it could not tell a refusing server from a
client that never asked. These ClientHellos are written byte for byte (RFC 5246 §7.4.1.2,
RFC 8446 §4.1.2) and the server's first record is read as it comes: a ServerHello means
the version was accepted.
"""

import os
import socket
import struct
import time

from serverlab.conformance.checks.receive import End, receive_all

HANDSHAKE, ALERT = 0x16, 0x15
CLIENT_HELLO, SERVER_HELLO = 0x01, 0x02
VERSIONS = {"ssl3": 0x0300, "1.0": 0x0301, "1.1": 0x0302, "1.2": 0x0303}
# CBC suites with an HMAC, the only kind TLS 1.0 and 1.1 have; ECDHE first, for either key type.
CBC_SUITES = (0xC009, 0xC013, 0xC00A, 0xC014, 0xC023, 0xC027, 0x002F, 0x0035, 0x000A)
# AEAD suites of TLS 1.2, for a hello that a TLS 1.2 server should accept.
AEAD_SUITES = (0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8)
_GROUPS = (0x001D, 0x0017, 0x0018)  # x25519, P-256, P-384
_SIGNATURES = (0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0201, 0x0203)
ALERT_NAMES = {
    0: "close_notify",
    10: "unexpected_message",
    20: "bad_record_mac",
    40: "handshake_failure",
    47: "illegal_parameter",
    50: "decode_error",
    70: "protocol_version",
    71: "insufficient_security",
    80: "internal_error",
    86: "inappropriate_fallback",
    120: "no_application_protocol",
}


def client_hello(version: str, suites=CBC_SUITES, server_name: str = "localhost") -> bytes:
    """A whole TLS record holding a ClientHello of `version` (no supported_versions
    extension, so a server cannot take it for TLS 1.3)."""
    legacy = VERSIONS[version]
    extensions = b""
    if version != "ssl3":  # SSL 3.0 has no extensions (RFC 6101)
        extensions = _extensions(server_name)
    body = (
        struct.pack("!H", legacy)
        + os.urandom(32)
        + b"\x00"  # no session id
        + _vector(b"".join(struct.pack("!H", suite) for suite in suites), 2)
        + b"\x01\x00"  # the null compression method only
        + (_vector(extensions, 2) if extensions else b"")
    )
    message = bytes([CLIENT_HELLO]) + struct.pack("!I", len(body))[1:] + body
    # The record layer says TLS 1.0 for any hello, as clients do for middleboxes' sake.
    record_version = 0x0300 if version == "ssl3" else 0x0301
    return bytes([HANDSHAKE]) + struct.pack("!HH", record_version, len(message)) + message


def _extensions(server_name: str) -> bytes:
    name = server_name.encode()
    sni = _vector(b"\x00" + _vector(name, 2), 2)
    groups = _vector(b"".join(struct.pack("!H", g) for g in _GROUPS), 2)
    signatures = _vector(b"".join(struct.pack("!H", s) for s in _SIGNATURES), 2)
    return (
        _extension(0x0000, sni)
        + _extension(0x000A, groups)
        + _extension(0x000B, b"\x01\x00")  # EC point formats: uncompressed
        + _extension(0x000D, signatures)
        + _extension(0xFF01, b"\x00")  # renegotiation_info, empty
    )


def _extension(kind: int, data: bytes) -> bytes:
    return struct.pack("!HH", kind, len(data)) + data


def _vector(data: bytes, length_bytes: int) -> bytes:
    return len(data).to_bytes(length_bytes, "big") + data


def first_answer(port: int, hello: bytes, timeout_s: float) -> str:
    """What the server does with `hello`: `server_hello <version>`, `alert <name>`,
    `closed`, `silent` (nothing within the timeout) or `other <bytes>`."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(hello)
        head = _read(sock, 5, timeout_s)
        if len(head) < 5:
            return "silent" if head is None else "closed"
        kind, _record_version, length = struct.unpack("!BHH", head)
        body = _read(sock, min(length, 6), timeout_s) or b""
    if kind == ALERT and len(body) >= 2:
        return f"alert {ALERT_NAMES.get(body[1], body[1])}"
    if kind == HANDSHAKE and len(body) >= 6 and body[0] == SERVER_HELLO:
        chosen = struct.unpack("!H", body[4:6])[0]
        name = next((key for key, value in VERSIONS.items() if value == chosen), hex(chosen))
        return f"server_hello {name}"
    return f"other {head.hex()}"


def _read(sock: socket.socket, size: int, timeout_s: float) -> bytes | None:
    """Up to `size` bytes; fewer if the server closes; None if it says nothing in time."""
    data, end = receive_all(sock, time.monotonic() + timeout_s, size)
    return data or None if end is End.TIMEOUT else data
