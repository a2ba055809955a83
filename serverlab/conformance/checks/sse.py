"""Server-Sent Events checks (spec §10): framing, ids, heartbeats, replay and gaps."""

import json
import time
from dataclasses import dataclass, field

from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.push import check_consecutive
from serverlab.conformance.checks.pushwire import (
    check_delivery,
    check_timeout_answer,
    clear_event,
    set_event,
)
from serverlab.conformance.checks.ssewire import (
    SseMessage,
    check_sse_head,
    open_sse,
    parse_position,
    position,
    sse_request,
)
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.jsonshape import check_types, lookup
from serverlab.conformance.outcome import Outcome

REPLAY_BUFFER = 64
GAP_TYPES = {"gap.name": "str", "gap.after": "int", "gap.next": "int"}


@dataclass
class Walked:
    """A stream's messages sorted by what §10 says they are."""

    replayed: dict[str, list[int]] = field(default_factory=dict)
    live: dict[str, list[int]] = field(default_factory=dict)
    gaps: list[dict] = field(default_factory=list)
    opening: str | None = None  # the opening message's id
    timeout: bool = False


def walk(messages: list[SseMessage], names, seqs: dict, request: dict, outcome: Outcome):
    """Checks every message and its id against the position it moves; None on a failure."""
    seqs, walked = dict(seqs), Walked()
    for number, message in enumerate(messages, 1):
        where = f"SSE message {number}"
        if message.opening:
            # httpx-sse repeats the last id for a heartbeat's empty line: only the first counts.
            if walked.opening is None:
                walked.opening = message.id
                want = position(names, seqs)
                outcome.require(message.id == want, f"opening id {message.id!r}, expected {want!r}")
            continue
        if not outcome.require(not walked.timeout, f"{where} came after the timeout message"):
            return None
        try:
            document = json.loads(message.data)
        except json.JSONDecodeError:
            outcome.fail(f"{where}: data is not one JSON document: {message.data[:80]!r}")
            return None
        if message.event == "timeout":
            walked.timeout = True
            check_timeout_answer(document, message.data.encode(), request, outcome, where)
            continue
        if message.event == "gap":
            if not take_gap(document, names, seqs, walked, outcome, where):
                return None
        elif message.event == "message":
            if not take_event(document, message, names, seqs, request, walked, outcome, where):
                return None
        else:
            outcome.fail(f"{where}: unknown event type {message.event!r}")
            return None
        want = position(names, seqs)
        if not outcome.require(
            message.id == want, f"{where}: id {message.id!r}, expected {want!r}"
        ):
            return None
    return walked


def take_gap(document, names, seqs, walked: Walked, outcome: Outcome, where: str) -> bool:
    if not check_types(document, GAP_TYPES, outcome, where):
        return False
    gap = document["gap"]
    if not outcome.require(gap["name"] in names, f"{where}: a gap for {gap['name']!r}"):
        return False
    outcome.require(walked.opening is None, f"{where}: a gap message after the opening message")
    seqs[gap["name"]] = gap["next"] - 1
    walked.gaps.append(gap)
    return True


def take_event(document, message, names, seqs, request, walked, outcome, where) -> bool:
    name = lookup(document, "response.event.name")
    if not outcome.require(name in names, f"{where}: an event {name!r} this stream did not ask"):
        return False
    if not check_delivery(document, message.data.encode(), request, name, outcome, where):
        return False
    event = document["response"]["event"]
    if walked.opening is None:
        outcome.require(
            event.get("replayed") is True,
            f"{where}: before the opening message but not replayed: true",
        )
        outcome.require(
            event["connections"] == {"total": 1, "place": 1},
            f"{where}: a replayed event has connections {event['connections']}, expected 1 of 1",
        )
        walked.replayed.setdefault(name, []).append(event["seq"])
    else:
        outcome.require("replayed" not in event, f"{where}: a live delivery has 'replayed'")
        walked.live.setdefault(name, []).append(event["seq"])
    seqs[name] = event["seq"]
    return not outcome.failures


