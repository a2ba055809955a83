"""A capacity search's execution: the steps of serverlab.base.capacity run on one server.
Two uses: a request search steps the open-loop rate, a push search the clients held.

The executor starts the server once, smoke-checks and warms it with the plan's warm-up, and
hands this module a way to run one engine load under its monitor. Each step is the measured
plan (the open-loop pacer) with its rate set to the step's level, `step_s` long; the server is
let settle before each step, so that the warm-up's or a failed step's backlog does not
spill into it. Every
step's figures are stored with the test (`run_info["capacity"]`), so that the report can draw
latency against the offered rate; the test's own summary, intervals and kernel window are the
knee's step (or, when no step held, the first).

A step's figures, each with its window and source:
- `answered_per_s`: the engine's answers ÷ its run's duration (the engine, over the step);
- `errors`, `requests`: the engine's failed attempts and finished attempts over the step;
- `p50_ms`, `p99_ms`: the engine's latency, from each arrival's intended send time (open loop);
- `achieved_rate`, `lag_p99_ms`: the engine's attempts started per second and how late it sent
  against its schedule (the engine's own pace, not the server's);
- `cpu_us_per_request`: the server tree's CPU time over the kernel window of the step (procfs,
  opened just before the engine starts and closed once it stopped) ÷ the answers in it;
- `other_cpu_percent`: CPU used by processes other than serverlab's over that window; above the
  machine-busy threshold a failed step's reason says so.

A push step is the measured plan with its users pacer ramping and holding the step's clients
while the emitters run (set afresh before each step, cleared at the plan's intended stop,
as in a push test), judged by serverlab.base.capacity.holds over its own window: the cycles
created between the end of its ramp and the emitters' intended stop
(serverlab.results.report.figures.push, the same reading as a push test's). Its figures:
- `clients`; `admitted`: the engine's open connections at the end of the ramp;
  `registered`: the subscribers the server delivered the window's first cycle to (its own
  snapshot total);
- `cycles`, `completeness`: the window's cycles, and the deliveries the clients received of
  them (at most one per client a cycle) ÷ cycles × clients; `worst_cycle`: the least share;
- `p50_ms`, `p99_ms`: delivery delay over the window's cycles (the engine's per-cycle
  histograms, added), on the server's clock;
- `errors`, `requests`: the engine's failed and finished connection attempts over the step;
- `cpu_us_per_event`: the server tree's CPU over the step's kernel window (ramp included) ÷
  every delivery the clients received in the step.
Only the kept step's control calls stay in `run_info["control_calls"]`: a step past the
knee is late by design, and its lateness is in its figures, not a flag on the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from serverlab.base import capacity
from serverlab.base.engine_facts import FACTS, search_settings
from serverlab.results.records import Crash, RecordedTest
from serverlab.results.report.figures import push
from serverlab.run.execution.records import put_load
from serverlab.run.execution.testplan import CLIENTS_LEVEL, TestPlan
from serverlab.run.execution.traffic import LoadResult
from serverlab.run.execution.validity import MACHINE_BUSY_PERCENT

# Pacer -> the setting each step of a search sets to its level: the engine's facts.
SEARCH_SETTINGS = search_settings(FACTS)

# Before each step, so that the warm-up's or a failed step's queued requests are served
# before the step's clock starts (serverlab.run.plan.suite.permutation.STEP_OVERHEAD_S counts it).
SETTLE_S = 1.0

RunStep = Callable[[dict[str, Any], str], tuple[LoadResult, Crash | None]]


class _Crashed(Exception):
    """The server died during a step: the search stops with what it has."""


class _Steps:
    def __init__(self, run_step: RunStep, measured: dict, plan: TestPlan, monitor, run_info):
        self.run_step, self.measured, self.plan, self.monitor = run_step, measured, plan, monitor
        self.run_info = run_info
        self.search = plan.capacity
        self.loads: dict[float, tuple[LoadResult, dict | None]] = {}
        self.calls: dict[float, list[dict]] = {}  # each level's control calls, stamped
        self.windows: dict[float, dict] = {}  # a push step's window (Unix ms, server's clock)
        self.done: list[capacity.StepResult] = []
        self.crash: Crash | None = None

    @property
    def push(self) -> bool:
        return self.search.level == CLIENTS_LEVEL

    def step(self, level: float) -> capacity.StepResult:
        time.sleep(SETTLE_S)
        made = len(self.run_info.get("control_calls", []))
        result, crash = self.run_step(self._engine_plan(level), f"step-{len(self.done)}")
        calls = self.run_info.get("control_calls", [])
        self.calls[level], self.run_info["control_calls"] = calls[made:], calls[:made]
        kernel = self.monitor.window.figures
        self.loads[level] = (result, kernel)
        if self.push:
            figures = self._push_figures(level, result, kernel)
            reason = push_judge(level, figures, self.search.p99_bound_ms)
        else:
            figures = step_figures(result.summary, kernel)
            reason = judge(level, figures, self.search.p99_bound_ms)
        reason = "server crashed" if crash else reason
        done = capacity.StepResult(level, not reason, reason, figures)
        self.done.append(done)
        if crash is not None:
            self.crash = crash
            raise _Crashed
        return done

    def _engine_plan(self, level: float) -> dict:
        """The measured plan at one level: the setting the engine says a search steps under
        its pacer set to the level (its rate, `step_s` long; or its clients, ramped and held
        as the plan's users pacer says)."""
        pacer = self.measured["pacer"]
        stepped = {**pacer, SEARCH_SETTINGS[pacer["kind"]]: int(level) if self.push else level}
        if self.push:
            return {**self.measured, "pacer": stepped, "connections": int(level)}
        return {**self.measured, "pacer": stepped, "duration_s": self.search.step_s}

    def _push_figures(self, level: float, result: LoadResult, kernel: dict | None) -> dict:
        window = step_window(self.plan, result.summary, self.run_info.get("emit_window"))
        if window is not None:
            self.windows[level] = window
        return push_step_figures(self.plan.params, int(level), result, kernel, window)

    def keep(self, level: float) -> LoadResult:
        """The kept step's load, kernel figures, control calls and window become the test's."""
        result, kernel = self.loads[level]
        self.monitor.window.figures = kernel
        self.run_info["control_calls"] = self.run_info.get("control_calls", []) + self.calls[level]
        if level in self.windows:
            self.run_info["emit_window"] = self.windows[level]
        return result


def search_steps(
    run_step: RunStep, measured: dict, plan: TestPlan, monitor, run_info: dict
) -> tuple[LoadResult, Crash | None]:
    """Runs the search; its steps go in `run_info["capacity"]`. Returns the load result the
    test keeps (the knee's step, else the first) and the server's crash, if it died."""
    steps = _Steps(run_step, measured, plan, monitor, run_info)
    search = plan.capacity
    spec = capacity.Search(
        search.start, search.maximum, search.tolerance, whole=search.level == CLIENTS_LEVEL
    )
    try:
        outcome = capacity.search(spec, steps.step)
    except _Crashed:
        outcome = capacity.SearchOutcome(steps.done, capacity.knee(steps.done), "crashed")
    run_info["capacity"] = {
        **outcome.as_dict(),
        "level": search.level,
        "p99_bound_ms": search.p99_bound_ms,
        "step_s": search.step_s,
        "tolerance": search.tolerance,
        "maximum": search.maximum,
    }
    kept = outcome.knee if outcome.knee is not None else outcome.steps[0].level
    return steps.keep(kept), steps.crash


def judge(level: float, figures: dict[str, Any], bound_ms: float) -> str:
    """The request rule (serverlab.base.capacity.sustains) on one step's figures; a failed
    step on a busy machine says so, since a knee a busy machine set is not the server's."""
    reason = capacity.sustains(
        level,
        figures.get("answered_per_s", 0.0),
        figures.get("errors", 0),
        figures.get("requests", 0),
        figures.get("p99_ms"),
        bound_ms,
    )
    return _busy(reason, figures)


def _busy(reason: str, figures: dict[str, Any]) -> str:
    """A failed step's reason, with the machine's business where others used too much."""
    other = figures.get("other_cpu_percent") or 0.0
    if reason and other > MACHINE_BUSY_PERCENT:
        reason += f" (machine busy: others used {other:.0f} % of a core)"
    return reason


def step_figures(summary: dict | None, kernel: dict | None) -> dict[str, Any]:
    """What one step measured (see the module's docstring for each figure's source)."""
    summary = summary or {}
    latency = summary.get("latency_us") or {}
    answered = int(summary.get("answered", 0))
    figures: dict[str, Any] = {
        "requests": int(summary.get("requests", 0)),
        "answered": answered,
        "errors": sum((summary.get("errors") or {}).values()),
        "answered_per_s": round(float(summary.get("rps", 0.0)), 1),
        "duration_s": summary.get("duration_s"),
        # The engine's pace against its schedule: below the offered rate, it fell behind.
        "achieved_rate": summary.get("achieved_rate"),
        "lag_p99_ms": _ms((summary.get("lag_us") or {}).get("p99")),
        "p50_ms": _ms(latency.get("p50")),
        "p99_ms": _ms(latency.get("p99")),
    }
    kernel = kernel or {}
    ticks, per_s = kernel.get("server_cpu_ticks"), kernel.get("ticks_per_s")
    if ticks is not None and per_s and answered:
        figures["cpu_us_per_request"] = round(ticks / per_s / answered * 1e6, 2)
    figures["server_cpu_percent"] = kernel.get("server_cpu_percent")
    figures["other_cpu_percent"] = kernel.get("other_cpu_percent")
    figures["window_s"] = kernel.get("window_s")
    return figures


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000, 3)


