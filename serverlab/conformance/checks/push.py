"""Server push checks (spec §6): long poll, comet, fan-out, emitters, push counters."""

from concurrent.futures import ThreadPoolExecutor

from serverlab.base import httpclient
from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.pushwire import (
    check_delivery,
    check_longpoll_answer,
    check_places,
    check_timeout_answer,
    clear_event,
    longpoll,
    push_body,
    send_push,
    set_event,
)
from serverlab.conformance.checks.stream import read_comet
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome


def longpoll_timeout(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """No event comes: the timeout answer arrives at duration_ms, not before, not much later."""
    duration_ms = params.get("duration_ms", 400)
    with ctx.connect() as connection:
        response, body = longpoll(ctx, [ctx.event_name()], duration_ms, connection)
        document = check_longpoll_answer(response, outcome, "timeout answer")
        if document is None:
            return
        check_timeout_answer(document, response.body, body, outcome, "timeout answer")
        elapsed_ms = response.elapsed_s * 1000
        outcome.require(
            elapsed_ms >= duration_ms - 2,
            f"answered after {elapsed_ms:.0f} ms, before duration_ms {duration_ms}",
        )
        late_ms = elapsed_ms - duration_ms
        if late_ms > params.get("late_fail_ms", 1500):
            outcome.fail(f"answered {late_ms:.0f} ms after duration_ms")
        elif late_ms > params.get("late_warn_ms", 250):
            outcome.warn(f"answered {late_ms:.0f} ms after duration_ms")
        try:
            connection.request("GET", ctx.probe_target)
        except httpclient.HttpError as error:
            outcome.fail(f"the connection did not stay open after the timeout answer: {error}")


def longpoll_event(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A long poll answered by an emit, with every field of the delivery shape."""
    event = ctx.event_name()
    set_event(ctx, event, params.get("interval_ms", 300), outcome)
    try:
        response, body = longpoll(ctx, [event], params.get("duration_ms", 5000))
    finally:
        clear_event(ctx, event)
    document = check_longpoll_answer(response, outcome, "delivery")
    if document is None or not check_delivery(
        document, response.body, body, event, outcome, "delivery"
    ):
        return
    connections = document["response"]["event"]["connections"]
    outcome.require(
        connections == {"total": 1, "place": 1},
        f"the only subscriber got connections {connections}, expected 1 of 1",
    )


def comet_stream(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A comet stream: ndjson, chunked, events in order (seq +1), then the timeout line."""
    event = ctx.event_name()
    duration_ms = params.get("duration_ms", 1000)
    set_event(ctx, event, params.get("interval_ms", 150), outcome)
    body = push_body("comet", [event], duration_ms)
    try:
        with ctx.connect() as connection:
            send_push(connection, body)
            stream = read_comet(connection, outcome, duration_ms / 1000 + ctx.give_up_s)
    finally:
        clear_event(ctx, event)
    if stream is None:
        return
    *deliveries, last = stream.documents or [None]
    for number, (document, raw) in enumerate(zip(deliveries, stream.lines, strict=False), 1):
        if not check_delivery(document, raw, body, event, outcome, f"line {number}"):
            return
    check_consecutive([d["response"]["event"]["seq"] for d in deliveries], outcome)
    outcome.require(
        len(deliveries) >= params.get("min_events", 3),
        f"{len(deliveries)} events before the timeout line, expected at least "
        f"{params.get('min_events', 3)}",
    )
    if last is not None and outcome.require(
        b"timeout" in stream.lines[-1], "the last line is not the timeout answer"
    ):
        check_timeout_answer(last, stream.lines[-1], body, outcome, "last line")


def check_consecutive(seqs: list[int], outcome: Outcome) -> None:
    for earlier, later in zip(seqs, seqs[1:], strict=False):
        if later != earlier + 1:
            outcome.fail(f"seq went {earlier} -> {later} (sequence {seqs})")
            return


def fanout(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """N concurrent long polls all get the same emit, with distinct places 1..N."""
    count = params.get("subscribers", 50)
    event = ctx.event_name()
    before = ctx.stats()
    open_before = before["requests"]["open_push"]
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [
            pool.submit(longpoll, ctx, [event], params.get("duration_ms", 15000))
            for _ in range(count)
        ]
        subscribed = wait_for(
            lambda: ctx.stats()["requests"]["open_push"] >= open_before + count, 10.0, 0.1
        )
        if subscribed:
            set_event(ctx, event, params.get("interval_ms", 200), outcome)
        try:
            answers = [future.result() for future in futures]
        except httpclient.HttpError as error:
            outcome.abort(f"a subscriber got no answer: {error}")
        finally:
            clear_event(ctx, event)
    if not outcome.require(subscribed, f"/stats never showed {count} open push requests"):
        return
    check_fanout(answers, event, before, outcome)


def check_fanout(answers, event: str, stats: dict, outcome: Outcome) -> None:
    documents = []
    for number, (response, body) in enumerate(answers, 1):
        document = check_longpoll_answer(response, outcome, f"subscriber {number}")
        if document is None or not check_delivery(
            document, response.body, body, event, outcome, f"subscriber {number}"
        ):
            return
        documents.append(document["response"]["event"])
    distinct = {(e["seq"], e["timings"]["created"]) for e in documents}
    outcome.require(
        len(distinct) == 1, f"subscribers saw {len(distinct)} different (seq, created) pairs"
    )
    check_places(documents, stats, outcome)


def seq_continues(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Clearing and setting an event again does not reset its seq."""
    event = ctx.event_name()
    seqs = []
    for round_number in (1, 2):
        set_event(ctx, event, params.get("interval_ms", 100), outcome)
        try:
            response, body = longpoll(ctx, [event], 5000)
        finally:
            clear_event(ctx, event)
        document = check_longpoll_answer(response, outcome, f"round {round_number}")
        if document is None or not check_delivery(
            document, response.body, body, event, outcome, f"round {round_number}"
        ):
            return
        seqs.append(document["response"]["event"]["seq"])
    outcome.require(seqs[1] > seqs[0], f"seq {seqs[0]} then {seqs[1]} after clear and set")


def emitter_replace(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Setting an active event again replaces its timer: the new interval takes effect."""
    event = ctx.event_name()
    try:
        first = set_event(ctx, event, 3_600_000, outcome)
        second = set_event(ctx, event, params.get("interval_ms", 100), outcome)
        outcome.require(first.get("replaced") is False, f"first set answered {first}")
        outcome.require(second.get("replaced") is True, f"second set answered {second}")
        response, body = longpoll(ctx, [event], params.get("duration_ms", 3000))
    finally:
        clear_event(ctx, event)
    document = check_longpoll_answer(response, outcome, "after replace")
    if document is not None and "timeout" in response.body.decode("utf-8", "replace"):
        outcome.fail("the long poll timed out: the replacing interval did not take effect")
    elif document is not None:
        check_delivery(document, response.body, body, event, outcome, "after replace")


def emitter_clear_stops(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """After a clear no more emits come: a long poll then ends by its timeout."""
    event = ctx.event_name()
    set_event(ctx, event, params.get("interval_ms", 100), outcome)
    try:
        longpoll(ctx, [event], 5000)
    finally:
        cleared = clear_event(ctx, event)
    outcome.require(cleared.status == 200, f"clear answered {cleared.status}")
    response, body = longpoll(ctx, [event], params.get("duration_ms", 600))
    document = check_longpoll_answer(response, outcome, "after clear")
    if document is not None:
        check_timeout_answer(document, response.body, body, outcome, "after clear")


def push_stats(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """/stats counts push answers, timeouts, emits and deliveries; open_push returns to 0."""
    event = ctx.event_name()
    before = ctx.stats()
    set_event(ctx, event, params.get("interval_ms", 100), outcome)
    try:
        for _ in range(3):
            longpoll(ctx, [event], 5000)
        longpoll(ctx, [ctx.event_name("-idle")], params.get("timeout_ms", 200))
        open_during = comet_then_leave(ctx, event, outcome)
        returned = wait_for(
            lambda: ctx.stats()["requests"]["open_push"] == before["requests"]["open_push"], 5.0
        )
    finally:
        clear_event(ctx, event)
    after = ctx.stats()
    outcome.require(
        open_during == before["requests"]["open_push"] + 1,
        f"requests.open_push was {open_during} with one comet stream open",
    )
    outcome.require(
        returned, "requests.open_push did not return to its value before the comet client left"
    )
    check_push_counters(before, after, event, outcome)


def comet_then_leave(ctx: VerifyContext, event: str, outcome: Outcome) -> int:
    """Opens a comet stream, reads one line, reads open_push, and leaves abruptly."""
    with ctx.connect() as connection:
        send_push(connection, push_body("comet", [event], None))
        head = connection.read_head()
        outcome.require(head.status == 200, f"comet answered {head.status}")
        next(connection.iter_body(ctx.give_up_s), None)
        return ctx.stats()["requests"]["open_push"]


def check_push_counters(before: dict, after: dict, event: str, outcome: Outcome) -> None:
    def grown(group: str, name: str) -> int:
        return after[group][name] - before[group][name]

    outcome.require(
        grown("responses", "push") >= 4,
        f"responses.push grew by {grown('responses', 'push')}, expected >= 4",
    )
    outcome.require(
        grown("responses", "timeouts") == 1,
        f"responses.timeouts grew by {grown('responses', 'timeouts')}, expected 1",
    )
    counters = after["events"].get(event)
    if not outcome.require(isinstance(counters, dict), f"events has no entry for {event}"):
        return
    outcome.require(counters.get("emits", 0) >= 3, f"emits {counters.get('emits')} < 3")
    outcome.require(
        counters.get("last_seq") == counters.get("emits"),
        f"last_seq {counters.get('last_seq')} != emits {counters.get('emits')} "
        "for an event set once",
    )
    outcome.require(
        counters.get("deliveries", 0) >= 4, f"deliveries {counters.get('deliveries')} < 4"
    )
    outcome.require(counters.get("active") is False, "a cleared event is still active")


CHECKS = {
    "longpoll_timeout": longpoll_timeout,
    "longpoll_event": longpoll_event,
    "comet_stream": comet_stream,
    "fanout": fanout,
    "seq_continues": seq_continues,
    "emitter_replace": emitter_replace,
    "emitter_clear_stops": emitter_clear_stops,
    "push_stats": push_stats,
}
