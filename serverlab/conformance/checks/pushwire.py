"""Talking to the push endpoints and checking their answers against spec §6."""

import json
from collections import Counter

from serverlab.base import httpclient
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.exchange import check_required_headers
from serverlab.conformance.jsonshape import check_subset, check_timing_triple, check_types
from serverlab.conformance.outcome import Outcome

DELIVERY_TYPES = {
    "response.event.name": "str",
    "response.event.seq": "int",
    "response.event.timings.duration": "int",
    "response.event.timings.sent": "int",
    "response.event.timings.created": "int",
    "response.event.connections.total": "int",
    "response.event.connections.place": "int",
    "request": "object",
    "timings.duration": "int",
    "timings.sent": "int",
    "timings.created": "int",
    "connections.start": "int",
    "connections.finish": "int",
}
TIMEOUT_TYPES = {
    "response.timeout": "bool",
    **{key: kind for key, kind in DELIVERY_TYPES.items() if not key.startswith("response.")},
}


def set_event(ctx: VerifyContext, name: str, interval_ms: int, outcome: Outcome) -> dict:
    response = ctx.post_json("/event/set", {"name": name, "interval_ms": interval_ms})
    if response.status != 200:
        outcome.abort(f"POST /event/set {name}: status {response.status} {response.body[:80]!r}")
    return response.json()


def clear_event(ctx: VerifyContext, name: str | None) -> httpclient.Response:
    return ctx.post_json("/event/clear", {"name": name})


def push_body(kind: str, events: list[str], duration_ms: int | None) -> dict:
    body = {"type": kind, "events": events}
    if duration_ms is not None:
        body["duration_ms"] = duration_ms
    return body


def send_push(connection: httpclient.HttpConnection, body: dict) -> None:
    connection.send_request(
        "POST", "/push", [("Content-Type", "application/json")], body=json.dumps(body).encode()
    )


def longpoll(
    ctx: VerifyContext,
    events: list[str],
    duration_ms: int,
    connection: httpclient.HttpConnection | None = None,
):
    """Sends one long poll and waits for its answer: (response, request body sent)."""
    body = push_body("longpoll", events, duration_ms)
    own = connection is None
    connection = connection or ctx.connect()
    try:
        send_push(connection, body)
        return connection.read_response(duration_ms / 1000 + ctx.give_up_s), body
    finally:
        if own:
            connection.close()


def check_longpoll_answer(response, outcome: Outcome, where: str) -> dict | None:
    """Status, headers and framing of a long-poll answer; its JSON if usable."""
    check_required_headers(response, outcome, f"{where}: ")
    if not outcome.require(response.status == 200, f"{where}: status {response.status}"):
        return None
    outcome.require(
        response.media_type == "application/json",
        f"{where}: Content-Type {response.header('content-type')!r}",
    )
    outcome.require(
        response.has_header("content-length"), f"{where}: a long-poll answer carries Content-Length"
    )
    try:
        return response.json()
    except httpclient.HttpError as error:
        outcome.fail(f"{where}: {error}")
        return None


def check_delivery(
    document, raw: bytes, request: dict, event: str, outcome: Outcome, where: str
) -> bool:
    """The seed 004 response shape plus seq (spec §6); True if the shape is complete."""
    if b"timeout" in raw:
        outcome.fail(f"{where}: a delivery contains the string 'timeout'")
    if not check_types(document, DELIVERY_TYPES, outcome, where):
        return False
    check_subset(document, {"response.event.name": event, "request": request}, outcome, where)
    check_timing_triple(document, "response.event.timings", outcome, where)
    check_timing_triple(document, "timings", outcome, where)
    event_connections = document["response"]["event"]["connections"]
    outcome.require(
        1 <= event_connections["place"] <= event_connections["total"],
        f"{where}: place {event_connections['place']} not in 1..total {event_connections['total']}",
    )
    outcome.require(document["response"]["event"]["seq"] >= 1, f"{where}: seq below 1")
    connections = document["connections"]
    outcome.require(
        connections["start"] >= 1 and connections["finish"] >= 1,
        f"{where}: connections.start/finish count the request itself",
    )
    return not outcome.failures


def check_places(events: list[dict], stats: dict, outcome: Outcome) -> None:
    """The `connections` of every delivery of one emit cycle: places 1..N of total N, N the
    deliveries (spec §6); or, where /stats says `workers.places` is "per_worker" (spec §5),
    each worker's share numbered 1..its total, the shares adding up to N."""
    pairs = Counter((e["connections"]["total"], e["connections"]["place"]) for e in events)
    shown = f"(total, place) pairs {sorted(pairs.elements())[:8]}"
    workers = stats.get("workers")
    if not (isinstance(workers, dict) and workers.get("places") == "per_worker"):
        wanted = Counter((len(events), place) for place in range(1, len(events) + 1))
        outcome.require(pairs == wanted, f"{shown}..., expected places 1..{len(events)}")
        return
    # A share of total t is one delivery of each place 1..t; k shares of t, k of each.
    shares = {total: pairs[(total, 1)] for total, _place in pairs}
    wanted = Counter({(t, p): k for t, k in shares.items() for p in range(1, t + 1)})
    outcome.require(pairs == wanted, f"{shown}... are not shares numbered 1..total each")
    count = sum(shares.values())
    outcome.require(
        count <= workers.get("count", 0),
        f"{count} shares of one cycle, /stats says {workers.get('count')} workers",
    )


def check_timeout_answer(document, raw: bytes, request: dict, outcome: Outcome, where: str) -> bool:
    if not check_types(document, TIMEOUT_TYPES, outcome, where):
        return False
    check_subset(document, {"response.timeout": True, "request": request}, outcome, where)
    check_timing_triple(document, "timings", outcome, where)
    return not outcome.failures
