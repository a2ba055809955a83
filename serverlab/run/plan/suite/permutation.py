"""Suite stage: the permutation, one test of a suite's matrix, and what it is and costs
(`Permutation.facts`): whether it speaks TLS, its capacity search, its warm-up's cap, its
window of emit cycles, its estimated time. The planner asks the permutation for these once
and reads the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from serverlab.base import capacity
from serverlab.base.paramtext import GROUPS_PARAM
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.base.tlskeys import DEFAULT_KEY_TYPE

# A scenario's kind: one measured load (a test), or a capacity search (issue 32), doubled
# then bisected (serverlab.base.capacity): for requests, steps of the open-loop pacer from
# `start_rate`, for the highest rate sustained with p99 <= `p99_bound_ms`; for push, steps
# of `start_clients` ... `max_clients` subscribers ramped and held (the users pacer), for the
# most held with delivery delay p99 <= `p99_bound_ms`.
TEST_KIND = "test"
CAPACITY = "capacity"
KINDS = (TEST_KIND, CAPACITY)
DEFAULT_STEP_S = 2.0
# A capacity step's own cost besides its load (the server let settle 1 s, an engine
# started): only for the estimate.
STEP_OVERHEAD_S = 1.5
# How a test's HTTP requests travel (issue 22): cleartext, HTTPS/WSS, or HTTP/2 over TLS or
# with prior knowledge. A syslog flood says its own with `syslog_transport` (tls: RFC 5425).
CLEAR = "clear"
TRANSPORTS = (CLEAR, "tls", "h2", "h2c")
TLS_TRANSPORTS = ("tls", "h2")
HTTP2_TRANSPORTS = ("h2", "h2c")
SYSLOG_TLS = "tls"
# The TLS settings of a test and their defaults, written into every TLS test's parameters
# so that the report groups by them whether the suite named them or not.
TLS_DEFAULTS = {"tls_key": DEFAULT_KEY_TYPE, "tls_resume": "on", "tls_group": "x25519"}
# A warm-up's cap (`warmup_max_s`) where the suite gives none. Sized by measuring the JVM
# contestants here (see DEFAULT_WARMUP_MAX_S's commit): the warm-up stops earlier, once
# the rate is steady (serverlab.run.execution.warmup); the estimate counts the cap.
DEFAULT_WARMUP_MAX_S = 30.0
# Fixed per-test cost of starting, verifying and stopping a server: only for the estimate.
SETUP_ESTIMATE_S = 6.0
# The last second of a push test runs with the emitters stopped, so that the last cycle of
# the window reaches clients that are still there (a cycle after the stop is reported apart).
QUIET_END_S = 1.0


@dataclass(frozen=True)
class SearchFacts:
    """A capacity search's: its levels (doubled, then bisected), one step's load in seconds,
    and whether a level is a number of subscribers held (push) or an offered rate."""

    levels: capacity.Search
    step_s: float
    push: bool


@dataclass(frozen=True)
class PermutationFacts:
    """What a permutation is and costs, answered at once: the planner asks the permutation
    (`Permutation.facts`) and reads the answer, rather than computing each fact itself."""

    tls: bool  # its connections are TLS (`speaks_tls`)
    transport_tls: bool  # its `transport` is (`transport_tls`): what its HTTP warm-up speaks
    search: SearchFacts | None  # a capacity search's; None for a test of one load
    warmup_cap_s: float  # `warmup_cap_s`: 0 for a test without a warm-up
    emit_window_s: tuple[float, float] | None  # `emit_window_s`
    estimated_s: float  # `Permutation.estimated_seconds`
    run_params: dict[str, Any]  # `Permutation.run_params`: what a tuned test runs
    serves_tls: bool  # `serves_tls`: the server serves TLS (to a group, perhaps)


@dataclass(frozen=True)
class Permutation:
    """One point of a scenario's matrix for one contestant: what one test runs, and what
    it is and costs (`facts`)."""

    scenario: str
    contestant: str
    params: dict[str, Any]
    tunables: dict[str, str]
    # Stable identity across runs, so `--resume` can tell what is already done.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        dims = ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))
        tun = ",".join(f"{k}={self.tunables[k]}" for k in sorted(self.tunables))
        object.__setattr__(self, "key", f"{self.scenario}|{self.contestant}|{dims}|{tun}")

    @property
    def run_params(self) -> dict[str, Any]:
        """The parameters the test runs: `params`, but in a tuned test (tunables set) its
        client groups marked `tuned = false` left out (`tuned_run`)."""
        return tuned_run(self.params) if self.tunables else self.params

    def facts(self) -> PermutationFacts:
        p = self.run_params
        return PermutationFacts(
            tls=speaks_tls(p),
            transport_tls=transport_tls(p),
            search=search_facts(p),
            warmup_cap_s=warmup_cap_s(p),
            emit_window_s=emit_window_s(p),
            estimated_s=self.estimated_seconds(),
            run_params=p,
            serves_tls=serves_tls(p),
        )

    def estimated_seconds(self) -> float:
        p = self.run_params
        if p.get("kind") == CAPACITY:
            steps = capacity_search(p).worst_case_steps()
            step = capacity_step_s(p) + STEP_OVERHEAD_S
            return SETUP_ESTIMATE_S + float(p.get("warmup_s", 0)) + steps * step
        load = float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0))
        runs = 1 + int(p.get("priming_runs", 0))
        return SETUP_ESTIMATE_S + warmup_cap_s(p) + runs * load


def tuned_run(p: dict[str, Any]) -> dict[str, Any]:
    """A tuned test's parameters (suites/abuse.toml's hardened runs): the groups marked
    `tuned = false` (attacks its tunables do not concern) left out, and its load cut where the
    first of them after its last kept attack would start, so that no time is spent on windows
    with nothing in them. Groups over the whole load (no window of their own, a probe's)
    are kept and end with it."""
    groups = p.get(GROUPS_PARAM)
    if not groups or all(g.get("tuned", True) for g in groups):
        return p
    kept = [g for g in groups if g.get("tuned", True)]
    last = max((float(g["stop_s"]) for g in kept if "stop_s" in g), default=0.0)
    later = [float(g.get("start_s", 0)) for g in groups if not g.get("tuned", True)]
    end = min((s for s in later if s >= last), default=None)
    if end is None or end >= float(p.get("duration_s", 0)) or end <= 0:
        return {**p, GROUPS_PARAM: kept}
    return {**p, GROUPS_PARAM: kept, "duration_s": end}


def search_facts(p: dict[str, Any]) -> SearchFacts | None:
    """A capacity scenario's search, from its (checked) parameters; None for a test."""
    if p.get("kind") != CAPACITY:
        return None
    return SearchFacts(capacity_search(p), capacity_step_s(p), is_push_search(p))


def is_push_search(p: dict[str, Any]) -> bool:
    """A capacity search over subscribers held (push), not over an offered rate."""
    return p.get("kind") == CAPACITY and p.get("behaviour") in PUSH_BEHAVIOURS


def capacity_search(p: dict[str, Any]) -> capacity.Search:
    """A capacity scenario's search, from its (checked) parameters: over whole clients for
    push, over the offered rate for requests."""
    if is_push_search(p):
        return capacity.Search(float(p["start_clients"]), float(p["max_clients"]), whole=True)
    return capacity.Search(float(p["start_rate"]), float(p["max_rate"]))


def capacity_step_s(p: dict[str, Any]) -> float:
    """One step's load: a push step ramps and holds its clients, a request step runs
    `step_s` at its rate."""
    if is_push_search(p):
        return float(p.get("ramp_up_s", 0)) + float(p["duration_s"])
    return float(p.get("step_s", DEFAULT_STEP_S))


def speaks_tls(p: dict[str, Any]) -> bool:
    """Whether the test's connections are TLS: HTTPS/WSS, HTTP/2 over TLS, RFC 5425."""
    if p.get("behaviour") == "syslog":
        return p.get("syslog_transport") == SYSLOG_TLS
    return transport_tls(p)


def serves_tls(p: dict[str, Any]) -> bool:
    """Whether the server is to serve TLS in the test: its connections are, or a client
    group's over a transport of its own."""
    return speaks_tls(p) or any(transport_tls(g) for g in p.get(GROUPS_PARAM) or [])


def transport_tls(p: dict[str, Any]) -> bool:
    """Whether the test's `transport` is TLS: HTTPS/WSS or HTTP/2 over TLS."""
    return p.get("transport", CLEAR) in TLS_TRANSPORTS


def with_tls_defaults(p: dict[str, Any]) -> dict[str, Any]:
    """A TLS test's parameters with every TLS setting written out."""
    return {**TLS_DEFAULTS, **p} if serves_tls(p) else p


def warmup_cap_s(p: dict[str, Any]) -> float:
    """The longest a test's warm-up may run: its `warmup_max_s`, else the default cap, never
    below its `warmup_s`; 0 for a test without a warm-up."""
    floor = float(p.get("warmup_s", 0))
    if not floor and "warmup_max_s" not in p:
        return 0.0
    return max(floor, float(p.get("warmup_max_s", DEFAULT_WARMUP_MAX_S)))


def emit_window_s(p: dict[str, Any]) -> tuple[float, float] | None:
    """(end of the ramp, the emitters' intended stop), in seconds from the load's start, of a
    push test whose emitters the runner stops before the clients leave; None otherwise."""
    if not p.get("emit_interval_ms"):
        return None
    held = float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0))
    if held <= 2 * QUIET_END_S:
        return None
    return float(p.get("ramp_up_s", 0)), held - QUIET_END_S
