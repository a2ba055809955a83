"""Syslog listener checks (spec §7): TCP framings, a split message, UDP, counting."""

import socket
import time

from serverlab.base.waiting import wait_for
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

SETTLE_S = 0.3  # after the count is reached, how long extra counts may still show up


def messages(ctx: VerifyContext, count: int, label: str) -> list[bytes]:
    return [
        f"<14>1 2026-01-01T00:00:00Z verify serverlab - - - seq={n} {ctx.run_tag} {label}".encode()
        for n in range(1, count + 1)
    ]


def octet_frame(message: bytes) -> bytes:
    return str(len(message)).encode() + b" " + message


def newline_frame(message: bytes) -> bytes:
    return message + b"\n"


def framed(framing: str, batch: list[bytes]) -> bytes:
    """The TCP byte stream for `batch`; "mixed" alternates framings and adds empty lines."""
    if framing == "octet":
        return b"".join(octet_frame(m) for m in batch)
    if framing == "newline":
        return b"".join(newline_frame(m) for m in batch)
    parts = [octet_frame(m) if n % 2 else newline_frame(m) + b"\n" for n, m in enumerate(batch)]
    return b"".join(parts)


def syslog_tcp(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Messages over one TCP connection, counted exactly once each."""
    framing = params.get("framing", "newline")
    batch = messages(ctx, params.get("messages", 10), framing)
    payload = framed(framing, batch)
    before = ctx.syslog_counters()
    with socket.create_connection(("127.0.0.1", ctx.server.syslog_port), timeout=5) as sock:
        if not params.get("split"):
            sock.sendall(payload)
        else:
            split_at = len(payload) // 2 + 1
            # One message cut in two TCP segments: the receiver must reassemble it.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(payload[:split_at])
            time.sleep(0.2)
            sock.sendall(payload[split_at:])
        expect_counted(ctx, before, batch, outcome)


def syslog_udp(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """One message per datagram; a trailing newline is not part of the message."""
    batch = messages(ctx, params.get("messages", 10), "udp")
    before = ctx.syslog_counters()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for number, message in enumerate(batch):
            datagram = newline_frame(message) if number % 2 else message
            sock.sendto(datagram, ("127.0.0.1", ctx.server.syslog_port))
            time.sleep(0.002)  # loopback UDP drops bursts into a small receive buffer
    expect_counted(ctx, before, batch, outcome)


def syslog_incomplete(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A message cut short by the connection's close is not counted."""
    before = ctx.syslog_counters()
    complete = messages(ctx, 1, "complete")
    port = ctx.server.syslog_port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"200 <14>1 - verify serverlab - - - cut short")
    time.sleep(0.1)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(newline_frame(complete[0]))
        expect_counted(ctx, before, complete, outcome)


def expect_counted(ctx: VerifyContext, before, batch: list[bytes], outcome: Outcome) -> None:
    """The counters grow by exactly the batch: its messages and (if known) their bytes."""
    wanted_count = before[0] + len(batch)
    wait_for(lambda: ctx.syslog_counters()[0] >= wanted_count, ctx.give_up_s)
    time.sleep(SETTLE_S)
    received, size = ctx.syslog_counters()
    outcome.require(
        received == wanted_count,
        f"syslog received grew by {received - before[0]}, expected {len(batch)}",
    )
    if size is not None and before[1] is not None:
        wanted_bytes = sum(map(len, batch))
        outcome.require(
            size - before[1] == wanted_bytes,
            f"syslog bytes grew by {size - before[1]}, expected {wanted_bytes}",
        )


CHECKS = {
    "syslog_tcp": syslog_tcp,
    "syslog_udp": syslog_udp,
    "syslog_incomplete": syslog_incomplete,
}