def sse_stream(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A stream of two events: head, opening id, one id/data message per delivery with the
    composite id, seq +1 per event, the timeout message, and the /stats counters."""
    names = [ctx.event_name(), ctx.event_name("2")]
    duration_ms = params.get("duration_ms", 1200)
    query = {"heartbeat_ms": 0, "duration_ms": duration_ms}
    before = ctx.stats()
    with open_sse(ctx, names, quiet_s=duration_ms / 1000, **query) as stream:
        if not check_sse_head(stream, outcome):
            return
        stream.read(until=lambda message: message.opening)
        try:
            for name, interval_ms in zip(
                names, params.get("intervals_ms", [100, 170]), strict=True
            ):
                set_event(ctx, name, interval_ms, outcome)
            stream.read()
        finally:
            for name in names:
                clear_event(ctx, name)
    walked = walk(stream.messages, names, {}, sse_request(names, **query), outcome)
    if walked is None:
        return
    outcome.require(walked.opening is not None, "no opening message (id without data)")
    outcome.require(
        stream.ended and walked.timeout, "the stream did not end with the timeout message"
    )
    for name in names:
        seqs = walked.live.get(name, [])
        check_consecutive([0, *seqs], outcome)
        outcome.require(
            len(seqs) >= params.get("min_events", 3), f"{len(seqs)} events of {name} arrived"
        )
    check_sse_counters(ctx, before, walked, names, outcome)


def check_sse_counters(ctx, before: dict, walked: Walked, names, outcome: Outcome) -> None:
    closed = wait_for(lambda: ctx.stats()["sse"]["open"] == before["sse"]["open"], ctx.give_up_s)
    outcome.require(closed, "sse.open did not return to its value before the stream")
    after = ctx.stats()
    for key, grown in (("total", 1), ("timeouts", 1)):
        delta = after["sse"][key] - before["sse"][key]
        outcome.require(delta == grown, f"sse.{key} grew by {delta}, expected {grown}")
    got = sum(len(seqs) for seqs in walked.live.values())
    delta = after["sse"]["deliveries"] - before["sse"]["deliveries"]
    outcome.require(delta == got, f"sse.deliveries grew by {delta}, {got} events arrived")
    for name in names:
        counted = after["events"][name]["deliveries"]
        arrived = len(walked.live.get(name, []))
        outcome.require(counted == arrived, f"{name}: {counted} deliveries, {arrived} arrived")


def sse_heartbeat(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A quiet stream gets one comment line every heartbeat_ms, and no event for them."""
    heartbeat_ms = params.get("heartbeat_ms", 300)
    window_ms = params.get("window_ms", 2000)
    before = ctx.stats()["sse"]["heartbeats"]
    query = {"heartbeat_ms": heartbeat_ms, "duration_ms": window_ms}
    with open_sse(ctx, [ctx.event_name()], quiet_s=heartbeat_ms / 1000, **query) as stream:
        started = time.monotonic()
        if not check_sse_head(stream, outcome):
            return
        stream.read()
    beats = stream.observed.comments
    dispatched = [m for m in stream.data_messages() if m.event != "timeout"]
    outcome.require(not dispatched, f"a quiet stream dispatched {len(dispatched)} events")
    times = [started, *beats, stream.messages[-1].at if stream.ended else time.monotonic()]
    longest_ms = (
        max(later - earlier for earlier, later in zip(times, times[1:], strict=False)) * 1000
    )
    late_ms = longest_ms - heartbeat_ms
    if late_ms > params.get("late_fail_ms", 1000):
        outcome.fail(f"{longest_ms:.0f} ms without a heartbeat (heartbeat_ms {heartbeat_ms})")
    elif late_ms > params.get("late_warn_ms", 250):
        outcome.warn(f"{longest_ms:.0f} ms without a heartbeat (heartbeat_ms {heartbeat_ms})")
    most = window_ms // heartbeat_ms + 1
    outcome.require(
        len(beats) <= most, f"{len(beats)} heartbeats in {window_ms} ms, at most {most}"
    )
    counted = ctx.stats()["sse"]["heartbeats"] - before
    outcome.require(counted == len(beats), f"sse.heartbeats grew by {counted}, {len(beats)} came")


def sse_replay(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Reconnecting with the last id: the missed events are replayed, then live ones follow,
    every seq exactly once (one event: a plain id; two: the composite id)."""
    names = [ctx.event_name(), ctx.event_name("2")][: params.get("events", 1)]
    interval_ms = params.get("interval_ms", 100)
    query = {"heartbeat_ms": 0, "duration_ms": params.get("duration_ms", 600)}
    for name in names:
        set_event(ctx, name, interval_ms, outcome)
    try:
        last_id = first_stream(ctx, names, interval_ms, outcome)
        if last_id is None:
            return
        time.sleep(params.get("away_ms", 400) / 1000)
        replayed_before = ctx.stats()["sse"]["replayed"]
        with open_sse(ctx, names, last_id, quiet_s=interval_ms / 1000, **query) as stream:
            if not check_sse_head(stream, outcome):
                return
            stream.read()
    finally:
        for name in names:
            clear_event(ctx, name)
    seqs = parse_position(last_id, names)
    if not outcome.require(seqs is not None, f"the first stream's last id {last_id!r}"):
        return
    walked = walk(stream.messages, names, seqs, sse_request(names, **query), outcome)
    if walked is None:
        return
    check_resumed(walked, names, seqs, outcome)
    counted = ctx.stats()["sse"]["replayed"] - replayed_before
    replayed = sum(len(s) for s in walked.replayed.values())
    outcome.require(counted == replayed, f"sse.replayed grew by {counted}, {replayed} came")


def first_stream(ctx: VerifyContext, names, interval_ms: int, outcome: Outcome) -> str | None:
    """Reads until every event was delivered once; the id to resume from."""
    with open_sse(ctx, names, quiet_s=interval_ms / 1000, heartbeat_ms=0) as stream:
        if not check_sse_head(stream, outcome):
            return None
        events = {}

        def all_seen(message: SseMessage) -> bool:
            if not message.opening:
                events[lookup(json.loads(message.data), "response.event.name")] = message.id
            return set(events) >= set(names)

        stream.read(until=all_seen)
    return stream.messages[-1].id


def check_resumed(walked: Walked, names, seqs: dict, outcome: Outcome) -> None:
    outcome.require(not walked.gaps, f"gap messages {walked.gaps} for a short absence")
    outcome.require(walked.opening is not None, "no opening message after the replay")
    for name in names:
        replayed, live = walked.replayed.get(name, []), walked.live.get(name, [])
        outcome.require(replayed, f"nothing of {name} was replayed after its seq {seqs[name]}")
        check_consecutive([seqs[name], *replayed, *live], outcome)
        outcome.require(live, f"no live event of {name} after the replay")


def sse_gap(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """An id older than the replay buffer gets a gap message and exactly the newest 64; an
    id from another run of the server (past last_seq) gets a gap and nothing replayed."""
    name = ctx.event_name()
    interval_ms = params.get("interval_ms", 10)
    set_event(ctx, name, interval_ms, outcome)
    try:
        enough = REPLAY_BUFFER + 20
        wait_for(lambda: last_seq(ctx, name) >= enough, enough * interval_ms / 100 + ctx.give_up_s)
    finally:
        clear_event(ctx, name)
    newest = last_seq(ctx, name)
    if not outcome.require(newest >= enough, f"only {newest} emits of {name} came"):
        return
    before = ctx.stats()["sse"]
    for after, next_seq in ((5, newest - REPLAY_BUFFER + 1), (newest + 1000, newest + 1)):
        walked = resume_at(ctx, name, after, outcome)
        if walked is None:
            return
        check_gap(walked, name, after, next_seq, newest, outcome)
    counters = ctx.stats()["sse"]
    for key, grown in (("gaps", 2), ("replayed", REPLAY_BUFFER)):
        delta = counters[key] - before[key]
        outcome.require(delta == grown, f"sse.{key} grew by {delta}, expected {grown}")


def last_seq(ctx: VerifyContext, name: str) -> int:
    return ctx.stats()["events"].get(name, {}).get("last_seq", 0)


def resume_at(ctx: VerifyContext, name: str, seq: int, outcome: Outcome) -> Walked | None:
    query = {"heartbeat_ms": 0, "duration_ms": 300}
    with open_sse(ctx, [name], f"{name}:{seq}", quiet_s=0.3, **query) as stream:
        if not check_sse_head(stream, outcome):
            return None
        stream.read()
    return walk(stream.messages, [name], {name: seq}, sse_request([name], **query), outcome)


def check_gap(walked: Walked, name: str, after: int, next_seq: int, newest: int, outcome) -> None:
    wanted = {"name": name, "after": after, "next": next_seq}
    outcome.require(walked.gaps == [wanted], f"gap messages {walked.gaps}, expected [{wanted}]")
    replayed = walked.replayed.get(name, [])
    outcome.require(
        replayed == list(range(next_seq, newest + 1)),
        f"replayed seqs {replayed[:3]}...{replayed[-3:]} ({len(replayed)}), expected "
        f"{next_seq}..{newest}",
    )
    outcome.require(walked.opening == f"{name}:{newest}", f"opening id {walked.opening!r}")


CHECKS = {
    "sse_stream": sse_stream,
    "sse_heartbeat": sse_heartbeat,
    "sse_replay": sse_replay,
    "sse_gap": sse_gap,
}
