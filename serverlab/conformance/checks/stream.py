"""Reading a comet stream: head, chunked framing, and one JSON document per line."""

import json
from dataclasses import dataclass, field

from serverlab.base import httpclient
from serverlab.conformance.exchange import check_required_headers
from serverlab.conformance.outcome import Outcome

NDJSON = "application/x-ndjson"


@dataclass
class CometStream:
    lines: list[bytes] = field(default_factory=list)
    documents: list = field(default_factory=list)


def read_comet(connection: httpclient.HttpConnection, outcome: Outcome, timeout_s: float):
    """The whole stream up to its end; None (with failures recorded) if it is unusable."""
    try:
        head = connection.read_head()
    except httpclient.HttpError as error:
        outcome.fail(f"comet head: {error}")
        return None
    check_required_headers(head, outcome, "comet head: ")
    outcome.require(head.status == 200, f"comet answered {head.status}")
    outcome.require(
        head.media_type == NDJSON,
        f"comet Content-Type {head.header('content-type')!r}, expected {NDJSON}",
    )
    outcome.require(head.chunked, "comet stream is not Transfer-Encoding: chunked")
    if outcome.failures:
        return None
    chunks = _chunks(connection, outcome, timeout_s)
    if chunks is None:
        return None
    if any(not chunk.endswith(b"\n") for chunk in chunks):
        outcome.warn("a line was split across chunks (flush whole lines)")
    return _parse_lines(b"".join(chunks), outcome)


def _chunks(connection, outcome: Outcome, timeout_s: float) -> list[bytes] | None:
    chunks, current = [], b""
    try:
        for data, _chunk_start, chunk_end in connection.iter_body(timeout_s):
            current += data
            if chunk_end:
                chunks.append(current)
                current = b""
    except httpclient.HttpError as error:
        outcome.fail(f"comet stream after {len(chunks)} chunks: {error}")
        return None
    return chunks


def _parse_lines(body: bytes, outcome: Outcome) -> CometStream | None:
    stream = CometStream()
    if body and not body.endswith(b"\n"):
        outcome.fail("the comet body does not end with a newline")
    for number, line in enumerate(body.splitlines(), 1):
        try:
            stream.documents.append(json.loads(line))
        except (UnicodeDecodeError, json.JSONDecodeError):
            outcome.fail(f"comet line {number} is not one JSON object: {line[:80]!r}")
            return None
        stream.lines.append(line)
    return stream
