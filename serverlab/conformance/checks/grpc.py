"""gRPC (spec §16): the service `serverlab.v1.Lab` where the server serves it (its h2c port
and, if it claims `h2`, its TLS port by ALPN h2; or its gRPC server's own ports), judged
with verify's own client (grpcwire.py) and, for unary and streaming calls, with a foreign
one (grpcio, its C core's HTTP/2 and gRPC framing; the messages are encoded by grpcwire's
codec).

`transport` in a case's params is "h2c" (the default) or "h2".
"""

from __future__ import annotations

import contextlib
import time

import grpc as grpcio

import serverlab.conformance.checks.grpcwire as grpcwire
from serverlab.conformance.checks.push import check_consecutive
from serverlab.conformance.checks.pushwire import clear_event, set_event
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

PERF_BODY = b"serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
# Spec §16: request messages of up to 4 MiB encoded are served; Echo's message is its data
# behind a one-byte tag and a four-byte length at this size.
ECHO_LIMIT = 4 * 1024 * 1024
ECHO_OVERHEAD = 5
OK, INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED = 0, 3, 4, 8, 12
GONE_WITHIN_S = 2.0
DEADLINE_GRACE_S = 1.0
INTERVAL_MS = 100
DELIVERIES = 3


def _claims_transport(ctx: VerifyContext, params: dict, outcome: Outcome) -> bool:
    transport = params.get("transport", "h2c")
    if ctx.grpc_port(transport) is not None:
        return True
    outcome.observed.append(f"no gRPC served over {transport}: nothing to check")
    return False


@contextlib.contextmanager
def grpc_wire(ctx: VerifyContext, params: dict):
    transport = params.get("transport", "h2c")
    if transport == "h2":
        tls = ctx.tls_context(["h2"])
        wire = grpcwire.GrpcWire.open(ctx.grpc_port(transport), ctx.timeout_s, tls)
    else:
        wire = grpcwire.GrpcWire.open(ctx.grpc_port(transport), ctx.timeout_s)
    try:
        yield wire
    finally:
        wire.close()


def _deadline(ctx: VerifyContext, extra_s: float = 0.0) -> float:
    return time.monotonic() + ctx.timeout_s + ctx.give_up_s + extra_s


def check_status(call: grpcwire.Call, want: int, outcome: Outcome) -> bool:
    """The call ended with `want` in its trailers (spec §16, Status): HTTP 200, a gRPC
    content-type, grpc-status in the trailers (or a trailers-only answer), and a
    grpc-message beside a non-zero status."""
    outcome.observed.append(call.outcome())
    failures = len(outcome.failures)
    if call.reset or not call.ended:
        return outcome.require(False, f"expected {grpcwire.code_name(want)}, got {call.outcome()}")
    if call.headers.get(":status") != "200":
        outcome.fail(f"HTTP status {call.headers.get(':status')}, expected 200")
    if not call.headers.get("content-type", "").startswith("application/grpc"):
        outcome.fail(f"content-type {call.headers.get('content-type')!r}, not application/grpc")
    if call.trailers_only and call.messages:
        outcome.fail("grpc-status came in the headers, before messages, with no trailers")
    if call.problem:
        outcome.fail(call.problem)
    if call.code != want:
        got, expected = grpcwire.code_name(call.code), grpcwire.code_name(want)
        outcome.fail(f"grpc-status {got}, expected {expected}")
    elif want != OK and not call.grpc_message:
        outcome.fail(f"{grpcwire.code_name(want)} without a grpc-message")
    return len(outcome.failures) == failures


