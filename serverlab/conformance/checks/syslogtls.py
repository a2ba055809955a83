"""Syslog over TLS on `{syslog_tls_port}` (spec §15, RFC 5425): octet-counted frames
counted as §7 counts TCP, across TLS records, and the bad input of the port.

Python's `ssl` is the client (it shares nothing with the engine); each `sendall` of an
`SSLSocket` is one TLS record, so a pause between two of them puts a frame's halves in two
records. The TLS posture (versions, ciphers, the certificate) is judged by the `tls` kinds
with `port = "syslog_tls"` (serverlab.conformance.checks.tls).
"""

import socket
import ssl
import time

from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.syslog import SETTLE_S, expect_counted, messages, octet_frame
from serverlab.conformance.checks.tls import (
    CLOSE_WITHIN_S,
    describe_plain,
    handshake,
    read_plain,
    read_to_end,
    tls_client,
    truncated_hello,
)
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

RECORD_GAP_S = 0.2  # between the two records of a split frame, so that they arrive apart
# Bad MSG-LENs (spec §15) put before a well-formed message: what a lenient parser would
# take for a length. 2^64 + 1 wraps to 1 in a 64-bit (and a 32-bit) counter.
BAD_LENGTHS = {
    "zero": lambda m: b"0 " + m,
    "leading_zero": lambda m: b"0" + octet_frame(m),
    "overflow": lambda m: str(2**64 + 1).encode() + b" " + m,
    "not_a_number": lambda m: m,
}
# A counted bad frame fails, but for a leading zero, which RFC 6587's TCP receivers take.
LENIENT_WARNS = {"leading_zero"}


