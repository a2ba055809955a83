"""Syslog parsing checks (spec §7.1, part `syslog-parse`): crafted messages, each known to
parse or not, sent over TCP; the parse counters in /stats must grow by exactly what the
spec's rules make of them."""

import socket
import time

from serverlab.base.waiting import wait_for
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

SETTLE_S = 0.3  # after the count is reached, how long extra counts may still show up
COUNTERS = ("parsed", "malformed", "rfc3164", "sd_elements", "msg_bytes")
# Expected growth of each counter, per message kind; msg_bytes is given per message.
ZERO = dict.fromkeys(COUNTERS, 0)


def _counters(ctx: VerifyContext) -> dict[str, int] | None:
    syslog = ctx.stats().get("syslog", {})
    if syslog.get("mode") != "parse":
        return None
    return {name: syslog.get(name) for name in ("received", *COUNTERS)}


def syslog_parse(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Sends `messages`, newline-framed or octet-counted, and compares the counters' growth
    with `expect`. Each character U+0000-U+00FF of a message is one octet (latin-1), so that
    a case can spell a BOM or UTF-8 octet by octet."""
    batch = [m.encode("latin-1") for m in params["messages"]]
    before = _counters(ctx)
    if before is None:
        outcome.fail('/stats syslog.mode is not "parse" (verify starts syslog_mode=parse)')
        return
    framing = params.get("framing", "octet")
    if framing == "octet":
        payload = b"".join(str(len(m)).encode() + b" " + m for m in batch)
    else:
        payload = b"".join(m + b"\n" for m in batch)
    with socket.create_connection(("127.0.0.1", ctx.server.syslog_port), timeout=5) as sock:
        sock.sendall(payload)
        wanted = before["received"] + len(batch)
        wait_for(lambda: ctx.stats()["syslog"]["received"] >= wanted, ctx.give_up_s)
    time.sleep(SETTLE_S)
    after = _counters(ctx) or {}
    expect = {**ZERO, **params["expect"]}
    grown = {name: _grown(after.get(name), before[name]) for name in ("received", *COUNTERS)}
    outcome.require(grown["received"] == len(batch), f"received grew by {grown['received']}")
    for name in COUNTERS:
        outcome.require(
            grown[name] == expect[name],
            f"syslog.{name} grew by {grown[name]}, expected {expect[name]}",
        )


def _grown(after, before) -> int | str:
    if not isinstance(after, int) or not isinstance(before, int):
        return f"? (not integers: {before!r} then {after!r})"
    return after - before


CHECKS = {"syslog_parse": syslog_parse}