def step_window(plan: TestPlan, summary: dict | None, stamped: dict | None) -> dict | None:
    """A push step's window, Unix ms on the server's clock: from the end of its ramp (the
    engine's start, plus its clock offset, plus the plan's ramp) to the emitters' intended
    stop the executor stamped for the step (its timed clear's due time)."""
    started = (summary or {}).get("started_at_ms")
    if not started or plan.emit_window_s is None or not stamped or "stop_ms" not in stamped:
        return None
    offset = summary.get("clock_offset_ms") or 0.0
    start = round(started + offset + plan.emit_window_s[0] * 1000, 1)
    return {"start_ms": start, "stop_ms": stamped["stop_ms"]}


def push_step_figures(
    params: dict, clients: int, result: LoadResult, kernel: dict | None, window: dict | None
) -> dict[str, Any]:
    """What one push step measured, read as a push test's figures are (module docstring)."""
    view = RecordedTest(
        run_id=0,
        permutation_key="",
        contestant="",
        repeat_index=0,
        status="ok",
        started_at=0.0,
        ended_at=0.0,
        params={**params, "clients": clients},
        run_info={"emit_window": window} if window else {},
    )
    put_load(view, result)
    summary = view.summary or {}
    shares = [share for _, share in push.completeness(view)]
    received = sum(c.received for c in push.cycles(view))
    figures: dict[str, Any] = {
        "clients": clients,
        "admitted": push.admitted(view),
        "registered": push.registered(view),
        "cycles": len(shares),
        "completeness": round(sum(shares) / len(shares), 5) if shares else None,
        "worst_cycle": round(min(shares), 5) if shares else None,
        "errors": sum((summary.get("errors") or {}).values()),
        "requests": int(summary.get("requests", 0)),
        "p50_ms": _ms(push.delay_us(view, "p50")),
        "p99_ms": _ms(push.delay_us(view, "p99")),
    }
    kernel = kernel or {}
    ticks, per_s = kernel.get("server_cpu_ticks"), kernel.get("ticks_per_s")
    if ticks is not None and per_s and received:
        figures["cpu_us_per_event"] = round(ticks / per_s / received * 1e6, 2)
    figures["server_cpu_percent"] = kernel.get("server_cpu_percent")
    figures["other_cpu_percent"] = kernel.get("other_cpu_percent")
    return figures


def push_judge(clients: float, figures: dict[str, Any], bound_ms: float) -> str:
    """The push rule (serverlab.base.capacity.holds) on one step's figures; a failed step on
    a busy machine says so."""
    reason = capacity.holds(
        int(clients),
        figures.get("admitted"),
        figures.get("completeness"),
        figures.get("errors", 0),
        figures.get("requests", 0),
        figures.get("p99_ms"),
        bound_ms,
    )
    return _busy(reason, figures)
