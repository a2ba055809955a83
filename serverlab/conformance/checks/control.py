"""`/timestamp` against the local clock and `/stats` shape and counting (spec §5)."""

import time

from serverlab.base.spec import same_major, spec_version
from serverlab.base.waiting import wait_for
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.exchange import check_required_headers
from serverlab.conformance.jsonshape import check_types
from serverlab.conformance.outcome import Outcome

STATS_TYPES = {
    "spec_version": "str",
    "server": "str",
    "uptime_ms": "int",
    "connections.open": "int",
    "connections.total": "int",
    "requests.total": "int",
    "requests.open_push": "int",
    "responses.total": "int",
    "responses.push": "int",
    "responses.timeouts": "int",
    "events": "object",
    "syslog.received": "int",
    "syslog.bytes": "int",
    "syslog.tcp_connections": "int",
}
EVENT_STATS_TYPES = {
    name: "int"
    for name in (
        "interval_ms",
        "emits",
        "last_seq",
        "deliveries",
        "last_emit_duration_ms",
        "max_emit_duration_ms",
        "total_emit_duration_ms",
    )
} | {"active": "bool"}
# Groups of /stats that only the servers claiming a part have (spec §5).
PART_STATS_TYPES = {
    "sse": {
        f"sse.{name}": "int"
        for name in ("open", "total", "deliveries", "replayed", "gaps", "heartbeats", "timeouts")
    },
    "websocket": {
        f"websocket.{name}": "int"
        for name in ("open", "total", "subscribers", "deliveries", "echoes", "publishes")
    },
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def timestamp(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """`server` is the server's clock (the same machine: close to ours); offset adds up."""
    client = now_ms() - params.get("client_behind_ms", 0)
    before = now_ms()
    response = ctx.get(f"/timestamp?client={client}")
    after = now_ms()
    check_required_headers(response, outcome)
    if not outcome.require(response.status == 200, f"status {response.status}, expected 200"):
        return
    document = response.json()
    if not check_types(document, {"server": "int", "client": "int", "offset_ms": "int"}, outcome):
        return
    slack = params.get("clock_slack_ms", 1000)
    outcome.require(
        before - slack <= document["server"] <= after + slack,
        f"server time {document['server']} is not between {before} and {after}",
    )
    outcome.require(document["client"] == client, f"client {document['client']} != {client}")
    outcome.require(
        document["offset_ms"] == document["server"] - client,
        f"offset_ms {document['offset_ms']} != server - client",
    )


def stats_shape(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Every field of §5 `/stats` with its type, the server's name and the spec version."""
    response = ctx.get("/stats")
    check_required_headers(response, outcome)
    if not outcome.require(response.status == 200, f"status {response.status}, expected 200"):
        return
    if response.media_type != "application/json":
        outcome.fail(f"Content-Type {response.header('content-type')!r}, not application/json")
    stats = response.json()
    types = STATS_TYPES | {
        path: kind
        for part, group in PART_STATS_TYPES.items()
        if part in ctx.parts
        for path, kind in group.items()
    }
    if not check_types(stats, types, outcome):
        return
    outcome.require(
        stats["server"] == ctx.server.manifest.name,
        f"server is {stats['server']!r}, expected {ctx.server.manifest.name!r}",
    )
    check_spec_version(stats["spec_version"], outcome)
    outcome.require(stats["connections"]["open"] >= 1, "connections.open excludes this one")
    for name, event in stats["events"].items():
        check_types(event, EVENT_STATS_TYPES, outcome, f"events.{name}")
    if "workers" in stats:
        check_workers(stats, outcome)


def check_workers(stats: dict, outcome: Outcome) -> None:
    """The optional `workers` of /stats (spec §5): how many, and what places count."""
    if check_types(stats, {"workers.count": "int", "workers.places": "str"}, outcome):
        workers = stats["workers"]
        outcome.require(workers["count"] >= 1, f"workers.count is {workers['count']}")
        outcome.require(
            workers["places"] in ("per_worker", "server"),
            f"workers.places is {workers['places']!r}, not per_worker or server",
        )


def check_spec_version(version: str, outcome: Outcome) -> None:
    """A different MAJOR fails, a different MINOR warns (spec §9)."""
    if not same_major(version):
        outcome.fail(f"spec_version {version}, verify checks {spec_version()}")
    elif version != spec_version():
        outcome.warn(f"spec_version {version}, verify checks {spec_version()}")


def stats_counting(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Requests, responses and connections counted, with this /stats request included."""
    requests = params.get("requests", 5)
    before = ctx.stats()
    with ctx.connect() as connection:
        for _ in range(requests):
            connection.request("GET", ctx.probe_target)
    after = ctx.stats()
    # Each ctx.stats() is one request on its own connection; the first was answered.
    wanted = {
        "requests.total": requests + 1,
        "responses.total": requests + 1,
        "connections.total": 2,
    }
    for path, delta in wanted.items():
        group, name = path.split(".")
        grown = after[group][name] - before[group][name]
        outcome.require(grown == delta, f"{path} grew by {grown}, expected {delta}")
    outcome.require(after["uptime_ms"] >= before["uptime_ms"], "uptime_ms went backwards")


def log_lines(ctx: VerifyContext) -> int:
    try:
        return len(ctx.server.log_path.read_bytes().splitlines())
    except OSError:
        return 0


def logging_output(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Logging off prints nothing per request; logging on prints one line per request."""
    requests = params.get("requests", 5)
    quiet_before = log_lines(ctx)
    for _ in range(requests):
        ctx.get(ctx.probe_target)
    time.sleep(params.get("flush_wait_s", 0.3))
    printed = log_lines(ctx) - quiet_before
    outcome.require(printed == 0, f"{printed} log lines for {requests} requests with logging off")
    if not outcome.require(
        ctx.post_json("/logging", {"enabled": True}).status == 200,
        "POST /logging did not answer 200",
    ):
        return
    before = log_lines(ctx)
    try:
        for _ in range(requests):
            ctx.get(ctx.probe_target)
    finally:
        ctx.post_json("/logging", {"enabled": False})
    # The two /logging requests may or may not be logged themselves, depending on when the
    # switch takes effect; the probes in between must be, one line each.
    wait_for(lambda: log_lines(ctx) - before >= requests, ctx.give_up_s)
    printed = log_lines(ctx) - before
    outcome.require(
        requests <= printed <= requests + 2,
        f"{printed} log lines for {requests} requests with logging on",
    )


CHECKS = {
    "timestamp": timestamp,
    "stats_shape": stats_shape,
    "stats_counting": stats_counting,
    "logging_output": logging_output,
}
