"""WebSocket checks (spec §11): handshake, echo, subscribe, publish, ping, close, and the
close codes of bad frames."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

from websockets.frames import Frame, Opcode

from serverlab.base.waiting import wait_for
from serverlab.conformance.checks.push import check_consecutive
from serverlab.conformance.checks.pushwire import (
    check_delivery,
    check_places,
    clear_event,
    longpoll,
    set_event,
)
from serverlab.conformance.checks.receive import time_left
from serverlab.conformance.checks.wswire import (
    open_ws,
    receive_json,
    send_json,
    subscribe,
)
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

MAX_MESSAGE = 65536


def echo_of_size(size: int) -> str:
    """An echo message of exactly `size` bytes."""
    bare = len(json.dumps({"type": "echo", "data": ""}))
    return json.dumps({"type": "echo", "data": "x" * (size - bare)})


def at_rest(ctx: VerifyContext) -> dict:
    """/stats' websocket group once verify's earlier connections are counted closed. A server may
    count a close a moment after its FIN (Netty runs channelInactive as a later task of
    the connection's event loop, while another loop answers /stats): read at once, a busy
    server's count still holds the previous case's connection, and can never come back to
    it. verify is the server's only client, so at rest the count is 0, or what a server
    leaks (then the value it holds)."""
    wait_for(lambda: ctx.stats()["websocket"]["open"] == 0, ctx.give_up_s)
    return ctx.stats()["websocket"]


def check_101(connection, outcome: Outcome) -> None:
    headers = connection.response.headers
    outcome.require(connection.response.status_code == 101, "the upgrade was not answered 101")
    for name in ("Sec-WebSocket-Extensions", "Sec-WebSocket-Protocol"):
        outcome.require(name not in headers, f"the 101 selects {name}: {headers.get(name)!r}")


def echo(connection, parts: list[str], ctx: VerifyContext, outcome: Outcome, what: str) -> None:
    """Sends one echo message (in fragments if several parts) and checks the reply."""
    connection.send(parts[0] if len(parts) == 1 else iter(parts))
    wanted = {"type": "echo", "data": json.loads("".join(parts))["data"]}
    reply = receive_json(connection, ctx.give_up_s, f"the echo of {what}")
    outcome.require(reply == wanted, f"{what}: echo reply {str(reply)[:120]}")


def ws_echo(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Echo of a small message, of one of exactly 65,536 bytes, and of a fragmented one;
    /stats counts the connection and the echoes."""
    before = at_rest(ctx)
    with open_ws(ctx) as connection:
        check_101(connection, outcome)
        small = json.dumps({"type": "echo", "data": {"n": 1, "é": [True]}})
        echo(connection, [small], ctx, outcome, "a small message")
        echo(connection, [echo_of_size(MAX_MESSAGE)], ctx, outcome, "a 65,536-byte message")
        text = json.dumps({"type": "echo", "data": "fragments"})
        echo(connection, [text[:5], text[5:12], text[12:]], ctx, outcome, "three fragments")
        during = ctx.stats()["websocket"]
    outcome.require(during["open"] == before["open"] + 1, "websocket.open did not count it")
    closed = wait_for(lambda: ctx.stats()["websocket"]["open"] == before["open"], ctx.give_up_s)
    outcome.require(closed, "websocket.open did not return after the close")
    after = ctx.stats()["websocket"]
    for key, grown in (("total", 1), ("echoes", 3)):
        delta = after[key] - before[key]
        outcome.require(delta == grown, f"websocket.{key} grew by {delta}, expected {grown}")


def ws_subscribe(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Subscribed to two events: the reply, then one message per delivery (§6 shape, seq +1
    per event), counted in websocket.subscribers and the deliveries."""
    names = [ctx.event_name(), ctx.event_name("2")]
    before = ctx.stats()
    seqs: dict[str, list[int]] = {name: [] for name in names}
    with open_ws(ctx) as connection:
        request = subscribe(connection, names, ctx, outcome)
        subscribers = ctx.stats()["websocket"]["subscribers"]
        try:
            for name, interval_ms in zip(
                names, params.get("intervals_ms", [100, 170]), strict=True
            ):
                set_event(ctx, name, interval_ms, outcome)
            read_s = params.get("read_ms", 1000) / 1000
            read_deliveries(connection, request, seqs, outcome, read_s, read_s)
        finally:
            for name in names:
                clear_event(ctx, name)
        # Deliveries already on their way when the emitters stopped are counted: read them.
        drain_s = params.get("drain_ms", 300) / 1000
        read_deliveries(connection, request, seqs, outcome, ctx.give_up_s, drain_s)
    outcome.require(
        subscribers == before["websocket"]["subscribers"] + 1,
        f"websocket.subscribers was {subscribers} with one subscriber",
    )
    after = ctx.stats()
    for name in names:
        check_consecutive([0, *seqs[name]], outcome)
        outcome.require(len(seqs[name]) >= params.get("min_events", 3), f"{seqs[name]} of {name}")
        counted = after["events"][name]["deliveries"]
        outcome.require(
            counted == len(seqs[name]),
            f"{name}: {counted} deliveries counted, {len(seqs[name])} arrived",
        )
    delta = after["websocket"]["deliveries"] - before["websocket"]["deliveries"]
    got = sum(len(s) for s in seqs.values())
    outcome.require(delta == got, f"websocket.deliveries grew by {delta}, {got} arrived")


def read_deliveries(connection, request: dict, seqs: dict, outcome, read_s: float, quiet_s: float):
    """Reads deliveries for `read_s` or until none comes for `quiet_s`; appends their seqs."""
    for remaining in time_left(time.monotonic() + read_s):
        try:
            raw = connection.recv(timeout=min(quiet_s, remaining))
        except TimeoutError:
            return
        document = json.loads(raw)
        name = document.get("response", {}).get("event", {}).get("name")
        if not outcome.require(name in seqs, f"a message that is no delivery: {raw[:120]}"):
            return
        if not check_delivery(document, raw.encode(), request, name, outcome, f"{name} delivery"):
            return
        seqs[name].append(document["response"]["event"]["seq"])


def ws_publish(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A publish reaches both WebSocket subscribers and a long poll in one cycle (one seq,
    places 1..3), then the publisher gets `published`; a subscribed publisher gets its own
    delivery first. The event, never set, shows in /stats with its publish cycles."""
    event = ctx.event_name()
    before = ctx.stats()
    with open_ws(ctx) as first, open_ws(ctx) as second, open_ws(ctx) as publisher:
        requests = [subscribe(c, [event], ctx, outcome) for c in (first, second)]
        with ThreadPoolExecutor(max_workers=1) as pool:
            poll = pool.submit(longpoll, ctx, [event], 5000)
            open_push = before["requests"]["open_push"] + 1
            wait_for(lambda: ctx.stats()["requests"]["open_push"] >= open_push, ctx.give_up_s)
            send_json(publisher, {"type": "publish", "event": event, "data": {"hello": "world"}})
            got = [receive_json(c, ctx.give_up_s, "the published event") for c in (first, second)]
            reply = receive_json(publisher, ctx.give_up_s, "the published reply")
            answer, poll_request = poll.result()
        check_fanout_of_publish(
            [*zip(got, requests, strict=True), (answer.json(), poll_request)],
            event,
            {"hello": "world"},
            before,
            outcome,
        )
        seq = got[0]["response"]["event"]["seq"]
        wanted = {"type": "published", "event": event, "seq": seq, "total": 3}
        outcome.require(reply == wanted, f"published reply {reply}, expected {wanted}")
        send_json(first, {"type": "publish", "event": event})
        own = receive_json(first, ctx.give_up_s, "the publisher's own delivery")
        reply = receive_json(first, ctx.give_up_s, "the published reply")
        other = receive_json(second, ctx.give_up_s, "the second publish")
        answers = [(own, requests[0]), (other, requests[1])]
        check_fanout_of_publish(answers, event, None, before, outcome)
        wanted = {"type": "published", "event": event, "seq": seq + 1, "total": 2}
        outcome.require(reply == wanted, f"published reply {reply}, expected {wanted}")
    check_publish_counters(ctx, before, event, outcome)


def check_fanout_of_publish(answers, event: str, data, stats: dict, outcome: Outcome) -> None:
    for number, (document, request) in enumerate(answers, 1):
        raw = json.dumps(document).encode()
        if not check_delivery(document, raw, request, event, outcome, f"subscriber {number}"):
            return
        got = document["response"]["event"].get("data", "missing")
        outcome.require(got == data, f"subscriber {number}: data {got!r}, expected {data!r}")
    events = [document["response"]["event"] for document, _ in answers]
    cycles = {(e["seq"], e["timings"]["created"]) for e in events}
    outcome.require(len(cycles) == 1, f"one publish, several cycles: {cycles}")
    check_places(events, stats, outcome)


def check_publish_counters(ctx, before: dict, event: str, outcome: Outcome) -> None:
    after = ctx.stats()
    delta = after["websocket"]["publishes"] - before["websocket"]["publishes"]
    outcome.require(delta == 2, f"websocket.publishes grew by {delta}, expected 2")
    entry = after["events"].get(event, {})
    wanted = {"interval_ms": 0, "active": False, "emits": 2, "last_seq": 2, "deliveries": 5}
    shown = {key: entry.get(key) for key in wanted}
    outcome.require(shown == wanted, f"events.{event} is {shown}, expected {wanted}")


def ws_ping(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A ping is answered by a pong with the same payload."""
    with open_ws(ctx) as connection:
        pong = connection.ping(b"serverlab ping")
        outcome.require(pong.wait(ctx.give_up_s), "no pong with the ping's payload")


def ws_close(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """The client's close frame is answered with the same code, then the server closes TCP."""
    before = at_rest(ctx)["open"]
    code = params.get("code", 1000)
    with open_ws(ctx) as connection:
        connection.send_close(code, "verify is done")
        answered = connection.close_code(ctx.give_up_s)
        outcome.require(answered == code, f"the close was answered with code {answered}")
        outcome.require(connection.wait_closed(ctx.give_up_s), "the server kept TCP open")
    closed = wait_for(lambda: ctx.stats()["websocket"]["open"] == before, ctx.give_up_s)
    outcome.require(closed, "websocket.open did not return to its value before")


def ws_deflate_declined(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Offered permessage-deflate (websockets' default), the server declines it."""
    with open_ws(ctx, compression="deflate") as connection:
        offered = connection.request.headers.get("Sec-WebSocket-Extensions", "")
        outcome.require("permessage-deflate" in offered, "the client did not offer deflate")
        check_101(connection, outcome)
        outcome.require(not connection.protocol.extensions, "an extension is in use")
        echo(connection, [json.dumps({"type": "echo", "data": "plain"})], ctx, outcome, "text")


BAD_FRAMES = {
    "unmasked": lambda: Frame(Opcode.TEXT, b'{"type": "echo", "data": 1}').serialize(mask=False),
    "invalid_utf8": lambda: Frame(Opcode.TEXT, b'{"type": "echo", "data": "\xff"}').serialize(
        mask=True
    ),
    "binary": lambda: Frame(Opcode.BINARY, b'{"type": "echo", "data": 1}').serialize(mask=True),
    "oversize": lambda: Frame(Opcode.TEXT, echo_of_size(MAX_MESSAGE + 1).encode()).serialize(
        mask=True
    ),
    "unknown_type": lambda: Frame(Opcode.TEXT, b'{"type": "dance"}').serialize(mask=True),
}


def ws_bad_frame(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A frame or message §11 refuses: a close frame with its code, then TCP closed."""
    with open_ws(ctx) as connection:
        connection.send_raw(BAD_FRAMES[params["frame"]]())
        code = connection.close_code(ctx.give_up_s)
        outcome.observed.append(str(code))
        outcome.require(code == params["code"], f"close code {code}, expected {params['code']}")
        outcome.require(
            connection.wait_closed(2 + ctx.give_up_s), "the server kept TCP open after closing"
        )


CHECKS = {
    "ws_echo": ws_echo,
    "ws_subscribe": ws_subscribe,
    "ws_publish": ws_publish,
    "ws_ping": ws_ping,
    "ws_close": ws_close,
    "ws_deflate_declined": ws_deflate_declined,
    "ws_bad_frame": ws_bad_frame,
}
