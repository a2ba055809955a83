"""A capacity search's execution: the steps of serverlab.base.capacity run on one server.

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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from serverlab.base import capacity
from serverlab.results.store import Crash
from serverlab.run.execution.testplan import CapacityPlan
from serverlab.run.execution.traffic import LoadResult
from serverlab.run.execution.validity import MACHINE_BUSY_PERCENT

# Before each step, so that the warm-up's or a failed step's queued requests are served
# before the step's clock starts (serverlab.run.plan.suite.STEP_OVERHEAD_S counts it).
SETTLE_S = 1.0

RunStep = Callable[[dict[str, Any], str], tuple[LoadResult, Crash | None]]


class _Crashed(Exception):
    """The server died during a step: the search stops with what it has."""


class _Steps:
    def __init__(self, run_step: RunStep, measured: dict, plan: CapacityPlan, monitor):
        self.run_step, self.measured, self.plan, self.monitor = run_step, measured, plan, monitor
        self.loads: dict[float, tuple[LoadResult, dict | None]] = {}
        self.done: list[capacity.StepResult] = []
        self.crash: Crash | None = None

    def step(self, level: float) -> capacity.StepResult:
        time.sleep(SETTLE_S)
        engine_plan = {
            **self.measured,
            "pacer": {**self.measured["pacer"], "rate": level},
            "duration_s": self.plan.step_s,
        }
        result, crash = self.run_step(engine_plan, f"step-{len(self.done)}")
        kernel = self.monitor.window.figures
        self.loads[level] = (result, kernel)
        figures = step_figures(result.summary, kernel)
        reason = "server crashed" if crash else judge(level, figures, self.plan.p99_bound_ms)
        done = capacity.StepResult(level, not reason, reason, figures)
        self.done.append(done)
        if crash is not None:
            self.crash = crash
            raise _Crashed
        return done


def search_steps(
    run_step: RunStep, measured: dict, plan: CapacityPlan, monitor, run_info: dict
) -> tuple[LoadResult, Crash | None]:
    """Runs the search; its steps go in `run_info["capacity"]`. Returns the load result the
    test keeps (the knee's step, else the first) and the server's crash, if it died."""
    steps = _Steps(run_step, measured, plan, monitor)
    spec = capacity.Search(plan.start, plan.maximum, plan.tolerance)
    try:
        outcome = capacity.search(spec, steps.step)
    except _Crashed:
        outcome = capacity.SearchOutcome(steps.done, capacity.knee(steps.done), "crashed")
    run_info["capacity"] = {
        **outcome.as_dict(),
        "p99_bound_ms": plan.p99_bound_ms,
        "step_s": plan.step_s,
        "tolerance": plan.tolerance,
        "maximum": plan.maximum,
    }
    kept = outcome.knee if outcome.knee is not None else outcome.steps[0].level
    result, kernel = steps.loads[kept]
    monitor.window.figures = kernel  # the test's kernel figures are its kept step's
    return result, steps.crash


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
