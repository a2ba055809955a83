"""HTTP/2 over TLS and with prior knowledge (spec §13, §14): bad frames, streams beyond
the advertised limit, and HTTP/1.1 sent to the h2c port.

`transport` in a case's params is "h2" (TLS with ALPN h2 on `{tls_port}`) or "h2c"
(cleartext on `{h2c_port}`).
"""

import contextlib
import socket
import time

import hpack
from hyperframe.frame import DataFrame, GoAwayFrame, HeadersFrame, RstStreamFrame

import serverlab.conformance.checks.h2wire as h2wire
from serverlab.conformance.checks.carried import h2_request
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

CLOSE_WITHIN_S = 2.0
MIN_STREAMS, MAX_STREAMS = 100, 1000
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 0x1, 0x2, 0x3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x4, 0x5
END_BOTH = h2wire.END_HEADERS | h2wire.END_STREAM


@contextlib.contextmanager
def h2_wire(ctx: VerifyContext, transport: str, settings: dict[int, int] | None = None):
    """An HTTP/2 connection past the SETTINGS exchange, as an H2Wire."""
    port = ctx.tls_port if transport == "h2" else ctx.h2c_port
    sock = socket.create_connection(("127.0.0.1", port), timeout=ctx.timeout_s)
    try:
        if transport == "h2":
            sock = ctx.tls_context(["h2"]).wrap_socket(sock, server_hostname="127.0.0.1")
            if sock.selected_alpn_protocol() != "h2":
                raise OSError(f"ALPN chose {sock.selected_alpn_protocol()!r}, not h2")
        wire = h2wire.H2Wire(sock, f"127.0.0.1:{port}", "https" if transport == "h2" else "http")
        wire.start(settings or {}, ctx.timeout_s)
        yield wire
    finally:
        sock.close()


def _request_block(wire: h2wire.H2Wire, ctx: VerifyContext) -> bytes:
    return wire.header_block("GET", ctx.probe_target)


def _headers(stream_id: int, block: bytes, flags: int = END_BOTH) -> bytes:
    return h2wire.raw_frame(h2wire.HEADERS, flags, stream_id, block)


def _huffman_eos(wire: h2wire.H2Wire, ctx: VerifyContext) -> bytes:
    """RFC 7541 §5.2: a Huffman string that holds EOS (30 one-bits) is a decoding error.
    The :path is a literal without indexing (its name static index 4), Huffman-coded."""
    fields = [(":method", "GET"), (":scheme", wire.scheme), (":authority", wire.authority)]
    block = wire.encoder.encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in fields])
    return _headers(1, block + b"\x04\x84\xff\xff\xff\xff")


def _table_size_beyond(wire: h2wire.H2Wire, ctx: VerifyContext) -> bytes:
    """RFC 7541 §4.2, §6.3: a dynamic table size update beyond the server's
    SETTINGS_HEADER_TABLE_SIZE is a decoding error."""
    limit = wire.server_settings.get(HEADER_TABLE_SIZE, 4096)
    update = bytes(hpack.hpack.encode_integer(limit + 1, 5))
    update = bytes([update[0] | 0x20]) + update[1:]
    return _headers(1, update + _request_block(wire, ctx))


