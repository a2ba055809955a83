"""The capacity search (DESIGN.md §12, "Capacity at a bound"), as a pure function.

Given `step(level) -> StepResult`, it finds the highest load level a server sustains: steps
at the start level doubled until one fails or the maximum is reached, then bisection between
the last level sustained and the first that was not, until the two are within the
tolerance (5 %) of the lower. A level is an offered rate for request workloads and a client
count for push; the search does not care which. Nothing here runs a load, reads a clock or
touches a file: the executor gives it a step that does, the report reads its rule back.

The knee is the highest level sustained below the lowest level that was not, so that a
noisy step that passed above a failure does not raise it.

Two uses, one search: request workloads step the offered rate (`sustains`), push workloads
the subscribers held (`holds`: push-modern's capacity scenarios, which were a ladder of
fixed rungs before).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 0.05
# Why a search stopped.
BISECTED = "bisected"  # the knee lies between two steps within the tolerance
MAX_REACHED = "max-reached"  # every doubling held up to the maximum: the knee is at least it
FIRST_FAILED = "first-failed"  # the start level already failed: the knee is below it
# The "sustains" rule for requests: achieved >= 99 % of offered, errors <= 0.1 %, p99 <= bound.
MIN_ACHIEVED = 0.99
MAX_ERROR_SHARE = 0.001
# The push rule: every client admitted, completeness >= 99 % of the deliveries the window's
# cycles owed, errors <= 0.1 %, delivery delay p99 <= bound.
MIN_COMPLETENESS = 0.99


@dataclass(frozen=True)
class StepResult:
    """One step: the level offered, whether it was sustained, why not, and what the caller
    measured (stored with the test so that the report can draw the curve)."""

    level: float
    sustained: bool
    reason: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "sustained": self.sustained,
            "reason": self.reason,
            **self.figures,
        }


@dataclass(frozen=True)
class Search:
    """Where a search starts, how far it may go, and how close it ends. `whole` levels
    (client counts) are rounded to integers."""

    start: float
    maximum: float
    tolerance: float = TOLERANCE
    whole: bool = False

    def __post_init__(self):
        if not (self.start > 0 and self.maximum >= self.start and 0 < self.tolerance < 1):
            raise ValueError(
                f"a search needs 0 < start <= maximum and 0 < tolerance < 1, got "
                f"start {self.start}, maximum {self.maximum}, tolerance {self.tolerance}"
            )

    def doubling(self) -> list[float]:
        """The doubling phase's levels: start, 2 x start, ... and the maximum last."""
        levels, level = [], float(self.start)
        while level < self.maximum:
            levels.append(self._level(level))
            level *= 2
        levels.append(self._level(self.maximum))
        return levels

    def midpoint(self, low: float, high: float) -> float | None:
        """The next bisection level, or None when low and high are within the tolerance
        (or, for whole levels, adjacent)."""
        if high - low <= self.tolerance * low:
            return None
        middle = self._level((low + high) / 2)
        return middle if low < middle < high else None

    def worst_case_steps(self) -> int:
        """The most steps a search can take, for estimates: every doubling level, the last
        one failing, then the bisection of the widest gap (a factor of 2)."""
        levels = self.doubling()
        widest = max(
            (high / low for low, high in zip(levels, levels[1:], strict=False)), default=1.0
        )
        low, high, steps = 1.0, widest, 0
        while high - low > self.tolerance * low:  # every bisection step failing: the longest
            high, steps = (low + high) / 2, steps + 1
        return len(levels) + steps

    def _level(self, level: float) -> float:
        return float(round(level)) if self.whole else float(level)


@dataclass(frozen=True)
class SearchOutcome:
    steps: list[StepResult]
    knee: float | None  # the highest level sustained below any that was not; None: none held
    stop: str  # BISECTED, MAX_REACHED or FIRST_FAILED

    def as_dict(self) -> dict[str, Any]:
        return {
            "knee": self.knee,
            "stop": self.stop,
            "steps": [step.as_dict() for step in self.steps],
        }


def search(spec: Search, step: Callable[[float], StepResult]) -> SearchOutcome:
    """Runs the search: doubling, then bisection to within the tolerance."""
    steps: list[StepResult] = []
    low = high = None
    for level in spec.doubling():
        result = step(level)
        steps.append(result)
        if not result.sustained:
            high = level
            break
        low = level
    if low is None:
        return SearchOutcome(steps, None, FIRST_FAILED)
    if high is None:
        return SearchOutcome(steps, low, MAX_REACHED)
    while (middle := spec.midpoint(low, high)) is not None:
        result = step(middle)
        steps.append(result)
        low, high = (middle, high) if result.sustained else (low, middle)
    return SearchOutcome(steps, knee(steps), BISECTED)


def knee(steps: Iterable[StepResult]) -> float | None:
    """The highest level sustained below the lowest level that was not (a level tried more
    than once counts as sustained only when every try was)."""
    held: dict[float, bool] = {}
    for result in steps:
        held[result.level] = held.get(result.level, True) and result.sustained
    ceiling = min((level for level, ok in held.items() if not ok), default=math.inf)
    below = [level for level, ok in held.items() if ok and level < ceiling]
    return max(below, default=None)


def sustains(
    offered: float,
    answered_per_s: float,
    errors: int,
    requests: int,
    p99_ms: float | None,
    bound_ms: float,
) -> str:
    """The request rule: "" when the step was sustained, else why not, in words."""
    reasons = []
    if answered_per_s < MIN_ACHIEVED * offered:
        reasons.append(f"answered {answered_per_s:,.0f}/s of {offered:,.0f}/s offered")
    if requests == 0 or errors > MAX_ERROR_SHARE * requests:
        share = 100.0 * errors / requests if requests else 100.0
        reasons.append(f"errors {share:.2g} % of {requests:,} requests")
    if p99_ms is None or p99_ms > bound_ms:
        shown = "none" if p99_ms is None else f"{p99_ms:,.3g} ms"
        reasons.append(f"p99 {shown} over the {bound_ms:g} ms bound")
    return "; ".join(reasons)


def holds(
    clients: int,
    admitted: int | None,
    completeness: float | None,
    errors: int,
    attempts: int,
    p99_ms: float | None,
    bound_ms: float,
) -> str:
    """The push rule: "" when the step held its clients, else why not, in words.
    `completeness`: deliveries received ÷ those owed (a share, None: no cycle in the window);
    `attempts`: the clients' connection attempts (errors are counted against them)."""
    reasons = []
    if admitted is None or admitted < clients:
        shown = "none counted" if admitted is None else f"{admitted:,}"
        reasons.append(f"{shown} of {clients:,} clients admitted")
    if completeness is None or completeness < MIN_COMPLETENESS:
        shown = "no cycle in the window" if completeness is None else f"{completeness:.1%}"
        reasons.append(f"completeness {shown}")
    attempts = max(attempts, clients)
    if errors > MAX_ERROR_SHARE * attempts:
        reasons.append(f"errors {100.0 * errors / attempts:.2g} % of {attempts:,} connections")
    if p99_ms is None or p99_ms > bound_ms:
        shown = "none" if p99_ms is None else f"{p99_ms:,.3g} ms"
        reasons.append(f"delay p99 {shown} over the {bound_ms:g} ms bound")
    return "; ".join(reasons)
