"""Request framing for tests/reference_server.py: a layer between the socket and h11.

h11 is lenient where spec §1.1 is not (any bytes in a chunk extension, obs-fold in
Transfer-Encoding, HTTP/1.0 with Transfer-Encoding, both framing fields at once), so this
layer decides where each request's body ends and hands h11 a normalised stream:

- strict (the default) follows RFC 9112 §6-7 as the spec reads them: a bad framing stops
  the stream with a `FramingError` (400 or 501) that the server answers before closing;
  Content-Length with Transfer-Encoding is framed by the chunked coding and marks the
  connection to close after the answer.
- lax (fault `lax_framing`) frames the way the servers of issue 13 did: the first of
  several lengths, digits read like C's atoi, `chunked` found anywhere in the codings,
  chunk lines ended by a bare LF, extensions and the CRLF after chunk data never checked,
  HTTP/1.0 keep-alive honoured. Every refusal case of `http.framing_*` fails it.
- overstrict (fault `overstrict_framing`) refuses what the spec calls legal: leading zeros,
  chunk extensions, a coding name not in lower case. Every `http.framing_legal_*` case
  that must be served fails it.
"""

import collections
import re

MAX_HEAD = 64 * 1024
MAX_LINE = 8 * 1024
MAX_SIZE = 2**63 - 1
HEAD_END = re.compile(rb"\r?\n\r?\n")
LINE_END = re.compile(rb"\r?\n")
DIGITS = re.compile(rb"[0-9]+")
TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
QUOTED = rb'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
EXT = rb"[ \t]*;[ \t]*" + TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + TOKEN + rb"|" + QUOTED + rb"))?"
CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]+)(?:" + EXT + rb")*")
ATOI = re.compile(rb"\s*([+-]?)([0-9]*)")
LAX_HEX = re.compile(rb"\s*(?:0[xX])?([0-9A-Fa-f]*)")
FRAMING_FIELDS = (b"content-length", b"transfer-encoding")


