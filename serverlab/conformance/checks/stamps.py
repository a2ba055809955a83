"""When `sent` is taken (spec §6): immediately before the write that hands a delivery to the
kernel. Comet subscribers of one event, as many as the server holds up to 1,000; per emit
cycle, the last `sent` the server stamped is compared with the last arrival its clients saw.
A server that stamps a whole cycle and flushes its sockets afterwards (a corked socket)
claims a delay the clients never see.

An arrival is the kernel's receive stamp of the segment (SO_TIMESTAMPNS), not the moment this
process got round to reading it: on a busy machine the checker may be descheduled for a
second, and that is no fault of the server's. But a stamp is exact only while the checker keeps
up: segments still queued when the next one arrives are merged into it, and the merged segment
carries the newest stamp (tcp_try_coalesce). So the checker reads at real-time priority where
it may, and a read that returns lines of several cycles stamps only the newest cycle's: the
older cycles' arrivals are not known, and such a cycle is left out of the judgement.
"""

import contextlib
import json
import os
import resource
import selectors
import socket
import statistics
import struct
import time
from dataclasses import dataclass, field

from serverlab.base import httpclient
from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.pushwire import clear_event, push_body, set_event
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

# Linux's SO_TIMESTAMPNS (asm-generic/socket.h): each read carries the kernel's receive stamp
# of its latest segment as a struct timespec.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@qq")
# How long the streams' emits go on after their clients left, for the server to drop them.
LET_GO_S = 10.0


@dataclass
class CycleSeen:
    """One emit cycle at the clients: deliveries, the latest `sent`, the latest arrival
    (Unix ms on the server's clock) and the cycle's `created`."""

    created: int
    count: int = 0
    last_sent: int = 0
    last_arrival: float = 0.0
    # Deliveries read together with a later cycle's: their arrival is not known.
    blurred: int = 0


@dataclass
class Hold:
    """The streams the check holds: as many as the server took, up to `wanted`; `stopped`
    says why it took no more ("" when it took them all)."""

    wanted: int
    streams: list[socket.socket] = field(default_factory=list)
    stopped: str = ""

    def describe(self) -> str:
        why = f": {self.stopped}" if self.stopped else ""
        return f"held {len(self.streams)} of {self.wanted} streams{why}"

    def release(self, count: int) -> None:
        for sock in self.streams[-count:]:
            sock.close()
        del self.streams[-count:]


