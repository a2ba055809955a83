"""Subscribers that have gone away (spec §6): noticed in time, and never delivered to."""

from contextlib import contextmanager

from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.pushwire import clear_event, push_body, send_push, set_event
from serverlab.conformance.checks.ssewire import open_sse
from serverlab.conformance.checks.wswire import open_ws
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

# The /stats counters that hold a subscriber of each transport while it is open.
OPEN_COUNTS = {
    "longpoll": [("requests", "open_push")],
    "comet": [("requests", "open_push")],
    "sse": [("sse", "open")],
    "websocket": [("websocket", "subscribers"), ("websocket", "open")],
}


@contextmanager
def push_subscriber(ctx: VerifyContext, event: str, kind: str):
    with ctx.connect() as connection:
        send_push(connection, push_body(kind, [event], 30000 if kind == "longpoll" else None))
        if kind == "comet":
            connection.read_head()
        yield


@contextmanager
def sse_subscriber(ctx: VerifyContext, event: str, kind: str):
    with open_sse(ctx, [event], quiet_s=1.0, heartbeat_ms=300) as stream:
        stream.read(until=lambda message: message.opening)
        yield


@contextmanager
def websocket_subscriber(ctx: VerifyContext, event: str, kind: str):
    with open_ws(ctx, close_handshake=False) as connection:
        connection.send_json({"type": "subscribe", "events": [event]})
        connection.next_message(ctx.give_up_s, "the subscribed reply")
        yield  # leaving closes the socket: no close frame, as when a client dies


SUBSCRIBERS = {
    "longpoll": push_subscriber,
    "comet": push_subscriber,
    "sse": sse_subscriber,
    "websocket": websocket_subscriber,
}


def gone_subscriber(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A subscriber whose client closed its connection leaves the open counts within
    notice_s, and the emits after that count no delivery to it."""
    transport = params["transport"]
    counters = OPEN_COUNTS[transport]
    labels = ", ".join(f"{group}.{name}" for group, name in counters)
    event = ctx.event_name()

    def open_now() -> list[int]:
        stats = ctx.stats()
        return [stats[group][name] for group, name in counters]

    # A connection that the case before closed may not be noticed yet (spec §6 allows
    # notice_s): a baseline that counts it would take its leaving for this subscriber's.
    notice_s = params.get("notice_s", 2.0)
    wait_for(lambda: not any(open_now()), notice_s)
    before = open_now()
    with SUBSCRIBERS[transport](ctx, event, transport):
        counted = wait_for(
            lambda: all(n > b for n, b in zip(open_now(), before, strict=True)), ctx.give_up_s
        )
    if not outcome.require(counted, f"{labels} never counted the open {transport} subscriber"):
        return
    noticed = wait_for(
        lambda: all(n <= b for n, b in zip(open_now(), before, strict=True)), notice_s
    )
    outcome.require(
        noticed,
        f"{labels} still counted the {transport} subscriber {notice_s} s after its client closed",
    )
    check_no_delivery(ctx, event, params, outcome)


def check_no_delivery(ctx: VerifyContext, event: str, params: dict, outcome: Outcome) -> None:
    emits = params.get("emits", 3)
    set_event(ctx, event, params.get("interval_ms", 100), outcome)
    try:
        wait_for(lambda: ctx.stats()["events"][event]["emits"] >= emits, ctx.give_up_s + 2)
    finally:
        clear_event(ctx, event)
    deliveries = ctx.stats()["events"][event]["deliveries"]
    outcome.require(
        deliveries == 0, f"{deliveries} deliveries counted to a subscriber whose client had left"
    )


CHECKS = {"gone_subscriber": gone_subscriber}