def grpc_perf(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Perf answers OK with one PerfReply whose body is §2's 84 bytes."""
    if not _claims_transport(ctx, params, outcome):
        return
    with grpc_wire(ctx, params) as wire:
        call = wire.unary("Perf", b"", _deadline(ctx))
    if check_status(call, OK, outcome):
        _one_field(call, 1, PERF_BODY, "PerfReply.body", outcome)


def _one_field(call: grpcwire.Call, number: int, want: bytes, what: str, outcome: Outcome):
    if len(call.messages) != 1:
        outcome.fail(f"{len(call.messages)} reply messages, expected 1")
        return
    try:
        got = grpcwire.decode(call.messages[0]).get(number, b"")
    except ValueError as error:
        outcome.fail(f"the reply does not decode: {error}")
        return
    if got != want:
        outcome.fail(f"{what}: {len(got)} bytes {bytes(got[:40])!r}, expected {len(want)} bytes")


def grpc_echo(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Echo returns `size` bytes of data unchanged; `size` "limit" is the largest message
    the spec makes servers take (4 MiB encoded), "over" one byte more: RESOURCE_EXHAUSTED,
    and the connection goes on serving."""
    if not _claims_transport(ctx, params, outcome):
        return
    size = {"limit": ECHO_LIMIT - ECHO_OVERHEAD, "over": ECHO_LIMIT - ECHO_OVERHEAD + 1}.get(
        params["size"], params["size"]
    )
    data = bytes(index % 251 for index in range(size))
    with grpc_wire(ctx, params) as wire:
        call = wire.unary("Echo", grpcwire.encode([(1, data)]), _deadline(ctx, 5.0))
        if params["size"] != "over":
            if check_status(call, OK, outcome):
                _one_field(call, 1, data, "EchoMessage.data", outcome)
            return
        check_status(call, RESOURCE_EXHAUSTED, outcome)
        after = wire.unary("Perf", b"", _deadline(ctx))
    outcome.require(after.code == OK, f"a call after the refusal got {after.outcome()}")


def grpc_unknown(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A call to a method the service does not have: UNIMPLEMENTED."""
    with grpc_wire(ctx, params) as wire:
        call = wire.unary("", b"", _deadline(ctx), path=params["path"])
    check_status(call, UNIMPLEMENTED, outcome)


def grpc_bad_subscribe(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A Subscribe whose event list breaks §16's rule: INVALID_ARGUMENT."""
    events = ctx.substitute(params["events"])
    with grpc_wire(ctx, params) as wire:
        request = grpcwire.encode([(1, name) for name in events])
        call = wire.unary("Subscribe", request, _deadline(ctx))
    check_status(call, INVALID_ARGUMENT, outcome)


def grpc_deadline(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A Subscribe held past its grpc-timeout ends DEADLINE_EXCEEDED (or is reset) within
    1 s after the deadline, with no message on it."""
    timeout_ms = params["timeout_ms"]
    started = time.monotonic()
    with grpc_wire(ctx, params) as wire:
        call = wire.start("Subscribe", timeout=f"{timeout_ms}m")
        wire.send(call, grpcwire.encode([(1, ctx.event_name())]), True, _deadline(ctx))
        wire.wait(call, started + timeout_ms / 1000 + DEADLINE_GRACE_S + ctx.give_up_s)
    took = time.monotonic() - started
    outcome.notes.append(f"ended after {took * 1000:.0f} ms")
    if call.reset:
        outcome.observed.append(call.outcome())
    elif check_status(call, DEADLINE_EXCEEDED, outcome):
        outcome.require(not call.messages, f"{len(call.messages)} messages on an unset event")
    if took > timeout_ms / 1000 + DEADLINE_GRACE_S:
        outcome.fail(f"ended {took * 1000:.0f} ms after the start, deadline {timeout_ms} ms")


def grpc_subscribe(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A Subscribe stream gets one Delivery per emit cycle of its event: the name, seq
    rising by one, created <= sent, place within total; counted in /stats grpc."""
    event = ctx.event_name()
    with grpc_wire(ctx, params) as wire:
        base = _open_streams(ctx)
        call = wire.start("Subscribe")
        wire.send(call, grpcwire.encode([(1, event)]), True, _deadline(ctx))
        _wait_open(ctx, base + 1, outcome)
        before = ctx.stats()["grpc"]["deliveries"]
        set_event(ctx, event, INTERVAL_MS, outcome)
        try:
            wire.wait(call, _deadline(ctx), messages=DELIVERIES)
        finally:
            clear_event(ctx, event)
        wire.cancel(call)
    outcome.observed.append(f"{len(call.messages)} deliveries, then cancelled")
    if outcome.require(len(call.messages) >= DELIVERIES, f"stream {call.outcome()}"):
        check_deliveries(call.messages[:DELIVERIES], call.arrivals, event, outcome)
    counted = ctx.stats()["grpc"]["deliveries"] - before
    outcome.require(counted >= DELIVERIES, f"/stats grpc.deliveries rose by {counted}")


def check_deliveries(messages: list[bytes], arrivals, event: str, outcome: Outcome) -> None:
    seqs = []
    for message, arrived in zip(messages, arrivals, strict=False):
        try:
            fields = grpcwire.decode(message)
        except ValueError as error:
            outcome.fail(f"a Delivery does not decode: {error}")
            return
        name, seq = fields.get(1, b""), fields.get(2, 0)
        created, sent = fields.get(3, 0), fields.get(4, 0)
        total, place = fields.get(5, 0), fields.get(6, 0)
        seqs.append(seq)
        if name != event.encode():
            outcome.fail(f"Delivery.name {name!r}, expected {event!r}")
        if not 0 < created <= sent <= arrived * 1000 + 1000:
            outcome.fail(f"created {created}, sent {sent}: not a cycle's start, then this write")
        if not 1 <= place <= total:
            outcome.fail(f"place {place} of total {total}")
    check_consecutive(seqs, outcome)


def _open_streams(ctx: VerifyContext) -> int:
    return ctx.stats()["grpc"]["open"]


def _wait_open(ctx: VerifyContext, want: int, outcome: Outcome, within_s: float = 2.0) -> bool:
    """Waits until /stats grpc.open is `want`; false, with a failure, if it is not in time."""
    deadline = time.monotonic() + within_s
    while (seen := _open_streams(ctx)) != want:
        if time.monotonic() > deadline:
            outcome.fail(f"/stats grpc.open is {seen}, expected {want}")
            return False
        time.sleep(0.02)
    return True


def grpc_cancel(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A Subscribe stream its client resets (RST_STREAM CANCEL) is noticed gone within 2 s:
    /stats grpc.open falls back."""
    with grpc_wire(ctx, params) as wire:
        base = _open_streams(ctx)
        call = wire.start("Subscribe")
        wire.send(call, grpcwire.encode([(1, ctx.event_name())]), True, _deadline(ctx))
        if not _wait_open(ctx, base + 1, outcome):
            return
        wire.cancel(call)
        started = time.monotonic()
        if _wait_open(ctx, base, outcome, GONE_WITHIN_S):
            outcome.notes.append(f"noticed in {(time.monotonic() - started) * 1000:.0f} ms")


def grpc_chat(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Chat echoes each message as soon as it is read (one at a time, then several sent at
    once), in order, and ends OK after the client ends its side."""
    words = [f"message {number}".encode() * (1 + number * 50) for number in range(8)]
    with grpc_wire(ctx, params) as wire:
        call = wire.start("Chat")
        for count, word in enumerate(words[:3], start=1):
            wire.send(call, grpcwire.encode([(1, word)]), False, _deadline(ctx))
            wire.wait(call, _deadline(ctx), messages=count)
            if len(call.messages) < count:
                outcome.abort(f"message {count} was not echoed before the next: {call.outcome()}")
        for word in words[3:]:
            wire.send(call, grpcwire.encode([(1, word)]), False, _deadline(ctx))
        wire.end(call)
        wire.wait(call, _deadline(ctx))
    if not check_status(call, OK, outcome):
        return
    echoed = [grpcwire.decode(message).get(1, b"") for message in call.messages]
    outcome.require(echoed == words, f"{len(echoed)} echoes, not the {len(words)} sent in order")


def _foreign_channel(ctx: VerifyContext, params: dict):
    transport = params.get("transport", "h2c")
    address = f"127.0.0.1:{ctx.grpc_port(transport)}"
    if transport == "h2":
        ca = ctx.server.tls.ca_cert.read_bytes()
        credentials = grpcio.ssl_channel_credentials(root_certificates=ca)
        return grpcio.secure_channel(address, credentials)
    return grpcio.insecure_channel(address)


def _identity(data: bytes) -> bytes:
    return data


def grpc_foreign(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """grpcio (gRPC's C core) calls Perf and Echo and holds a Subscribe stream through two
    emit cycles: the same answers as verify's own client gets."""
    if not _claims_transport(ctx, params, outcome):
        return
    with _foreign_channel(ctx, params) as channel:
        try:
            _foreign_calls(ctx, channel, outcome)
        except grpcio.RpcError as error:
            outcome.fail(f"grpcio: {error.code().name}: {error.details()}")


def _foreign_calls(ctx: VerifyContext, channel, outcome: Outcome) -> None:
    def method(name, streaming=False):
        kind = channel.unary_stream if streaming else channel.unary_unary
        return kind(grpcwire.SERVICE + name, _identity, _identity)

    reply = method("Perf")(b"", timeout=ctx.timeout_s)
    outcome.require(grpcwire.decode(reply).get(1) == PERF_BODY, "Perf's body differs")
    data = bytes(range(256)) * 400
    echoed = method("Echo")(grpcwire.encode([(1, data)]), timeout=ctx.timeout_s)
    outcome.require(grpcwire.decode(echoed).get(1) == data, "Echo's data came back changed")
    event = ctx.event_name()
    base = _open_streams(ctx)
    stream = method("Subscribe", streaming=True)(
        grpcwire.encode([(1, event)]), timeout=ctx.timeout_s + ctx.give_up_s
    )
    _wait_open(ctx, base + 1, outcome)
    set_event(ctx, event, INTERVAL_MS, outcome)
    try:
        messages = [next(stream) for _ in range(2)]
    finally:
        clear_event(ctx, event)
        stream.cancel()
    check_deliveries(messages, [time.time()] * 2, event, outcome)
    outcome.observed.append("Perf, Echo (100 KiB), Subscribe (2 deliveries) over grpcio")


CHECKS = {
    "grpc_perf": grpc_perf,
    "grpc_echo": grpc_echo,
    "grpc_unknown": grpc_unknown,
    "grpc_bad_subscribe": grpc_bad_subscribe,
    "grpc_deadline": grpc_deadline,
    "grpc_subscribe": grpc_subscribe,
    "grpc_cancel": grpc_cancel,
    "grpc_chat": grpc_chat,
    "grpc_foreign": grpc_foreign,
}