def sent_stamps(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    hold = Hold(params.get("subscribers", 1000))
    _allow_descriptors(hold.wanted + 64)
    event = ctx.event_name()
    offset = _clock_offset_ms(ctx)
    open_before = ctx.stats()["requests"]["open_push"]
    # Emitting from the start: a thread-per-request server frees the thread of a stream whose
    # client left only when it next writes to it, and the ramp may have to let streams go.
    set_event(ctx, event, params.get("interval_ms", 500), outcome)
    try:
        if not _take_streams(ctx, event, hold, params, outcome):
            return
        held = wait_for(lambda: _open_push(ctx) >= open_before + len(hold.streams), 20.0, 0.1)
        if not outcome.require(held, f"/stats never showed the {len(hold.streams)} streams"):
            return
        since = time.time() * 1000 + offset
        seen = _read(hold.streams, params.get("read_s", 2.5), offset)
    finally:
        _let_go(ctx, event, hold, open_before, outcome)
    judge({seq: c for seq, c in seen.items() if c.created >= since}, hold, params, outcome)


def _take_streams(
    ctx: VerifyContext, event: str, hold: Hold, params: dict, outcome: Outcome
) -> bool:
    """Opens the streams; when the server took fewer than asked, lets a few of them go so
    that its control calls are served (a thread-per-request server has every thread held
    by a stream). False, with a failure, when too few are left to judge the stamps."""
    _ramp(ctx, event, hold, params.get("batch", 100))
    if hold.stopped:
        hold.release(max(2, len(hold.streams) // 20))
        if not outcome.require(
            wait_for(ctx.answers, 20.0, 0.2),
            f"{hold.describe()}; the server did not answer again after some were let go",
        ):
            return False
    least = params.get("min_subscribers", 100)
    return outcome.require(
        len(hold.streams) >= least, f"{hold.describe()}; the check needs at least {least}"
    )


def _ramp(ctx: VerifyContext, event: str, hold: Hold, batch: int) -> None:
    """Opens streams a batch at a time while the server answers each with its head and
    still serves a request besides them; stops at the first batch it does not."""
    while len(hold.streams) < hold.wanted:
        opened, headless = [], 0
        try:
            for _ in range(min(batch, hold.wanted - len(hold.streams))):
                opened.append(_subscribe(ctx, event))
        except OSError as error:
            hold.stopped = f"a new stream's connection failed ({error})"
        for sock, headed in _heads(opened, ctx.timeout_s):  # a head is due at once
            if headed:
                hold.streams.append(sock)
            else:
                sock.close()
                headless += 1
        if headless and not hold.stopped:
            hold.stopped = f"{headless} more got no 200 head within {ctx.timeout_s:g} s"
        elif not hold.stopped and not ctx.answers():
            hold.stopped = "with them held, it answered no other request"
        if hold.stopped:
            return


def _heads(sockets: list[socket.socket], wait_s: float) -> list[tuple[socket.socket, bool]]:
    """Each stream and whether its response head, `200`, came within `wait_s`. What came
    after the head is dropped: only cycles created after the ramp are judged."""
    heads = {sock: b"" for sock in sockets}
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        end = time.monotonic() + wait_s
        while selector.get_map() and (left := end - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                data = _recv_or_nothing(key.fileobj)
                heads[key.fileobj] += data if data else b"\0"  # a NUL marks the stream's end
                if not data or b"\r\n\r\n" in heads[key.fileobj]:
                    selector.unregister(key.fileobj)
    return [(sock, _is_200_head(head)) for sock, head in heads.items()]


def _recv_or_nothing(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _is_200_head(head: bytes) -> bool:
    status, ended, _rest = head.partition(b"\r\n\r\n")
    return bool(ended) and b"\0" not in status and status.split(b" ", 2)[1:2] == [b"200"]


def _open_push(ctx: VerifyContext) -> int:
    """`requests.open_push`, or -1 while the server does not answer /stats."""
    try:
        return ctx.stats()["requests"]["open_push"]
    except httpclient.HttpError:
        return -1


def _let_go(ctx: VerifyContext, event: str, hold: Hold, open_before: int, outcome: Outcome) -> None:
    """Closes the streams first, then clears the event once the server has dropped them,
    then makes sure the server still serves. A thread-per-request server frees a stream's
    thread only when a write to it fails, the second emit after the close (the kernel takes
    the first): clearing at once left up to every thread held, and later cases starved."""
    for sock in hold.streams:
        sock.close()
    wait_for(lambda: 0 <= _open_push(ctx) <= open_before, LET_GO_S, 0.2)
    cleared = wait_for(lambda: _cleared(ctx, event), 10.0, 0.2)
    if not cleared:
        outcome.notes.append("the event could not be cleared")
    _free_held_threads(ctx, outcome)


def _cleared(ctx: VerifyContext, event: str) -> bool:
    try:
        return clear_event(ctx, event).status == 200
    except httpclient.HttpError:
        return False


def _free_held_threads(ctx: VerifyContext, outcome: Outcome) -> None:
    """A thread-per-request server may be left with threads held by streams whose clients
    have gone (it notices only at its next write, and no emit comes after the clear):
    restarted here, as verify restarts a hung server, so that the cases after this one
    still say something about it."""
    if ctx.answers():
        return
    ctx.server.stop()
    ctx.server.start()
    outcome.notes.append("restarted: the check's streams held every request thread")


def judge(seen: dict[int, CycleSeen], hold: Hold, params: dict, outcome: Outcome) -> None:
    """Fails when, over the cycles created after the ramp that reached every held stream,
    the median time from the last `sent` to the last arrival exceeds `fail_ms` and is more
    than half of the whole delay the clients saw."""
    count = len(hold.streams)
    whole = [c for c in seen.values() if c.count == count and not c.blurred]
    blurred = sum(1 for c in seen.values() if c.blurred)
    if not outcome.require(
        len(whole) >= 2,
        f"{hold.describe()}; {len(whole)} cycle(s) reached all {count} with every arrival "
        f"stamped ({blurred} read behind a later cycle: the checker fell behind)",
    ):
        return
    unstamped = statistics.median(c.last_arrival - c.last_sent for c in whole)
    measured = statistics.median(c.last_arrival - c.created for c in whole)
    claimed = statistics.median(c.last_sent - c.created for c in whole)
    observed = (
        f"{hold.describe()}; last sent at created+{claimed:.0f} ms, last arrival at "
        f"created+{measured:.0f} ms (median of {len(whole)} cycles of {count} deliveries)"
    )
    outcome.notes.append(observed)
    if unstamped > params.get("fail_ms", 10) and unstamped > measured / 2:
        outcome.fail(
            f"{unstamped:.0f} ms between the last stamp and the last arrival; "
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
        with _real_time_priority():
            while (left := end - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    sock = key.fileobj
                    data, arrived = _receive(sock)
                    if not data:
                        selector.unregister(sock)
                        continue
                    *lines, pending[sock] = (pending[sock] + data).split(b"\n")
                    _note_read(seen, lines, arrived + offset_ms)
    return seen


@contextlib.contextmanager
def _real_time_priority():
    """SCHED_FIFO for this thread while it reads, where allowed (root): a checker that wakes
    on each segment keeps the kernel's stamps per segment on a busy machine. The reading
    loop sleeps in select between segments, and the kernel's real-time throttling bounds it."""
    try:
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        os.sched_setscheduler(0, before[0], before[1])


def _note_read(seen: dict[int, CycleSeen], lines: list[bytes], arrival: float) -> None:
    """The lines of one read: its stamp is the newest segment's, so it is the arrival of the
    newest cycle's lines only; lines of older cycles are counted as blurred."""
    deliveries = [d for d in map(_delivery, lines) if d]
    newest = max((seq for seq, _, _ in deliveries), default=None)
    for seq, sent, created in deliveries:
        cycle = seen.setdefault(seq, CycleSeen(created=created))
        cycle.count += 1
        cycle.last_sent = max(cycle.last_sent, sent)
        if seq == newest:
            cycle.last_arrival = max(cycle.last_arrival, arrival)
        else:
            cycle.blurred += 1


def _receive(sock: socket.socket) -> tuple[bytes, float]:
    """Bytes and the kernel's receive stamp of the latest of their segments, Unix ms; the
    time of this read when the kernel gave none."""
    data, ancillary, _flags, _address = sock.recvmsg(65536, socket.CMSG_SPACE(TIMESPEC.size))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanos = TIMESPEC.unpack(payload[: TIMESPEC.size])
            return data, seconds * 1000 + nanos / 1e6
    return data, time.time() * 1000


def _delivery(line: bytes) -> tuple[int, int, int] | None:
    """One line of a chunked comet stream: a delivery's (seq, sent, created); None for a chunk
    size or anything else."""
    try:
        document = json.loads(line)
        event = document["response"]["event"]
        return event["seq"], event["timings"]["sent"], event["timings"]["created"]
    except (ValueError, KeyError, TypeError):
        return None


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
