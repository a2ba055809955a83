"""Suite permutation -> TestPlan: a pure function of the permutation, the repeat and the
contestant's manifest (and the suite's named links and file sets). Nothing here starts a
process, opens a socket or reads the clock, so every plan of a suite can be built, printed
(`serverlab run --dry-run --json`) and checked by the engine before any server starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from serverlab.base import spec
from serverlab.base.engine_facts import (
    FACTS,
    bare_request_behaviours,
    behaviour_suite_keys,
    own_methods,
    pacer_settings,
    pacer_suite_keys,
    passed_behaviour_keys,
    rate_searchable_behaviours,
    search_settings,
)
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.contestant.manifest import SYSLOG_MODE, Manifest
from serverlab.run.execution.testplan import (
    CLIENTS_LEVEL,
    ENGINE_GRACE_S,
    EVENT_SET,
    RATE_LEVEL,
    CapacityPlan,
    ControlCall,
    Link,
    Smoke,
    TestPlan,
    TimedCall,
)
from serverlab.run.execution.warmup import WARMUP_INTERVAL_MS
from serverlab.run.plan import protocols
from serverlab.run.plan.suite.file import Suite
from serverlab.run.plan.suite.groups import CONNECTION_KEYS, GROUP_KEY
from serverlab.run.plan.suite.matrix import BEHAVIOURS, OWN_H2_FRAMES, REQUEST_SEARCH_PACER
from serverlab.run.plan.suite.permutation import (
    CLEAR,
    HTTP2_TRANSPORTS,
    SYSLOG_TLS,
    TLS_DEFAULTS,
    TLS_TRANSPORTS,
    Permutation,
    PermutationFacts,
    SearchFacts,
)

PUSH_EVENT = "e1"
# Long runs with many clients need more than one source address (~28k ports each).
CLIENTS_PER_SOURCE = 20_000
# Requests (or messages) per second below which a counted run is stopped as hung.
SLOWEST_COUNTED_RATE = 5000
# A counted run (-n) has no planned end; it is bounded anyway, generously.
COUNTED_RUN_FLOOR_S = 600.0
HTTP_TARGET = "http://{host}:{port}"
SYSLOG_TARGET = "{transport}://{{host}}:{{syslog_port}}"
# RFC 5425: the engine's tls:// target is TCP syslog under TLS, on the server's own port.
SYSLOG_TLS_TARGET = "tls://{host}:{syslog_tls_port}"
# HTTPS and WSS (the engine takes https:// for every HTTP behaviour, WebSocket included).
HTTPS_TARGET = "https://{host}:{tls_port}"
H2C_TARGET = "http://{host}:{h2c_port}"
# Spec §16: gRPC calls go where the server serves them, its h2c/TLS ports or its gRPC
# server's own (the executor binds both names); the engine puts the method's path.
GRPC_TARGET = "http://{host}:{grpc_port}"
GRPC_TLS_TARGET = "https://{host}:{grpc_tls_port}"
# The engine trusts only the run's CA; the executor binds the file it made for the server.
TLS_CA = "{tls_ca}"
# How an engine plan asks for HTTP/2 (`--h2`): the probe of serverlab.run.execution.engine
# and the plans made here spell it alike, so that h2 cells run once the engine takes it.
H2_PLAN_FIELD = "http2"


def plan_tests(suite: Suite, manifest_of: Callable[[str], Manifest]) -> list[TestPlan]:
    """Every test of the suite, in run order (repeats interleaved)."""
    return [plan_test(p, r, manifest_of(p.contestant), suite) for p, r in suite.tests()]


def plan_test(perm: Permutation, repeat: int, manifest: Manifest, suite: Suite) -> TestPlan:
    # What runs: a tuned test's groups (perm.run_params) less those the contestant cannot
    # receive (protocols.left_out); the test keeps the permutation's parameters as its own.
    facts = perm.facts()  # the one question to the permutation: what it is and costs
    p = _receivable(facts.run_params, manifest)
    controlled = "control" in manifest.implements
    link = suite.links.get(p["link"]) if "link" in p else None
    return TestPlan(
        key=perm.key,
        repeat=repeat,
        scenario=perm.scenario,
        contestant=perm.contestant,
        params=dict(perm.params),
        tunables=_tunables(perm, manifest),
        tls_key=p["tls_key"] if facts.serves_tls else None,
        measured=measured_plan(p, facts, controlled),
        server_cpus=p.get("server_cpus"),
        budget_s=planned_seconds(p, facts.search) + ENGINE_GRACE_S,
        estimate_s=facts.estimated_s,
        warmup=warmup_plan(p, facts) if facts.warmup_cap_s else None,
        warmup_s=float(p.get("warmup_s", 0)),
        capacity=capacity_plan(p, facts.search),
        warmup_max_s=facts.warmup_cap_s,
        priming_runs=int(p.get("priming_runs", 0)),
        control=_control_calls(p) if controlled else (),
        during=_during(facts.emit_window_s) if controlled else (),
        emit_window_s=facts.emit_window_s if controlled else None,
        after=(ControlCall("POST", "/event/clear", {}),) if controlled else (),
        read_stats=controlled,
        count_at_receiver=p["behaviour"] == "syslog",
        link=Link(link["rate_mbit"], link.get("delay_ms", 0.0), link.get("loss_pct", 0.0))
        if link
        else None,
        fileset=suite.filesets[p["files"]] if "files" in p else None,
        smoke=Smoke(
            perf_body=spec.perf_body() if "perf" in manifest.implements else None,
            spec_major=spec.spec_major() if controlled else None,
        ),
    )


def _receivable(p: dict[str, Any], manifest: Manifest) -> dict[str, Any]:
    """The parameters without the client groups the contestant cannot receive; a test all
    of whose groups are such is refused before it is run (protocols.refusal)."""
    gone = protocols.left_out(p, manifest)
    kept = [g for g in p.get(GROUP_KEY) or [] if g["name"] not in gone]
    return {**p, GROUP_KEY: kept} if gone and kept else p


def _tunables(perm: Permutation, manifest: Manifest) -> dict[str, str]:
    """The server's settings; a syslog-parse server gets the test's mode (spec §7.1) as its
    `syslog_mode` tunable, so that counted and parsed runs start the same binary alike."""
    tunables = dict(perm.tunables)
    if "syslog_mode" in perm.params and "syslog-parse" in manifest.implements:
        tunables[SYSLOG_MODE] = perm.params["syslog_mode"]
    return tunables


def _control_calls(p: dict[str, Any]) -> tuple[ControlCall, ...]:
    calls = [ControlCall("POST", "/logging", {"enabled": False})]
    if p.get("emit_interval_ms"):
        event = {"name": PUSH_EVENT, "interval_ms": p["emit_interval_ms"]}
        calls.append(ControlCall("POST", EVENT_SET, event))
    return tuple(calls)


def _during(window: tuple[float, float] | None) -> tuple[TimedCall, ...]:
    """Emitters stop before the clients leave (the permutation's emit window), so that an
    event in flight when the load ends is not counted as delivered to nobody."""
    if window is None:
        return ()
    return (TimedCall(window[1], ControlCall("POST", "/event/clear", {})),)


def capacity_plan(p: dict[str, Any], search: SearchFacts | None) -> CapacityPlan | None:
    """A capacity scenario's search: the measured plan is its first step, whose rate the
    executor sets step by step (serverlab.run.execution.capacity)."""
    if search is None:
        return None
    return CapacityPlan(
        start=search.levels.start,
        maximum=search.levels.maximum,
        tolerance=search.levels.tolerance,
        p99_bound_ms=float(p["p99_bound_ms"]),
        step_s=search.step_s,
        level=CLIENTS_LEVEL if search.push else RATE_LEVEL,
    )


def planned_seconds(p: dict[str, Any], search: SearchFacts | None) -> float:
    if search is not None:
        return search.step_s  # the budget of each step
    base = float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0))
    count = p.get("requests", p.get("syslog_messages"))
    if count is not None:
        base = max(base, COUNTED_RUN_FLOOR_S, count / SLOWEST_COUNTED_RATE)
    return base


def engine_plan(p: dict[str, Any], tls: bool, search: SearchFacts | None) -> dict[str, Any]:
    """The engine plan (see engine/README.md) for one load's parameters, whether it speaks
    TLS and its capacity search (the permutation's facts), its target a template the
    executor binds (see serverlab.run.execution.testplan.bind)."""
    plan: dict[str, Any] = {
        "target": _target(p),
        "behaviour": _behaviour(p),
        "pacer": _pacer(p, search),
    }
    clients = _clients(p, search)
    plan["connections"] = clients
    if p.get("pacer", "closed") != "users":
        # A syslog flood's messages are the engine's requests.
        count = p.get("requests", p.get("syslog_messages"))
        if count is not None:
            plan["requests"] = int(count)
        elif "duration_s" in p:
            plan["duration_s"] = float(p.get("ramp_up_s", 0)) + float(p["duration_s"])
        elif search is not None:
            plan["duration_s"] = search.step_s
    if "timeout_s" in p:
        plan["timeout_ms"] = int(float(p["timeout_s"]) * 1000)
    if p["behaviour"] in OWN_METHODS:
        plan["method"] = OWN_METHODS[p["behaviour"]]
    # A push search's steps reach its max_clients: each has the sources the largest needs.
    most = int(p["max_clients"]) if search and search.push else clients
    if most > CLIENTS_PER_SOURCE:
        sources = -(-most // CLIENTS_PER_SOURCE) + 1
        plan["sources"] = [f"127.0.0.2-127.0.0.{1 + sources}"]
    if tls:
        plan["tls"] = _tls(p)
    if p.get("transport") in HTTP2_TRANSPORTS and p["behaviour"] not in OWN_H2_FRAMES:
        # Concurrent streams per connection, as h2load's -m (the engine's --streams M).
        plan[H2_PLAN_FIELD] = {"mode": p["transport"], "streams": int(p.get("streams", 1))}
    if GROUP_KEY in p:
        # A grouped run is duration-bound whatever its groups' pacers (a users pacer's plan
        # is not), and each group writes its own pacer out: the plan's is the engine's default.
        plan["pacer"] = {"kind": GROUPED_PLAN_PACER}
        plan.setdefault("duration_s", float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0)))
        plan[GROUP_KEY] = [_group(p, group, plan["duration_s"]) for group in p[GROUP_KEY]]
    return plan


def _tls(p: dict[str, Any]) -> dict[str, Any]:
    """The engine's TLS settings for a load over TLS: the run's CA, resumption, key group."""
    settings = {**TLS_DEFAULTS, **p}
    return {
        "ca_file": TLS_CA,
        "resume": settings["tls_resume"] == "on",
        "group": settings["tls_group"],
    }


# The pacer of a grouped plan itself: every group names its own (`_group`).
GROUPED_PLAN_PACER = "closed"
# The method of a behaviour that has no own (the engine's default).
PLAIN_METHOD = "GET"
# A group's keys that set its behaviour, or its pacer: a group that names its own behaviour
# (pacer) takes none of the scenario's settings of another.
GROUP_BEHAVIOUR_KEYS = set(behaviour_suite_keys(FACTS))
# Its ramp is a pacer's setting too: a group of another pacer does not ramp as the scenario's.
GROUP_PACER_KEYS = set(pacer_suite_keys(FACTS)) - {"clients", "duration_s"}


def _group(p: dict[str, Any], group: dict[str, Any], run_s: float) -> dict[str, Any]:
    """One client group of the engine's plan: its name, its window (the whole load unless
    it says), and its clients' behaviour, pacer and count, made of its own keys over the
    scenario's as a test's are; its path, if it names one, as its only path."""
    start, stop = float(group.get("start_s", 0)), float(group.get("stop_s", run_s))
    replaced = {GROUP_KEY}
    if "behaviour" in group:
        replaced |= GROUP_BEHAVIOUR_KEYS
    if "pacer" in group:
        replaced |= GROUP_PACER_KEYS
    own = {**{k: v for k, v in p.items() if k not in replaced}, **group}
    own["duration_s"] = stop - start - float(own.get("ramp_up_s", 0))
    entry: dict[str, Any] = {
        "name": group["name"],
        "start_s": start,
        "stop_s": stop,
        "behaviour": _behaviour(own),
        "pacer": _pacer(own, None),
        "connections": _clients(own, None),
    }
    # Written always: a method left out would be the plan's (a long poll's POST).
    entry["method"] = OWN_METHODS.get(own["behaviour"], PLAIN_METHOD)
    if "path" in group:
        entry["paths"] = [{"path": group["path"], "weight": 1.0}]
    if CONNECTION_KEYS.keys() & group.keys():
        # Its own connections: the port of its transport, with its own TLS settings or none.
        entry["target"] = _target(own)
        if own.get("transport", CLEAR) in TLS_TRANSPORTS:
            entry["tls"] = _tls(own)
    return entry


def measured_plan(p: dict[str, Any], facts: PermutationFacts, controlled: bool) -> dict[str, Any]:
    """The measured engine plan; with a warm-up phase of its own (`warmup_max_s`, 0.5 s
    interval lines) when the test's warm-up is its own load: plain requests, closed loop,
    for a duration, nothing primed or timed in between (docs/warmup.md). The executor then
    runs warm-up and measurement as one engine run and says when the first ends."""
    plan = engine_plan(p, facts.tls, facts.search)
    if warms_in_run(p, facts, controlled):
        plan.update(warmup_max_s=facts.warmup_cap_s, interval_ms=WARMUP_INTERVAL_MS)
    return plan


def warms_in_run(p: dict[str, Any], facts: PermutationFacts, controlled: bool) -> bool:
    """Whether the test's warm-up is the measured run's own first phase: its load is the
    measured load (plain requests, closed loop, a duration), and nothing comes between the
    two (priming runs; calls timed from the measured load's start)."""
    return (
        facts.warmup_cap_s > 0
        and p["behaviour"] in BARE_REQUESTS
        and p.get("pacer", "closed") == "closed"
        and "duration_s" in p
        and "requests" not in p
        and facts.search is None
        and not int(p.get("priming_runs", 0))
        and not (controlled and facts.emit_window_s)
        and GROUP_KEY not in p  # the engine warms no grouped run (engine/README.md)
    )


def warmup_plan(p: dict[str, Any], facts: PermutationFacts) -> dict[str, Any]:
    """An unrecorded load before the measurement, so that JIT compilers and caches are
    warm: the scenario's own requests when they are plain requests or gRPC unary calls
    (what a capacity search steps), else keep-alive GET /perf. It runs for the warm-up's cap
    with an interval line every 0.5 s, and the executor stops it once its rate is steady
    (serverlab.run.execution.warmup)."""
    plain = p["behaviour"] in OWN_WARMUPS
    warm = {
        "behaviour": p["behaviour"] if plain else "keepalive",
        "clients": min(_clients(p, facts.search), 50),
        "duration_s": facts.warmup_cap_s,
    }
    # Warmed over the test's own transport: a TLS stack has its own code to warm.
    warm.update({k: v for k, v in p.items() if k == "transport" or k in TLS_DEFAULTS})
    if plain:
        # The test's own requests: its path, and who closes its connections.
        warm.update({k: p[k] for k in ("path", "close") if k in p})
    transports = _request_transports(p)
    if len(transports) > 1:
        # Plain requests go over several transports (a probe in clear, one over TLS): each
        # is warmed, the clients shared out, as a group of its own.
        share = max(1, warm["clients"] // len(transports))
        warm[GROUP_KEY] = [
            {"name": f"warm-{t}", "transport": t, "clients": share} for t in transports
        ]
    # Plain HTTP over the test's own transport: TLS when that transport is, not a syslog
    # flood's RFC 5425, and never a capacity search's step.
    return {**engine_plan(warm, facts.transport_tls, None), "interval_ms": WARMUP_INTERVAL_MS}


def _request_transports(p: dict[str, Any]) -> list[str]:
    """The transports a grouped test's plain requests go over (its probes'), in order."""
    found: list[str] = []
    for group in p.get(GROUP_KEY) or []:
        own = {**p, **group}
        transport = own.get("transport", CLEAR)
        if own["behaviour"] in BARE_REQUESTS and transport not in found:
            found.append(transport)
    return found


def _target(p: dict[str, Any]) -> str:
    if p["behaviour"] == "syslog":
        if p.get("syslog_transport") == SYSLOG_TLS:
            return SYSLOG_TLS_TARGET
        return SYSLOG_TARGET.format(transport=p.get("syslog_transport", "tcp"))
    if p["behaviour"].startswith("grpc-"):
        return GRPC_TLS_TARGET if p.get("transport") == "h2" else GRPC_TARGET
    path = p.get("path") or BEHAVIOURS.get(p["behaviour"]) or "/"
    base = {CLEAR: HTTP_TARGET, "h2c": H2C_TARGET}.get(p.get("transport", CLEAR), HTTPS_TARGET)
    # The target is a template: a brace of the suite's own path stays a brace.
    return base + path.replace("{", "{{").replace("}", "}}")


# Suite keys that are settings of the engine's behaviour, by the name the engine gives them
# (its facts; `derived` keys are shaped below instead). Each is passed on whatever the
# behaviour, so that the engine (`--check`) is the one judge of what goes with what: a
# setting a behaviour does not take is refused there.
BEHAVIOUR_KEYS = passed_behaviour_keys(FACTS)
# The method each behaviour always sends (a long poll's POST), as the engine says.
OWN_METHODS = own_methods(FACTS)
# Behaviours whose requests are bare (a request and its answer, nothing paced or held), as the
# engine says: a test of them warms the server with its own requests.
BARE_REQUESTS = bare_request_behaviours(FACTS)
# Behaviours whose own requests warm the server (a gRPC search warms gRPC's code, not /perf's).
OWN_WARMUPS = rate_searchable_behaviours(FACTS)
# Reads of 1 KiB paced to the wanted rate model a client on a slow link.
SLOW_READ_BYTES = 1024


def _behaviour(p: dict[str, Any]) -> dict[str, Any]:
    """The engine's behaviour, spelled as the suite spells it."""
    kind = p["behaviour"]
    spec: dict[str, Any] = {"kind": kind}
    if kind in PUSH_BEHAVIOURS:
        spec["events"] = [PUSH_EVENT]
    for key, name in BEHAVIOUR_KEYS.items():
        if key in p:
            spec[name] = p[key]
    if spec.get("transport") == SYSLOG_TLS:
        spec["transport"] = "tcp"  # TLS is the target's (tls://); under it, TCP
    if kind == "slow-upload" and "bytes" in spec:
        spec.setdefault("bytes_per_s", spec["bytes"])
    if "publish_every_ms" in p or "publishers" in p:
        spec["publish"] = {
            "every_ms": p.get("publish_every_ms", 1000),
            "clients": p.get("publishers", 1),
        }
    if kind == "slow-reader" or "read_rate_bps" in p:
        rate = max(1, int(p.get("read_rate_bps", 64_000)))
        spec["read_bytes"] = SLOW_READ_BYTES
        spec["read_interval_ms"] = max(1, SLOW_READ_BYTES * 1000 // rate)
    return spec


def _clients(p: dict[str, Any], search: SearchFacts | None) -> int:
    """The engine's clients: a push search's first step holds its start_clients (the
    executor sets each step's)."""
    return int(p["start_clients"]) if search and search.push else int(p.get("clients", 1))


# Pacer -> the suite keys that set its settings, as the engine says; a `derived` one is
# shaped by `SHAPED_PACER_SETTINGS`, the rest passed as they are.
PACER_SETTINGS = pacer_settings(FACTS)
# Every pacer's settings passed as they are, by suite key: one the test's pacer does not take
# is passed too, so that the engine (`--check`) refuses it rather than the plan dropping it.
PASSED_PACER_KEYS = {
    key.suite: key.plan for keys in PACER_SETTINGS.values() for key in keys if not key.derived
}
# How the planner shapes each setting the engine marks `derived`, from the test's parameters
# (None: not written). A users pacer's are always written, as numbers of their type (1 user,
# 0 s of ramp-up and hold unless the suite says); a rate ramp lasts the ramp, else the run.
SHAPED_PACER_SETTINGS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "ramp_up_s": lambda p: float(p.get("ramp_up_s", 0)),
    "hold_s": lambda p: float(p.get("duration_s", 0)),
    "users": lambda p: int(p.get("clients", 1)),
    "ramp_s": lambda p: (p.get("ramp_up_s") or p.get("duration_s")) if "rate_end" in p else None,
}
# Pacer -> the setting a capacity search's step sets to its level, as the engine says.
SEARCH_SETTINGS = search_settings(FACTS)


def _pacer(p: dict[str, Any], search: SearchFacts | None) -> dict[str, Any]:
    """The engine's pacer, each setting made of the suite key the engine names for it; a
    capacity search's plan is its first step, at the search's start."""
    kind = p.get("pacer", REQUEST_SEARCH_PACER if search else "closed")
    own = PACER_SETTINGS.get(kind, ())  # an unknown pacer: the engine refuses its kind
    spec: dict[str, Any] = {"kind": kind}
    for key in own:
        value = SHAPED_PACER_SETTINGS[key.plan](p) if key.derived else p.get(key.suite)
        if value is not None:
            spec[key.plan] = value
    mine = {key.suite for key in own}
    spec.update({plan: p[k] for k, plan in PASSED_PACER_KEYS.items() if k in p and k not in mine})
    if search is not None:
        spec[SEARCH_SETTINGS[kind]] = p["start_clients" if search.push else "start_rate"]
    return spec


# Plan fields the engine names when it refuses a plan -> the suite keys that make them,
# most likely first.
PLAN_FIELD_TO_SUITE_KEYS = {
    "connections": ("clients",),
    "users": ("clients",),
    "sources": ("clients",),
    "duration_s": ("duration_s", "ramp_up_s"),
    "requests": ("requests", "syslog_messages"),
    "timeout_ms": ("timeout_s",),
    "target": ("path", "syslog_transport"),
    "paths": ("files",),
    "behaviour": (*behaviour_suite_keys(FACTS), "behaviour"),
    "tls": ("tls_resume", "transport"),
    "pacer": (*pacer_suite_keys(FACTS), "pacer"),
}


def suite_key_for(field: str | None, params: dict, error: str = "") -> str:
    """The suite key to point at for a refused plan field: of the keys that make it and
    that the test sets, the one whose value or engine name the refusal quotes, else the
    first (for the pacer, its own keys first); the scenario's name when the test sets none."""
    keys = PLAN_FIELD_TO_SUITE_KEYS.get(field or "", ())
    if field == "pacer":
        own = PACER_SETTINGS.get(params.get("pacer", "closed"), ())
        keys = (*(key.suite for key in own), *keys)
    present = [k for k in dict.fromkeys(keys) if k in params]
    for key in present:
        if f"`{params[key]}`" in error or f"`{BEHAVIOUR_KEYS.get(key, key)}`" in error:
            return key
    return present[0] if present else "name"
