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
MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, ENABLE_PUSH = 0x3, 0x4, 0x2


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


def _bad_frame(wire: h2wire.H2Wire, name: str) -> bytes:
    if name == "data_stream0":  # RFC 9113 §6.1
        return h2wire.raw_frame(h2wire.DATA, h2wire.END_STREAM, 0, b"x")
    if name == "headers_even":  # §5.1.1: clients open odd streams only
        block = wire.header_block("GET", "/")
        return h2wire.raw_frame(h2wire.HEADERS, h2wire.END_HEADERS | h2wire.END_STREAM, 2, block)
    if name == "enable_push_2":  # §6.5.2: 0 or 1 only
        return h2wire.raw_frame(h2wire.SETTINGS, 0, 0, h2wire.settings_payload({ENABLE_PUSH: 2}))
    if name == "rst_idle":  # §6.4: RST_STREAM on an idle stream
        return h2wire.raw_frame(h2wire.RST_STREAM, 0, 1, (0x8).to_bytes(4, "big"))
    if name == "window_overflow":  # §6.9.1: the connection's window beyond 2^31-1
        return h2wire.raw_frame(h2wire.WINDOW_UPDATE, 0, 0, (2**31 - 1).to_bytes(4, "big"))
    raise ValueError(f"unknown bad frame '{name}'")


def h2_bad_frame(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame the RFC answers with a connection error (PROTOCOL_ERROR unless the case
    names another code): the connection is ended (MUST), by GOAWAY with that code and a
    close (SHOULD); new connections served."""
    transport = params["transport"]
    named = params.get("code", "PROTOCOL_ERROR")
    with h2_wire(ctx, transport) as wire:
        wire.send(_bad_frame(wire, params["frame"]))
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


def h2_malformed(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A request without one of its pseudo-header fields (RFC 9113 §8.3.1): malformed
    (§8.1.1). RST_STREAM PROTOCOL_ERROR or a 4xx answer pass; the stream error treated as a
    connection error (§5.4) warns; serving it, or leaving the stream unanswered, fails."""
    missing = params["missing"]
    with h2_wire(ctx, params["transport"]) as wire:
        fields = [
            (":method", "GET"),
            (":scheme", wire.scheme),
            (":authority", wire.authority),
            (":path", ctx.probe_target),
        ]
        kept = [hpack.NeverIndexedHeaderTuple(k, v) for k, v in fields if k != missing]
        block = wire.encoder.encode(kept)
        wire.send(
            h2wire.raw_frame(h2wire.HEADERS, h2wire.END_HEADERS | h2wire.END_STREAM, 1, block)
        )
        answer = _answer_on_stream_1(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
    outcome.observed.append(answer)
    _judge_malformed(f"a request without {missing}", answer, outcome)


def _answer_on_stream_1(wire: h2wire.H2Wire, deadline: float) -> str:
    """The server's answer on stream 1: "status <code>", "RST_STREAM <code>", "GOAWAY
    <code>", "closed" or "no answer"."""
    while True:
        frame = wire.read_frame(deadline)
        if frame is None:
            return "no answer"
        if frame == h2wire.CLOSED:
            return "closed"
        if isinstance(frame, GoAwayFrame):
            return f"GOAWAY {h2wire.goaway_code(frame)}"
        if isinstance(frame, RstStreamFrame) and frame.stream_id == 1:
            return f"RST_STREAM {h2wire.ERROR_NAMES.get(frame.error_code, hex(frame.error_code))}"
        if isinstance(frame, HeadersFrame) and frame.stream_id == 1:
            fields = dict(hpack.Decoder().decode(frame.data, raw=False))
            return f"status {fields.get(':status', '?')}"


def _judge_malformed(what: str, answer: str, outcome: Outcome) -> None:
    """Spec §13's pick for RFC 9113 §8.1.1: a stream error PROTOCOL_ERROR, or a 4xx
    response first (the RFC lets a server answer before it resets the stream)."""
    if answer == "RST_STREAM PROTOCOL_ERROR" or answer.startswith("status 4"):
        return
    if answer == "no answer" or answer.startswith("status"):
        outcome.fail(f"{what} got {answer}: expected RST_STREAM PROTOCOL_ERROR or a 4xx")
    else:
        outcome.warn(f"{what} got {answer}; the spec picks RST_STREAM PROTOCOL_ERROR or a 4xx")


def h2_continuation(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A valid request whose header block is split over HEADERS and CONTINUATION (RFC 9113
    §6.10): served as any other."""
    with h2_wire(ctx, params["transport"]) as wire:
        block = wire.header_block("GET", ctx.probe_target)
        half = len(block) // 2
        wire.send(
            h2wire.raw_frame(h2wire.HEADERS, h2wire.END_STREAM, 1, block[:half])
            + h2wire.raw_frame(h2wire.CONTINUATION, h2wire.END_HEADERS, 1, block[half:])
        )
        answer = _answer_on_stream_1(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
    outcome.observed.append(answer)
    outcome.require(answer == "status 200", f"a header block split over CONTINUATION got {answer}")


def _allowed_frame(name: str) -> bytes:
    if name == "ping_ack":  # §6.7: a PING ACK that answers none of the server's
        return h2wire.raw_frame(h2wire.PING, h2wire.ACK, 0, b"serverlb")
    if name == "settings_duplicates":  # §6.5: values are processed in order, the last wins
        entries = h2wire.settings_payload({INITIAL_WINDOW_SIZE: 65535}) * 2
        return h2wire.raw_frame(h2wire.SETTINGS, 0, 0, entries)
    raise ValueError(f"unknown allowed frame '{name}'")


def h2_allowed_frame(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame RFC 9113 allows that a stack might take for an attack (a PING ACK that
    answers no PING of the server's, a SETTINGS frame naming a setting twice): no error,
    and a request after it is served."""
    with h2_wire(ctx, params["transport"]) as wire:
        wire.send(_allowed_frame(params["frame"]))
        wire.request(1, ctx.probe_target)
        answer = _answer_on_stream_1(wire, time.monotonic() + ctx.timeout_s + ctx.give_up_s)
    outcome.observed.append(answer)
    outcome.require(answer == "status 200", f"after {params['frame']}, a request got {answer}")


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
    "h2c_http1": h2c_http1,
}