# Each frame (or frames) a check sends: a function of the connection and the context.
BAD_FRAMES = {
    # RFC 9113 §6.1: DATA on stream 0
    "data_stream0": lambda wire, ctx: h2wire.raw_frame(h2wire.DATA, h2wire.END_STREAM, 0, b"x"),
    # §5.1.1: clients open odd streams only
    "headers_even": lambda wire, ctx: _headers(2, _request_block(wire, ctx)),
    # §6.5.2: 0 or 1 only
    "enable_push_2": lambda wire, ctx: _settings({ENABLE_PUSH: 2}),
    # §6.4: RST_STREAM on an idle stream
    "rst_idle": lambda wire, ctx: h2wire.raw_frame(h2wire.RST_STREAM, 0, 1, _u32(0x8)),
    # §5.1: DATA on an idle stream
    "data_idle": lambda wire, ctx: h2wire.raw_frame(h2wire.DATA, h2wire.END_STREAM, 1, b"x"),
    # §6.9.1: the connection's window beyond 2^31-1
    "window_overflow": lambda wire, ctx: _window_update(0, 2**31 - 1),
    # §6.9: an increment of 0 on the connection
    "window_update_zero": lambda wire, ctx: _window_update(0, 0),
    # §6.5.2: SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1 (FLOW_CONTROL_ERROR)
    "initial_window_too_big": lambda wire, ctx: _settings({INITIAL_WINDOW_SIZE: 2**31}),
    # §6.5: a SETTINGS ACK with a payload (FRAME_SIZE_ERROR)
    "settings_ack_payload": lambda wire, ctx: h2wire.raw_frame(
        h2wire.SETTINGS, h2wire.ACK, 0, h2wire.settings_payload({INITIAL_WINDOW_SIZE: 65535})
    ),
    # §6.7: a PING of 7 octets, not 8 (FRAME_SIZE_ERROR)
    "ping_length": lambda wire, ctx: h2wire.raw_frame(h2wire.PING, 0, 0, b"serverl"),
    # §6.10: a header block is CONTINUATION frames only until END_HEADERS: a PING between
    "continuation_interleaved": lambda wire, ctx: (
        _headers(1, _request_block(wire, ctx), h2wire.END_STREAM)
        + h2wire.raw_frame(h2wire.PING, 0, 0, b"serverlb")
        + h2wire.raw_frame(h2wire.CONTINUATION, h2wire.END_HEADERS, 1, b"")
    ),
    # RFC 7541 §2.3.3: an index beyond the static table and an empty dynamic one
    "hpack_bad_index": lambda wire, ctx: _headers(1, _request_block(wire, ctx) + b"\xfe"),
    "hpack_table_size": _table_size_beyond,
    "hpack_huffman_eos": _huffman_eos,
}


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def _settings(values: dict[int, int]) -> bytes:
    return h2wire.raw_frame(h2wire.SETTINGS, 0, 0, h2wire.settings_payload(values))


def _window_update(stream_id: int, increment: int) -> bytes:
    return h2wire.raw_frame(h2wire.WINDOW_UPDATE, 0, stream_id, _u32(increment))


def _bad_frame(wire: h2wire.H2Wire, ctx: VerifyContext, name: str) -> bytes:
    if name not in BAD_FRAMES:
        raise ValueError(f"unknown bad frame '{name}'")
    return BAD_FRAMES[name](wire, ctx)