class FramingError(Exception):
    """A request this server refuses because of its framing; the connection then closes."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Framer:
    """Bytes from the socket in, the bytes h11 should parse out."""

    def __init__(self, lax: bool = False, overstrict: bool = False):
        self.lax, self.overstrict = lax, overstrict
        self.buffer = bytearray()
        self.state = "head"
        self.remaining = 0  # of a Content-Length body or of a chunk's data
        self.error: FramingError | None = None
        # One entry per request head handed on: close the connection after answering it.
        self.close_after: collections.deque[bool] = collections.deque()

    def feed(self, data: bytes) -> bytes:
        """What h11 gets of `data`; after a FramingError (kept in `error`) nothing more."""
        if self.error:
            return b""
        self.buffer += data
        out = bytearray()
        try:
            while self.buffer and self._step(out):
                pass
        except FramingError as error:
            self.error = error
        return bytes(out)

    def _step(self, out: bytearray) -> bool:
        """Moves what it can of the buffer to `out`; False when more input is needed."""
        if self.state == "through":
            out += self.buffer
            self.buffer.clear()
            return False
        if self.state == "head":
            return self._head(out)
        if self.state in ("length", "data"):
            taken = bytes(self.buffer[: self.remaining])
            del self.buffer[: len(taken)]
            out += taken
            self.remaining -= len(taken)
            if self.remaining == 0:
                self.state = "head" if self.state == "length" else "data_end"
            return True
        if self.state == "data_end":
            return self._data_end(out)
        return self._line(out)

    # -- request heads -----------------------------------------------------------------
    def _head(self, out: bytearray) -> bool:
        end = HEAD_END.search(self.buffer)
        if not end:
            if len(self.buffer) > MAX_HEAD:
                self.state = "through"  # h11 answers an oversize head with 431
                return True
            return False
        lines = LINE_END.split(bytes(self.buffer[: end.start()]))
        del self.buffer[: end.end()]
        request_line, fields = lines[0], lines[1:]
        framing, others = self._split_fields(fields)
        if self.lax:
            request_line, head = self._lax_framing(request_line, framing)
        else:
            head = self._strict_framing(request_line, framing)
        out += b"\r\n".join([request_line, *others, *head]) + b"\r\n\r\n"
        return True

    def _split_fields(self, fields: list[bytes]) -> tuple[dict, list[bytes]]:
        """The framing fields' values by lower-case name (obs-fold kept as a value that
        starts with a newline), and every other field line as it came."""
        framing: dict[bytes, list[bytes]] = {name: [] for name in FRAMING_FIELDS}
        others: list[bytes] = []
        last_framing = None  # the framing field a continuation line would belong to
        for line in fields:
            if line[:1] in (b" ", b"\t") and last_framing:
                framing[last_framing].append(b"\n" + line)
                continue
            name, colon, value = line.partition(b":")
            name = name.lower()
            if colon and name.rstrip() in FRAMING_FIELDS and (self.lax or name.rstrip() == name):
                last_framing = name.rstrip()
                framing[last_framing].append(value)
            else:
                others.append(line)  # h11 judges it (whitespace before a colon: 400)
                last_framing = None
        return framing, others

    def _strict_framing(self, request_line: bytes, framing: dict) -> list[bytes]:
        lengths, codings = framing[b"content-length"], framing[b"transfer-encoding"]
        if any(value.startswith(b"\n") for value in lengths + codings):
            raise FramingError(400, "obsolete line folding in a framing field")
        close = False
        if self.overstrict and any(
            value.strip().startswith(b"0") and value.strip() != b"0" for value in lengths
        ):
            raise FramingError(400, "leading zeros in content-length")
        if self.overstrict and any(value.strip() != b"chunked" for value in codings):
            raise FramingError(501, "only transfer-encoding: chunked")
        if codings:
            check_codings(request_line, codings)
            close = bool(lengths)
            head = [b"Transfer-Encoding: chunked"]
            self.state = "size"
        elif lengths:
            length = strict_length(lengths)
            head = [b"Content-Length: %d" % length]
            self.state, self.remaining = ("length", length) if length else ("head", 0)
        else:
            head = []
        self.close_after.append(close)
        return head

    def _lax_framing(self, request_line: bytes, framing: dict) -> tuple[bytes, list[bytes]]:
        # Folded continuation lines are dropped, as a parser that never heard of them would.
        lengths, codings = (
            [value for value in framing[name] if not value.startswith(b"\n")]
            for name in FRAMING_FIELDS
        )
        chunked = any(
            coding.strip().lower() == b"chunked"
            for value in codings
            for coding in value.split(b",")
        )
        if request_line.endswith(b" HTTP/1.0"):
            request_line = request_line[: -len(b"1.0")] + b"1.1"  # keep-alive honoured
        self.close_after.append(False)
        if chunked:
            self.state = "size"
            return request_line, [b"Transfer-Encoding: chunked"]
        if lengths:
            length = lax_int(lengths[0].split(b",")[0])
            self.state, self.remaining = ("length", length) if length else ("head", 0)
            return request_line, [b"Content-Length: %d" % length]
        return request_line, []

    # -- chunked bodies ----------------------------------------------------------------
    def _line(self, out: bytearray) -> bool:
        """A chunk-size line (state "size") or a trailer line (state "trailer")."""
        newline = self.buffer.find(b"\n")
        if newline < 0:
            if len(self.buffer) > MAX_LINE:
                raise FramingError(400, "chunk line too long")
            return False
        line = bytes(self.buffer[:newline])
        del self.buffer[: newline + 1]
        if self.lax:
            line = line.removesuffix(b"\r")
        elif not line.endswith(b"\r"):
            raise FramingError(400, "chunk line ended by a bare lf")
        elif b"\r" in line[:-1]:
            raise FramingError(400, "bare cr in a chunk line")
        else:
            line = line[:-1]
        if self.state == "trailer":
            self.state = "trailer" if line else "head"
            out += b"" if self.lax and line else line + b"\r\n"
            return True
        if self.overstrict and (line.startswith(b"0") and line != b"0" or b";" in line):
            raise FramingError(400, "chunk extension or leading zeros")
        size = lax_hex(line) if self.lax else strict_chunk_size(line)
        self.state, self.remaining = ("data", size) if size else ("trailer", 0)
        out += b"%x\r\n" % size
        return True

    def _data_end(self, out: bytearray) -> bool:
        if len(self.buffer) < 2:
            return False
        if not self.lax and self.buffer[:2] != b"\r\n":
            raise FramingError(400, "chunk data longer than its size")
        del self.buffer[:2]
        out += b"\r\n"
        self.state = "size"
        return True


def check_codings(request_line: bytes, values: list[bytes]) -> None:
    if request_line.endswith(b" HTTP/1.0"):
        raise FramingError(400, "transfer-encoding in an http/1.0 request")
    codings = [coding.strip().lower() for value in values for coding in value.split(b",")]
    if codings[-1] != b"chunked":
        raise FramingError(400, "chunked is not the final transfer coding")
    if b"chunked" in codings[:-1]:
        raise FramingError(400, "chunked applied more than once")
    if codings[:-1]:
        raise FramingError(501, "unknown transfer coding")


def strict_length(values: list[bytes]) -> int:
    items = [item.strip() for value in values for item in value.split(b",")]
    if not all(DIGITS.fullmatch(item) for item in items):
        raise FramingError(400, "malformed content-length")
    lengths = {int(item) for item in items}
    if len(lengths) > 1:
        raise FramingError(400, "differing content-length values")
    length = lengths.pop()
    if length > MAX_SIZE:
        raise FramingError(400, "content-length too large")
    return length


def strict_chunk_size(line: bytes) -> int:
    match = CHUNK_LINE.fullmatch(line)
    if not match:
        raise FramingError(400, "malformed chunk line")
    size = int(match.group(1), 16)
    if size > MAX_SIZE:
        raise FramingError(400, "chunk size too large")
    return size


def lax_int(text: bytes) -> int:
    """C's atoi into a 64-bit unsigned length: a sign, digits up to the first other byte."""
    sign, digits = ATOI.match(text).groups()
    value = int(digits or b"0") % 2**64
    return 0 if sign == b"-" else value


def lax_hex(line: bytes) -> int:
    return int(LAX_HEX.match(line).group(1) or b"0", 16) % 2**64
