"""A test as data: everything one test will do, resolved before anything runs.

A `TestPlan` is built by `serverlab.run.plan.planner` from a suite's permutation, the repeat and
the contestant's manifest, and read by an executor (`serverlab.run.execution.executor` on this host;
later, others on other machines). It is frozen and JSON-serialisable, and it holds roles and
policies, never this host's ports, CPUs or pids: the engine's target is a template
(`http://{host}:{port}/perf`) that the executor binds where the test runs, and what it bound
is stored beside the test (`RecordedTest.run_info`), never in what identifies it.

A test's identity stays its permutation key plus the repeat, so that `--resume` finds the
tests of databases written before plans existed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

PLAN_VERSION = 1
# Placeholders of an engine plan's target, bound by the executor.
TARGET_FIELDS = (
    "host",
    "port",
    "syslog_port",
    "tls_port",
    "h2c_port",
    "syslog_tls_port",
    "grpc_port",
    "grpc_tls_port",
)
# CPU policies: the engine and the server on CPUs of their own (the lab's rule), or sharing.
CPU_APART = "apart"
CPU_POLICIES = (CPU_APART, "shared")
# How long an engine run may go past its planned end before it is stopped.
ENGINE_GRACE_S = 30.0


class PlanFormatError(ValueError):
    """A serialised plan this serverlab cannot read."""


# The control call that starts an emitter (spec: POST /event/set): the planner makes it, and
# the executor and the run's verify look for it.
EVENT_SET = "/event/set"


@dataclass(frozen=True)
class ControlCall:
    """A request to the server's control endpoints, made from the server's own host: the
    spec answers them only from loopback."""

    method: str
    path: str
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class TimedCall:
    """A control call made while the measured load runs, `at_s` after it starts."""

    at_s: float
    call: ControlCall


@dataclass(frozen=True)
class Link:
    """A shaped link between the engine and the server (a namespace of its own)."""

    rate_mbit: float
    delay_ms: float = 0.0  # one way: the round trip is twice this
    loss_pct: float = 0.0


@dataclass(frozen=True)
class Smoke:
    """The per-test conformance check: cheap, and enough to catch a wrong build."""

    perf_body: str | None = None  # the exact body GET /perf must answer
    spec_major: int | None = None  # the MAJOR of spec_version /stats must report


# What a capacity search's levels are: the open-loop pacer's offered rate (requests), or
# the clients the users pacer ramps and holds (push).
RATE_LEVEL = "rate"
CLIENTS_LEVEL = "clients"


@dataclass(frozen=True)
class CapacityPlan:
    """A capacity search (serverlab.base.capacity): its steps are the measured plan with its
    level (`level`: the open-loop rate, or the users pacer's clients) set to each level,
    `step_s` long (a push step: its ramp and hold), judged against the p99 bound (latency for
    requests, delivery delay for push)."""

    start: float
    maximum: float
    tolerance: float
    p99_bound_ms: float
    step_s: float
    level: str = RATE_LEVEL


@dataclass(frozen=True)
class TestPlan:
    # Not a test class, whatever pytest's collector thinks of the name.
    __test__ = False

    key: str  # the permutation key: with `repeat`, the test's identity
    repeat: int
    scenario: str
    contestant: str
    params: dict[str, Any]  # the permutation's parameters, for grouping and labels
    tunables: dict[str, str]  # the server's settings (values as the manifest wants them)
    measured: dict[str, Any]  # the engine plan of the measured run (templated target)
    budget_s: float  # how long the measured engine run may take before it is stopped
    estimate_s: float = 0.0  # what the whole test should take, for progress only
    grace_s: float = ENGINE_GRACE_S  # a warm-up's allowance past its planned end
    cpu: str = CPU_APART
    server_cpus: int | None = None  # how many CPUs the server gets (None: its share)
    warmup: dict[str, Any] | None = None  # an unrecorded engine run before everything
    warmup_s: float = 0.0  # it runs at least this long, then until steady (execution.warmup)
    warmup_max_s: float = 0.0  # and at most this long (its engine plan's duration_s)
    capacity: CapacityPlan | None = None  # a capacity search instead of one measured run
    priming_runs: int = 0  # the measured plan run this many times first, under the monitor
    control: tuple[ControlCall, ...] = ()  # before the measurement
    during: tuple[TimedCall, ...] = ()  # while the measured load runs
    after: tuple[ControlCall, ...] = ()  # after it, once /stats is read
    # A push test's window, in seconds from the load's start: (end of the ramp, the
    # emitters' intended stop). Its figures come from the cycles created inside it.
    emit_window_s: tuple[float, float] | None = None
    read_stats: bool = False  # GET /stats before and after
    count_at_receiver: bool = False  # a syslog flood: rate and loss as the server counted
    link: Link | None = None
    fileset: dict[str, Any] | None = None  # the docroot and the engine's weighted paths
    smoke: Smoke = field(default_factory=Smoke)
    # The server's key type when the test speaks TLS: the executor makes key material of
    # that type in the test's work folder (serverlab.base.tlskeys), gone with the folder.
    tls_key: str | None = None
    version: int = PLAN_VERSION

    def as_dict(self) -> dict[str, Any]:
        plan = asdict(self)
        if plan["tls_key"] is None:
            del plan["tls_key"]  # a cleartext test's plan reads as it did before TLS
        if plan["capacity"] is None:
            del plan["capacity"]  # and a test's as before capacity searches
        if not plan["warmup_max_s"]:
            del plan["warmup_max_s"]  # so does a plan without a warm-up, as before its cap
        return plan

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> TestPlan:
        try:
            raw = json.loads(text)
        except ValueError as error:
            raise PlanFormatError(f"not a test plan: {error}") from None
        if not isinstance(raw, dict) or raw.get("version") != PLAN_VERSION:
            found = raw.get("version") if isinstance(raw, dict) else None
            raise PlanFormatError(
                f"test plan version {found!r}; this serverlab reads {PLAN_VERSION}"
            )
        try:
            return cls(
                **{
                    **raw,
                    "control": tuple(ControlCall(**c) for c in raw.get("control", ())),
                    "during": tuple(
                        TimedCall(t["at_s"], ControlCall(**t["call"]))
                        for t in raw.get("during", ())
                    ),
                    "after": tuple(ControlCall(**c) for c in raw.get("after", ())),
                    "link": Link(**raw["link"]) if raw.get("link") else None,
                    "emit_window_s": _pair(raw.get("emit_window_s")),
                    "smoke": Smoke(**raw.get("smoke", {})),
                    "capacity": CapacityPlan(**raw["capacity"]) if raw.get("capacity") else None,
                }
            )
        except TypeError as error:
            raise PlanFormatError(f"not a test plan: {error}") from None

    def engine_plans(self) -> list[dict[str, Any]]:
        """Every engine plan the test runs (warm-up first), templated."""
        return [plan for plan in (self.warmup, self.measured) if plan is not None]


def _pair(value) -> tuple[float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]))


def bind(engine_plan: dict[str, Any], **where: Any) -> dict[str, Any]:
    """The engine plan with its target bound to a host and ports (see TARGET_FIELDS), and
    a TLS test's CA file (`{tls_ca}`) to the one the run made for the server."""
    bound = _bound_connections(engine_plan, where)
    if engine_plan.get("groups"):
        # A client group's own target and TLS settings (another of the server's ports).
        bound["groups"] = [_bound_connections(g, where) for g in engine_plan["groups"]]
    return bound


def _bound_connections(part: dict[str, Any], where: dict[str, Any]) -> dict[str, Any]:
    """A plan's (or a group's) target and TLS CA file bound; a group without its own as is."""
    bound = dict(part)
    if "target" in part:
        bound["target"] = part["target"].format(**where)
    tls = part.get("tls")
    if tls and tls.get("ca_file"):
        bound["tls"] = {**tls, "ca_file": tls["ca_file"].format(**where)}
    return bound


# The behaviours whose requests go to weighted paths (engine/README.md, `paths`).
PATHED_BEHAVIOURS = ("keepalive", "new-connection", "slow-reader")


def with_paths(engine_plan: dict[str, Any], paths: list[dict]) -> dict[str, Any]:
    """The plan with a file set's paths: its own, or in a plan of client groups each group's
    of plain requests that names no path of its own (an attack's clients, which the engine
    refuses paths, and a probe's own path keep theirs)."""
    groups = engine_plan.get("groups")
    if not groups:
        return {**engine_plan, "paths": paths}
    return {
        **engine_plan,
        "groups": [
            {**group, "paths": paths}
            if "paths" not in group
            and (group.get("behaviour") or engine_plan.get("behaviour", {})).get("kind")
            in PATHED_BEHAVIOURS
            else group
            for group in groups
        ],
    }
