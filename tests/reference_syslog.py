"""Syslog parsing for tests/reference_server.py (spec §7.1, part `syslog-parse`).

A strict parser written from the spec's rules, so that the reference server can show what a
conforming server counts, and (with fault `syslog_lax_parse`) what a server that only looks
at the PRI counts. Returns the parsed fields, or None for a malformed message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"
PRI = re.compile(rb"<(0|[1-9][0-9]{0,2})>")
TIMESTAMP_5424 = re.compile(
    rb"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})"
)
MONTHS = b"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
TIMESTAMP_3164 = re.compile(rb"(" + MONTHS + rb") ([ 1-3][0-9]) [0-9]{2}:[0-9]{2}:[0-9]{2} ")
TAG = re.compile(rb"([A-Za-z0-9_./-]{1,32})(\[([!-Z^-~]{1,128})\])?:")
SD_NAME = re.compile(rb"[!#-<>-\\^-~]{1,32}")  # printable US-ASCII but '=', ']', '"' and SP
# Header fields of RFC 5424 and their longest value, in order after VERSION SP TIMESTAMP SP.
FIELDS = (("host", 255), ("app", 48), ("procid", 128), ("msgid", 32))


@dataclass
class Parsed:
    pri: int
    timestamp: bytes | None
    host: bytes | None
    app: bytes | None
    procid: bytes | None
    msgid: bytes | None
    sd_elements: int
    msg: bytes
    rfc3164: bool = False


def parse(message: bytes) -> Parsed | None:
    """The message's fields, or None if the spec calls it malformed."""
    pri = PRI.match(message)
    if not pri or int(pri.group(1)) > 191:
        return None
    rest = message[pri.end() :]
    if rest[:1].isdigit() and rest[:1] != b"0":
        return _parse_5424(int(pri.group(1)), rest)
    return _parse_3164(int(pri.group(1)), rest)


def _token(rest: bytes, longest: int) -> tuple[bytes | None, bytes] | None:
    """A printable field up to `longest` octets followed by SP; None if there is none."""
    end = rest.find(b" ")
    value = rest[:end]
    if end < 1 or end > longest or not all(0x21 <= c <= 0x7E for c in value):
        return None
    return (None if value == b"-" else value), rest[end + 1 :]


def _parse_5424(pri: int, rest: bytes) -> Parsed | None:
    if not rest.startswith(b"1 "):
        return None
    rest = rest[2:]
    stamp = _token(rest, 64)
    if stamp is None or (stamp[0] is not None and not TIMESTAMP_5424.fullmatch(stamp[0])):
        return None
    values, rest = [stamp[0]], stamp[1]
    for _name, longest in FIELDS:
        field = _token(rest, longest)
        if field is None:
            return None
        values.append(field[0])
        rest = field[1]
    sd = _structured_data(rest)
    if sd is None:
        return None
    elements, rest = sd
    if rest and not rest.startswith(b" "):
        return None
    msg = rest[1:]
    if msg.startswith(BOM):
        msg = msg[len(BOM) :]
        try:
            msg.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return Parsed(pri, *values, sd_elements=elements, msg=msg)


def _structured_data(rest: bytes) -> tuple[int, bytes] | None:
    """(SD-ELEMENTs, what follows them), or None if the structured data is malformed."""
    if rest.startswith(b"-"):
        return 0, rest[1:]
    elements = 0
    while rest.startswith(b"["):
        rest = _sd_element(rest[1:])
        if rest is None:
            return None
        elements += 1
    return (elements, rest) if elements else None


def _sd_element(rest: bytes) -> bytes | None:
    """What follows one element whose `[` is already taken, or None."""
    name = SD_NAME.match(rest)
    if not name:
        return None
    rest = rest[name.end() :]
    while rest.startswith(b" "):
        param = SD_NAME.match(rest, 1)
        if not param or rest[param.end() : param.end() + 2] != b'="':
            return None
        rest = _sd_value(rest[param.end() + 2 :])
        if rest is None:
            return None
    return rest[1:] if rest.startswith(b"]") else None


def _sd_value(rest: bytes) -> bytes | None:
    """What follows a PARAM-VALUE whose opening quote is taken, or None."""
    at = 0
    while at < len(rest):
        char = rest[at : at + 1]
        if char == b"\\" and rest[at + 1 : at + 2] in (b'"', b"\\", b"]"):
            at += 2
        elif char == b'"':
            return rest[at + 1 :]
        elif char in (b"]", b"\\"):
            return None
        else:
            at += 1
    return None


def _parse_3164(pri: int, rest: bytes) -> Parsed | None:
    stamp = TIMESTAMP_3164.match(rest)
    if not stamp:
        return None
    rest = rest[stamp.end() :]
    host = _token(rest, 255)
    if host is None:
        return None
    rest = host[1]
    tag = TAG.match(rest)
    app = procid = None
    if tag:
        app, procid = tag.group(1), tag.group(3)
        rest = rest[tag.end() :].removeprefix(b" ")
    return Parsed(pri, stamp.group(0)[:-1], host[0], app, procid, None, 0, rest, rfc3164=True)