def connect(ctx: VerifyContext, version: str | None = None, **options) -> ssl.SSLSocket:
    context = tls_client(ctx, version)
    sock = handshake(ctx, context, ctx.syslog_tls_port, **options)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def syslog_tls_messages(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Octet-counted messages over one TLS connection, counted exactly once each; with
    `split` ("length" or "message") one frame is cut in two TLS records there."""
    batch = messages(ctx, params.get("messages", 10), "tls")
    payload = b"".join(octet_frame(m) for m in batch)
    before = ctx.syslog_counters()
    parsed_before = _parsed(ctx)
    with connect(ctx, params.get("version")) as sock:
        if params.get("split"):
            # The last frame: inside its MSG-LEN (after one digit), or inside the message.
            frame_at = len(payload) - len(octet_frame(batch[-1]))
            cut = frame_at + (1 if params["split"] == "length" else 20)
            sock.sendall(payload[:cut])
            time.sleep(RECORD_GAP_S)
            sock.sendall(payload[cut:])
        else:
            sock.sendall(payload)
        expect_counted(ctx, before, batch, outcome)
    if parsed_before is not None:
        grown = _parsed(ctx) - parsed_before
        outcome.require(grown == len(batch), f"parsed grew by {grown}, expected {len(batch)}")


def _parsed(ctx: VerifyContext) -> int | None:
    """`parsed` of a syslog-parse server (started parsing by verify, spec §7.1), else None."""
    if "syslog-parse" not in ctx.parts:
        return None
    return ctx.stats()["syslog"]["parsed"]


def syslog_tls_incomplete(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame cut short by the client's close_notify is not counted."""
    before = ctx.syslog_counters()
    [message] = messages(ctx, 1, "cut")
    with connect(ctx) as sock:
        sock.sendall(octet_frame(message)[:-5])
        _close_notify(sock, ctx.give_up_s)
    [complete] = messages(ctx, 1, "complete")
    with connect(ctx) as sock:
        sock.sendall(octet_frame(complete))
        expect_counted(ctx, before, [complete], outcome)


def syslog_tls_close_notify(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """The client ends with close_notify: its messages are counted, and the server answers
    with its own close_notify (RFC 5425 §4.4)."""
    batch = messages(ctx, params.get("messages", 3), "closing")
    before = ctx.syslog_counters()
    sock = connect(ctx)
    sock.sendall(b"".join(octet_frame(m) for m in batch))
    answer = _close_notify(sock, CLOSE_WITHIN_S + ctx.give_up_s)
    outcome.observed.append(answer)
    expect_counted(ctx, before, batch, outcome)
    outcome.require(answer == "close_notify", f"the server answered close_notify with {answer}")


def _close_notify(sock: ssl.SSLSocket, timeout_s: float) -> str:
    """Sends close_notify and says how the server answered: its close_notify, or not."""
    sock.settimeout(timeout_s)
    try:
        sock.unwrap().close()
        return "close_notify"
    except TimeoutError:
        return f"no close_notify within {timeout_s:g} s"
    except (ssl.SSLError, OSError) as error:
        return f"no close_notify ({error})"
    finally:
        sock.close()


def syslog_tls_bad_length(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Good frames, then a bad MSG-LEN (`frame`) in the same record: the good ones counted
    exactly, the bad one never; the connection SHOULD be closed; others are served."""
    frame = params["frame"]
    batch = messages(ctx, 3, "before")
    [bad] = messages(ctx, 1, f"bad-{frame}")
    before = ctx.syslog_counters()
    with connect(ctx) as sock:
        sock.sendall(b"".join(octet_frame(m) for m in batch) + BAD_LENGTHS[frame](bad))
        _judge_count(ctx, before[0] + len(batch), frame, outcome)
        _, ending = read_to_end(sock, CLOSE_WITHIN_S + ctx.give_up_s)
        outcome.observed.append(ending)
        if ending.startswith("the connection still open"):
            outcome.warn(f"after a bad MSG-LEN ({frame}) {ending}")
        # Another connection, the broken one perhaps still open: it must be served.
        counted = ctx.syslog_counters()
        [other] = messages(ctx, 1, "other")
        with connect(ctx) as second:
            second.sendall(octet_frame(other))
            expect_counted(ctx, counted, [other], outcome)


def _judge_count(ctx: VerifyContext, wanted: int, frame: str, outcome: Outcome) -> None:
    wait_for(lambda: ctx.syslog_counters()[0] >= wanted, ctx.give_up_s)
    time.sleep(SETTLE_S)
    received = ctx.syslog_counters()[0]
    if received < wanted:
        outcome.fail(f"{wanted - received} of the messages before the bad MSG-LEN not counted")
    elif received > wanted:
        counted = f"the frame with a bad MSG-LEN ({frame}) was counted"
        if frame in LENIENT_WARNS:
            outcome.warn(counted)
        else:
            outcome.fail(counted)


def syslog_tls_plaintext(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A plain octet-counted message where a ClientHello was due: never counted; at most an
    alert, then a close."""
    [message] = messages(ctx, 1, "plaintext")
    before = ctx.syslog_counters()
    address = ("127.0.0.1", ctx.syslog_tls_port)
    with socket.create_connection(address, timeout=ctx.timeout_s) as sock:
        sock.sendall(octet_frame(message))
        received, closed = read_plain(sock, CLOSE_WITHIN_S + ctx.give_up_s)
    what = describe_plain(received)
    outcome.observed.append(f"{what}, {'closed' if closed else 'kept open'}")
    if what != "nothing" and not what.startswith("alert"):
        outcome.fail(f"plaintext on the syslog TLS port got {what}")
    outcome.require(closed, "the server did not close the connection after plaintext")
    time.sleep(SETTLE_S)
    grown = ctx.syslog_counters()[0] - before[0]
    outcome.require(grown == 0, f"a plaintext message on the TLS port was counted ({grown})")


def syslog_tls_truncated_hello(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Half a ClientHello: another client's messages are counted meanwhile, and the
    client's FIN gets the connection closed."""

    def serve_other() -> bool:
        # Served if the handshake is; the count, checked here, fails on its own words.
        before = ctx.syslog_counters()
        batch = messages(ctx, 1, "beside-a-hung-hello")
        with connect(ctx) as other:
            other.sendall(octet_frame(batch[0]))
            expect_counted(ctx, before, batch, outcome)
        return True

    truncated_hello(ctx, ctx.syslog_tls_port, serve_other, outcome)


CHECKS = {
    "syslog_tls_messages": syslog_tls_messages,
    "syslog_tls_incomplete": syslog_tls_incomplete,
    "syslog_tls_close_notify": syslog_tls_close_notify,
    "syslog_tls_bad_length": syslog_tls_bad_length,
    "syslog_tls_plaintext": syslog_tls_plaintext,
    "syslog_tls_truncated_hello": syslog_tls_truncated_hello,
}