def h2_bad_frame(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame the RFC answers with a connection error (PROTOCOL_ERROR unless the case
    names another code): the connection is ended (MUST), by GOAWAY with that code and a
    close (SHOULD); new connections served."""
    transport = params["transport"]
    named = params.get("code", "PROTOCOL_ERROR")
    with h2_wire(ctx, transport) as wire:
        wire.send(_bad_frame(wire, ctx, params["frame"]))
        code, closed = _goaway_then_close(wire, CLOSE_WITHIN_S + ctx.give_up_s)
    outcome.observed.append(f"GOAWAY {code}" if code else "no GOAWAY")
    outcome.observed.append("closed" if closed else "kept open")
    if not code and not closed:
        outcome.fail(f"{params['frame']}: neither a GOAWAY nor a close")
    elif code != named:
        outcome.warn(f"{params['frame']}: {code or 'no'} GOAWAY, RFC 9113 names {named}")
    if code and not closed:
        outcome.warn(f"the connection stayed open {CLOSE_WITHIN_S:g} s after the GOAWAY")
    response = h2_request(ctx, transport, "GET", ctx.probe_target)
    outcome.require(response.status < 500, "a new HTTP/2 connection was not served afterwards")


def _goaway_then_close(wire: h2wire.H2Wire, timeout_s: float) -> tuple[str | None, bool]:
    deadline = time.monotonic() + timeout_s
    code = None
    while True:
        frame = wire.read_frame(deadline)
        if frame is None:
            return code, False
        if frame == h2wire.CLOSED:
            return code, True
        code = h2wire.goaway_code(frame) or code


def h2_excess_streams(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Streams up to SETTINGS_MAX_CONCURRENT_STREAMS held open (a zero flow-control window
    keeps their answers in), then one more: it is refused, the others still served."""
    with h2_wire(ctx, params["transport"], {INITIAL_WINDOW_SIZE: 0}) as wire:
        limit = wire.server_settings.get(MAX_CONCURRENT_STREAMS)
        if limit is None or not MIN_STREAMS <= limit <= MAX_STREAMS:
            outcome.abort(
                f"SETTINGS_MAX_CONCURRENT_STREAMS is {limit}, not {MIN_STREAMS}..{MAX_STREAMS}"
            )
        for number in range(limit + 1):
            wire.request(2 * number + 1, ctx.probe_target)
        excess = 2 * limit + 1
        answer = _answer_to(wire, excess, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
        outcome.observed.append(f"limit {limit}: {answer}")
        _judge_excess(answer, outcome)
        if answer.startswith("RST_STREAM") and " on " not in answer:
            _served_within_limit(ctx, wire, limit, outcome)


def _answer_to(wire: h2wire.H2Wire, excess: int, deadline: float) -> str:
    """What became of the stream beyond the limit, and of the others on the way."""
    reset_within = {}
    while True:
        frame = wire.read_frame(deadline)
        if frame is None:
            ending = "no answer"
            break
        if frame == h2wire.CLOSED:
            ending = "closed without GOAWAY"
            break
        if isinstance(frame, GoAwayFrame):
            ending = f"GOAWAY {h2wire.goaway_code(frame)}"
            break
        if isinstance(frame, HeadersFrame) and frame.stream_id == excess:
            return "served"
        if isinstance(frame, RstStreamFrame):
            code = h2wire.ERROR_NAMES.get(frame.error_code, hex(frame.error_code))
            if frame.stream_id == excess and not reset_within:
                return f"RST_STREAM {code}"
            reset_within[frame.stream_id] = code
    if reset_within:
        codes = "/".join(sorted(set(reset_within.values())))
        return f"RST_STREAM {codes} on {len(reset_within)} streams, then {ending}"
    return ending


def _judge_excess(answer: str, outcome: Outcome) -> None:
    """REFUSED_STREAM on that stream alone is the spec's pick; every other refusal the RFC
    allows warns (it drops the client's work or hides why); serving it, or silence, fails."""
    if answer == "RST_STREAM REFUSED_STREAM":
        return
    if answer in ("served", "no answer"):
        outcome.fail(f"the stream beyond the limit was {answer}, expected REFUSED_STREAM")
    else:
        outcome.warn(f"the stream beyond the limit got {answer}; the spec picks REFUSED_STREAM")


def _served_within_limit(ctx, wire: h2wire.H2Wire, limit: int, outcome: Outcome) -> None:
    """The streams within the limit, their windows opened, all end."""
    open_streams = {2 * number + 1 for number in range(limit)}
    updates = b"".join(
        h2wire.raw_frame(h2wire.WINDOW_UPDATE, 0, stream, (1 << 20).to_bytes(4, "big"))
        for stream in sorted(open_streams)
    )
    wire.send(updates)
    deadline = time.monotonic() + ctx.timeout_s + ctx.give_up_s
    while open_streams:
        frame = wire.read_frame(deadline)
        if frame is None or frame == h2wire.CLOSED or isinstance(frame, GoAwayFrame):
            outcome.fail(f"{len(open_streams)} streams within the limit were never finished")
            return
        ended = isinstance(frame, DataFrame | HeadersFrame) and "END_STREAM" in frame.flags
        if ended or isinstance(frame, RstStreamFrame):
            open_streams.discard(frame.stream_id)


# Malformed requests (RFC 9113 §8.1.1) beyond a missing pseudo-header: what the fault does
# to the request's fields, and how the outcome names it.
MALFORMED = {
    # §8.3: each pseudo-header field at most once
    "duplicate_path": (lambda fields: [*fields, (":path", fields[-1][1])], "a second :path"),
    # §8.2.1: field names are lowercase
    "uppercase_name": (lambda fields: [*fields, ("X-Upper", "1")], "an uppercase field name"),
    # §8.2.2: connection-specific fields are malformed
    "connection_header": (
        lambda fields: [*fields, ("connection", "keep-alive")],
        "a Connection field",
    ),
    # §8.3: every pseudo-header field before the regular ones
    "pseudo_after_regular": (
        lambda fields: [*fields[:-1], ("accept", "*/*"), fields[-1]],
        "a pseudo-header after a regular field",
    ),
}


def _malformed_fields(wire: h2wire.H2Wire, ctx: VerifyContext, params: dict):
    """The request's fields as the case breaks them, and what it did to them."""
    fields = [
        (":method", "GET"),
        (":scheme", wire.scheme),
        (":authority", wire.authority),
        (":path", ctx.probe_target),
    ]
    if "missing" in params:
        missing = params["missing"]
        return [(k, v) for k, v in fields if k != missing], f"a request without {missing}"
    change, what = MALFORMED[params["fault"]]
    return change(fields), f"a request with {what}"


def h2_malformed(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A malformed request (RFC 9113 §8.1.1): without one of its pseudo-header fields
    (§8.3.1), or with a field §8.2 or §8.3 forbids. RST_STREAM PROTOCOL_ERROR, or a 4xx
    answer that ends the stream, pass; the stream error treated as a connection error (§5.4)
    warns; serving it, or leaving the stream open (unanswered, or after a 4xx), fails."""
    with h2_wire(ctx, params["transport"]) as wire:
        fields, what = _malformed_fields(wire, ctx, params)
        block = wire.encoder.encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in fields])
        wire.send(_headers(1, block))
        answer = _malformed_answer(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
    outcome.observed.append(answer)
    _judge_malformed(what, answer, outcome)


def _malformed_answer(wire: h2wire.H2Wire, deadline: float) -> str:
    """The answer on stream 1, and for a 4xx whether its stream then ended: ", ended", or
    ", then <what came instead>" (a RST_STREAM ends it too)."""
    answer = _answer_on_stream(wire, deadline, status_ends=True)
    if answer.startswith("status 4") and not answer.endswith(", ended"):
        after = _answer_on_stream(wire, deadline, until_end=True)
        answer += ", ended" if after == "ended" else f", then {after}"
    return answer


def _answer_on_stream(
    wire: h2wire.H2Wire,
    deadline: float,
    until_end: bool = False,
    status_ends: bool = False,
    stream: int = 1,
) -> str:
    """The server's answer on the stream (1 unless named): "status <code>", "RST_STREAM
    <code>", "GOAWAY <code>", "closed" or "no answer"; with until_end, "ended" once the
    answer ends instead of its status; with status_ends, "status <code>, ended" for a status
    that ends it."""
    while True:
        frame = wire.read_frame(deadline)
        if frame is None:
            return "no answer"
        if frame == h2wire.CLOSED:
            return "closed"
        if isinstance(frame, GoAwayFrame):
            return f"GOAWAY {h2wire.goaway_code(frame)}"
        if frame.stream_id != stream:
            continue
        if isinstance(frame, RstStreamFrame):
            return f"RST_STREAM {h2wire.ERROR_NAMES.get(frame.error_code, hex(frame.error_code))}"
        if until_end and isinstance(frame, DataFrame | HeadersFrame):
            if "END_STREAM" in frame.flags:
                return "ended"
        elif isinstance(frame, HeadersFrame):
            fields = dict(hpack.Decoder().decode(frame.data, raw=False))
            ended = ", ended" if status_ends and "END_STREAM" in frame.flags else ""
            return f"status {fields.get(':status', '?')}{ended}"


def _judge_malformed(what: str, answer: str, outcome: Outcome) -> None:
    """Spec §13's pick for RFC 9113 §8.1.1: a stream error PROTOCOL_ERROR, or a 4xx
    response that ends the stream (the RFC lets a server answer before it resets it)."""
    ended = answer.endswith(", ended") or ", then RST_STREAM" in answer
    if answer == "RST_STREAM PROTOCOL_ERROR" or (answer.startswith("status 4") and ended):
        return
    if answer.endswith("no answer") or (answer.startswith("status") and ", then" not in answer):
        outcome.fail(
            f"{what} got {answer}: expected RST_STREAM PROTOCOL_ERROR or a 4xx that ends it"
        )
    else:
        outcome.warn(f"{what} got {answer}; the spec picks RST_STREAM PROTOCOL_ERROR or a 4xx")


def h2_continuation(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A valid request whose header block is split over HEADERS and two CONTINUATION
    frames (RFC 9113 §6.10: any split is valid, a small non-final piece too): served as any
    other."""
    with h2_wire(ctx, params["transport"]) as wire:
        block = wire.header_block("GET", ctx.probe_target)
        third = len(block) // 3
        wire.send(
            _headers(1, block[:third], h2wire.END_STREAM)
            + h2wire.raw_frame(h2wire.CONTINUATION, 0, 1, block[third : 2 * third])
            + h2wire.raw_frame(h2wire.CONTINUATION, h2wire.END_HEADERS, 1, block[2 * third :])
        )
        answer = _answer_on_stream(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
    outcome.observed.append(answer)
    outcome.require(answer == "status 200", f"a header block split over CONTINUATION got {answer}")


def _allowed_frame(name: str) -> bytes:
    if name == "ping_ack":  # §6.7: a PING ACK that answers none of the server's
        return h2wire.raw_frame(h2wire.PING, h2wire.ACK, 0, b"serverlb")
    if name == "settings_duplicates":  # §6.5: values are processed in order, the last wins
        entries = h2wire.settings_payload({INITIAL_WINDOW_SIZE: 65535}) * 2
        return h2wire.raw_frame(h2wire.SETTINGS, 0, 0, entries)
    if name == "unknown_type":  # §5.5: frames of an unknown type are ignored
        return h2wire.raw_frame(h2wire.UNKNOWN_TYPE, 0xFF, 0, b"serverlab")
    raise ValueError(f"unknown allowed frame '{name}'")


def h2_allowed_frame(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame RFC 9113 allows that a stack might take for an attack (a PING ACK that
    answers no PING of the server's, a SETTINGS frame naming a setting twice, a frame of an
    unknown type): no error, and a request after it is served, then another once that
    answer is in (a server that ends the connection a moment after the frame, having served
    what came with it, is caught by the second)."""
    with h2_wire(ctx, params["transport"]) as wire:
        wire.send(_allowed_frame(params["frame"]))
        wire.request(1, ctx.probe_target)
        answer = _answer_on_stream(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
        if answer == "status 200":
            wire.request(3, ctx.probe_target)
            deadline = time.monotonic() + ctx.timeout_s + ctx.give_up_s
            # "ended", not its status: the status is coded against the first answer's HPACK table.
            later = _answer_on_stream(wire, deadline, until_end=True, stream=3)
            answer = answer if later == "ended" else f"{answer}, then {later}"
    outcome.observed.append(answer)
    outcome.require(answer == "status 200", f"after {params['frame']}, a request got {answer}")


def _oversized_data(wire: h2wire.H2Wire, ctx: VerifyContext) -> bytes | None:
    """RFC 9113 §4.2: a DATA frame one octet beyond the server's SETTINGS_MAX_FRAME_SIZE,
    on a request's open stream; None when the server allows the largest frame there is."""
    size = wire.server_settings.get(MAX_FRAME_SIZE, h2wire.DEFAULT_MAX_FRAME_SIZE) + 1
    if size > h2wire.LARGEST_FRAME_SIZE:
        return None
    return _headers(1, _request_block(wire, ctx), h2wire.END_HEADERS) + h2wire.raw_frame(
        h2wire.DATA, h2wire.END_STREAM, 1, b"x" * size
    )


def _data_after_end_stream(wire: h2wire.H2Wire, ctx: VerifyContext) -> bytes:
    """RFC 9113 §6.1: DATA on a stream after the client's END_STREAM, once the answer has
    ended it (closed) too, is a stream error STREAM_CLOSED (§5.1 lets it be the
    connection's)."""
    wire.request(1, ctx.probe_target)
    answer = _answer_on_stream(wire, time.monotonic() + ctx.timeout_s, until_end=True)
    if answer != "ended":
        raise OSError(f"the request before the DATA frame got {answer}")
    return h2wire.raw_frame(h2wire.DATA, h2wire.END_STREAM, 1, b"x")


STREAM_FRAMES = {"oversized_data": _oversized_data, "data_after_end_stream": _data_after_end_stream}


def h2_stream_error(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame RFC 9113 answers with an error of the code the case names, on its stream
    (RST_STREAM) or the connection (GOAWAY): either passes; another code, or a close with
    no frame, warns; no answer at all fails."""
    named = params["code"]
    with h2_wire(ctx, params["transport"]) as wire:
        frames = STREAM_FRAMES[params["frame"]](wire, ctx)
        if frames is None:
            outcome.observed.append("SETTINGS_MAX_FRAME_SIZE 2^24-1: no frame exceeds it")
            return
        wire.send(frames)
        answer = _error_on_stream_1(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
    outcome.observed.append(answer)
    if answer == "no answer":
        outcome.fail(f"{params['frame']}: no RST_STREAM, GOAWAY or close; RFC 9113 names {named}")
    elif not answer.endswith(f" {named}"):
        outcome.warn(f"{params['frame']}: {answer}, RFC 9113 names {named}")


def _error_on_stream_1(wire: h2wire.H2Wire, deadline: float) -> str:
    """The error the server answered with. The request's answer is skipped, and so is a
    RST_STREAM NO_ERROR after it: RFC 9113 §8.1 lets a server that has answered stop the
    rest of the request's body so (Tomcat does, now and then before it reads the frame)."""
    while True:
        answer = _answer_on_stream(wire, deadline)
        if not answer.startswith("status") and answer != "RST_STREAM NO_ERROR":
            return answer


def h2c_http1(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """HTTP/1.1 on the h2c port: never answered as HTTP/1.1; the connection is closed."""
    request = f"GET {ctx.probe_target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", ctx.h2c_port), timeout=ctx.timeout_s) as sock:
        sock.sendall(request)
        wire = h2wire.H2Wire(sock, "", "http")
        deadline = time.monotonic() + CLOSE_WITHIN_S + ctx.give_up_s
        seen, closed = [], False
        while not closed and time.monotonic() < deadline:
            if wire.buffer.startswith(b"HTTP/") or (not wire.buffer and _peek_http1(sock)):
                outcome.abort("an HTTP/1.1 request on the h2c port was answered as HTTP/1.1")
            frame = wire.read_frame(deadline)
            if frame is None:
                break
            closed = frame == h2wire.CLOSED
            if not closed:
                seen.append(h2wire.goaway_code(frame) or type(frame).__name__)
    outcome.observed.append(", ".join([*seen, "closed" if closed else "kept open"]))
    outcome.require(closed, "the h2c port kept an HTTP/1.1 connection open")


def _peek_http1(sock: socket.socket) -> bool:
    sock.settimeout(CLOSE_WITHIN_S)
    try:
        return sock.recv(5, socket.MSG_PEEK) == b"HTTP/"
    except OSError:
        return False


CHECKS = {
    "h2_bad_frame": h2_bad_frame,
    "h2_excess_streams": h2_excess_streams,
    "h2_malformed": h2_malformed,
    "h2_continuation": h2_continuation,
    "h2_allowed_frame": h2_allowed_frame,
    "h2_stream_error": h2_stream_error,
    "h2c_http1": h2c_http1,
}
