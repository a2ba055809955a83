"""When `sent` is taken (spec §6): immediately before the write that hands a delivery to the
kernel. 1,000 comet subscribers hold one event; per emit cycle, the last `sent` the server
stamped is compared with the last arrival its clients saw. A server that stamps a whole cycle
and flushes its sockets afterwards (a corked socket) claims a delay the clients never see.

An arrival is the kernel's receive stamp of the segment (SO_TIMESTAMPNS), not the moment this
process got round to reading it: on a busy machine the checker may be descheduled for a
second, and that is no fault of the server's.
"""

import json
import resource
import selectors
import socket
import statistics
import struct
import time
from dataclasses import dataclass

from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.pushwire import clear_event, push_body, set_event
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

# Linux's SO_TIMESTAMPNS (asm-generic/socket.h): each read carries the kernel's receive stamp
# of its latest segment as a struct timespec.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@qq")


@dataclass
class CycleSeen:
    """One emit cycle at the clients: deliveries, the latest `sent`, the latest arrival
    (Unix ms on the server's clock) and the cycle's `created`."""

    created: int
    count: int = 0
    last_sent: int = 0
    last_arrival: float = 0.0


def sent_stamps(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    count = params.get("subscribers", 1000)
    _allow_descriptors(count + 64)
    event = ctx.event_name()
    offset = _clock_offset_ms(ctx)
    open_before = ctx.stats()["requests"]["open_push"]
    sockets = [_subscribe(ctx, event) for _ in range(count)]
    try:
        held = wait_for(
            lambda: ctx.stats()["requests"]["open_push"] >= open_before + count, 20.0, 0.1
        )
        if not outcome.require(held, f"/stats never showed {count} open push requests"):
            return
        set_event(ctx, event, params.get("interval_ms", 500), outcome)
        try:
            seen = _read(sockets, params.get("read_s", 2.5), offset)
        finally:
            clear_event(ctx, event)
    finally:
        for sock in sockets:
            sock.close()
        _free_held_threads(ctx, outcome)
    judge(seen, count, params, outcome)


def _free_held_threads(ctx: VerifyContext, outcome: Outcome) -> None:
    """A thread-per-request server with fewer threads than the check's streams is left with
    every thread held by a stream whose client has gone (it notices only at its next write,
    and no emit comes): restarted here, as verify restarts a hung server, so that the cases
    after this one still say something about it."""
    if ctx.answers():
        return
    ctx.server.stop()
    ctx.server.start()
    outcome.observed.append("restarted: the check's streams held every request thread")


def judge(seen: dict[int, CycleSeen], count: int, params: dict, outcome: Outcome) -> None:
    """Fails when, over the complete cycles, the median time from the last `sent` to the last
    arrival exceeds `fail_ms` and is more than half of the whole delay the clients saw."""
    whole = [c for c in seen.values() if c.count == count]
    if not outcome.require(len(whole) >= 2, f"{len(whole)} cycle(s) reached all {count}"):
        return
    unstamped = statistics.median(c.last_arrival - c.last_sent for c in whole)
    measured = statistics.median(c.last_arrival - c.created for c in whole)
    claimed = statistics.median(c.last_sent - c.created for c in whole)
    observed = (
        f"last sent at created+{claimed:.0f} ms, last arrival at created+{measured:.0f} ms "
        f"(median of {len(whole)} cycles of {count} deliveries)"
    )
    outcome.observed.append(observed)
    if unstamped > params.get("fail_ms", 10) and unstamped > measured / 2:
        outcome.fail(
            f"{observed}: {unstamped:.0f} ms between the last stamp and the last arrival; "
            "`sent` must be taken immediately before the write that hands a delivery to the "
            "kernel"
        )


def _subscribe(ctx: VerifyContext, event: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", ctx.port), timeout=ctx.timeout_s)
    body = json.dumps(push_body("comet", [event], None)).encode()
    head = (
        f"POST /push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.sendall(head + body)
    sock.setblocking(False)
    return sock


def _read(sockets: list[socket.socket], read_s: float, offset_ms: float) -> dict[int, CycleSeen]:
    """Reads every stream for `read_s`, each delivery line stamped with the kernel's receive
    time of its read (on the server's clock)."""
    seen: dict[int, CycleSeen] = {}
    pending = {sock: b"" for sock in sockets}
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        end = time.monotonic() + read_s
        while (left := end - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                sock = key.fileobj
                data, arrived = _receive(sock)
                arrival = arrived + offset_ms
                if not data:
                    selector.unregister(sock)
                    continue
                *lines, pending[sock] = (pending[sock] + data).split(b"\n")
                for line in lines:
                    _note(seen, line, arrival)
    return seen


def _receive(sock: socket.socket) -> tuple[bytes, float]:
    """Bytes and the kernel's receive stamp of the latest of their segments, Unix ms; the
    time of this read when the kernel gave none."""
    data, ancillary, _flags, _address = sock.recvmsg(65536, socket.CMSG_SPACE(TIMESPEC.size))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanos = TIMESPEC.unpack(payload[: TIMESPEC.size])
            return data, seconds * 1000 + nanos / 1e6
    return data, time.time() * 1000


def _note(seen: dict[int, CycleSeen], line: bytes, arrival: float) -> None:
    """One line of a chunked comet stream: a delivery is noted, chunk sizes are skipped."""
    try:
        document = json.loads(line)
        event = document["response"]["event"]
        seq, sent, created = event["seq"], event["timings"]["sent"], event["timings"]["created"]
    except (ValueError, KeyError, TypeError):
        return
    cycle = seen.setdefault(seq, CycleSeen(created=created))
    cycle.count += 1
    cycle.last_sent = max(cycle.last_sent, sent)
    cycle.last_arrival = max(cycle.last_arrival, arrival)


def _clock_offset_ms(ctx: VerifyContext, tries: int = 5) -> float:
    """The server's clock minus this host's, from GET /timestamp (spec §4): the try with the
    shortest round trip; 0 when the offset is within that try's uncertainty (verify talks to
    127.0.0.1, so the clocks are one unless the server states a wrong time)."""
    best = None
    for _ in range(tries):
        before = time.time() * 1000
        answer = ctx.get(f"/timestamp?client={int(before)}").json()
        after = time.time() * 1000
        rtt, offset = after - before, answer["server"] - (before + after) / 2
        if best is None or rtt < best[0]:
            best = (rtt, offset)
    rtt, offset = best
    return 0.0 if abs(offset) <= rtt / 2 + 1 else offset


def _allow_descriptors(needed: int) -> None:
    """1,000 subscribers need more descriptors than a default soft limit of 1,024 leaves."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed + 256:
        top = hard if hard == resource.RLIM_INFINITY else min(hard, needed + 4096)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, top), hard))


CHECKS = {"sent_stamps": sent_stamps}
