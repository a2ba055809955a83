"""The capacity section: how much before each architecture stops holding up (issue 32).

From the capacity searches' steps (`run_info["capacity"]`, serverlab.run.execution.capacity),
per scenario:
- each contestant's p50 and p99 latency against the offered rate, one line per test, its knee
  marked and the bound drawn;
- each test's knee: the highest offered rate sustained (answers >= 99 % of offered, errors <=
  0.1 %, p99 <= the bound) below the lowest that was not (serverlab.base.capacity.knee);
- efficiency at one rate: the highest step every contestant sustained in every one of its
  tests, below its knee. There, each contestant's server CPU per request (the kernel's CPU of
  the server tree over that step's window ÷ the engine's answers in it) and its p99 (engine,
  from each arrival's intended send time), the median over its tests, as HttpArena's
  fixed-rate profiles compare servers at a pinned offered rate.

A push search (push-modern's capacity scenarios) is read the same way over the subscribers
held instead of the offered rate: its delivery delay p50 and p99 against the subscribers,
the knee (the most subscribers held: every client admitted, 99 % of the window's deliveries
received, errors <= 0.1 %, delay p99 <= the bound), and at the most subscribers every
contestant held, its server CPU per delivered event over the step and its delay p99.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from serverlab.base.capacity import MAX_REACHED
from serverlab.results.records import RecordedTest
from serverlab.results.report.charts.chart import PALETTE, Chart, finish, flags_of, test_label
from serverlab.results.report.figures.table import SUMMARIZED_STATUSES
from serverlab.results.report.flags.validity import validity_flags


@dataclass
class KneeRow:
    contestant: str
    repeat: int
    knee: float | None
    stop: str
    text: str
    steps: int
    flags: list[str] = field(default_factory=list)


@dataclass
class CommonRow:
    contestant: str
    tests: int
    cpu_us: float | None  # per request, or per delivered event for push (``Words.cpu``)
    p99_ms: float | None
    flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Words:
    """How one use of the search names its level and figures."""

    level: str  # "rate" or "clients", as the search stored it
    axis: str
    knee: str
    unit: str  # after a level's number
    at: str  # "At {level} ..." before the comparison
    latency: str
    cpu: str  # the step figure of CPU per unit of work
    cpu_label: str


RATE_WORDS = Words(
    "rate",
    "offered rate (requests/s)",
    "knee (offered rate sustained)",
    "/s",
    "requests/s offered, which every contestant sustained",
    "p99",
    "cpu_us_per_request",
    "server CPU per request",
)
CLIENTS_WORDS = Words(
    "clients",
    "subscribers held",
    "knee (subscribers held)",
    " clients",
    "subscribers, which every contestant held",
    "delivery delay p99",
    "cpu_us_per_event",
    "server CPU per delivered event (over the step)",
)


@dataclass
class CapacityGroup:
    scenario: str
    behaviour: str
    words: Words
    bound_ms: float
    knees: list[KneeRow]
    common_rate: float | None
    common: list[CommonRow]
    chart: Chart

    def as_dict(self) -> dict[str, Any]:
        clients = self.words is CLIENTS_WORDS
        return {
            "scenario": self.scenario,
            "behaviour": self.behaviour,
            "level": self.words.level,
            "p99_bound_ms": self.bound_ms,
            "knees": [
                {
                    "contestant": k.contestant,
                    "repeat": k.repeat,
                    "knee_clients" if clients else "knee_rate": k.knee,
                    "stop": k.stop,
                    "steps": k.steps,
                    "flags": k.flags,
                }
                for k in self.knees
            ],
            "common_clients" if clients else "common_rate": self.common_rate,
            "at_common_clients" if clients else "at_common_rate": [
                {
                    "contestant": c.contestant,
                    "tests": c.tests,
                    self.words.cpu: c.cpu_us,
                    "p99_ms": c.p99_ms,
                    "flags": c.flags,
                }
                for c in self.common
            ],
        }


def is_capacity_search(test: RecordedTest) -> bool:
    return bool(test.run_info.get("capacity", {}).get("steps"))


def capacity_groups(tests: list[RecordedTest]) -> list[CapacityGroup]:
    """One group per capacity scenario, in the order the tests ran."""
    by_scenario: dict[str, list[RecordedTest]] = {}
    for test in tests:
        if is_capacity_search(test):
            by_scenario.setdefault(test.scenario, []).append(test)
    return [_group(name, mine) for name, mine in by_scenario.items()]


def words_of(test: RecordedTest) -> Words:
    """A search over clients (push) or over the offered rate (requests, and searches stored
    before push had one)."""
    level = test.run_info["capacity"].get("level", "rate")
    return CLIENTS_WORDS if level == CLIENTS_WORDS.level else RATE_WORDS


def _group(scenario: str, tests: list[RecordedTest]) -> CapacityGroup:
    bound = float(tests[0].run_info["capacity"]["p99_bound_ms"])
    words = words_of(tests[0])
    kept = [t for t in tests if t.status in SUMMARIZED_STATUSES]
    rate = common_rate(kept)
    return CapacityGroup(
        scenario=scenario,
        behaviour=str(tests[0].params.get("behaviour", "")),
        words=words,
        bound_ms=bound,
        knees=[_knee_row(t, words) for t in tests],
        common_rate=rate,
        common=[] if rate is None else _common_rows(kept, rate, words),
        chart=_chart(scenario, tests, bound, words),
    )


def knee_text(knee: float | None, stop: str, first: dict, words: Words) -> str:
    """A search's answer in words: its knee, or why it has none or only a lower bound."""
    if knee is None:
        return f"< {first['level']:,.0f}{words.unit} (the first step failed: {first['reason']})"
    if stop == MAX_REACHED:
        return f"≥ {knee:,.0f}{words.unit} (the search's maximum)"
    return f"{knee:,.0f}{words.unit}"


def _knee_row(test: RecordedTest, words: Words) -> KneeRow:
    found = test.run_info["capacity"]
    knee, stop, steps = found.get("knee"), found.get("stop", ""), found["steps"]
    text = knee_text(knee, stop, steps[0], words)
    if test.status not in SUMMARIZED_STATUSES:
        text += f" ({test.status})"
    return KneeRow(
        test.contestant,
        test.repeat_index + 1,
        knee,
        stop,
        text,
        len(steps),
        [flag.text for flag in validity_flags(test)],
    )


def held_levels(test: RecordedTest) -> set[float]:
    """The levels a test sustained at or below its knee."""
    found = test.run_info["capacity"]
    knee = found.get("knee")
    if knee is None:
        return set()
    return {s["level"] for s in found["steps"] if s["sustained"] and s["level"] <= knee}


def common_rate(tests: list[RecordedTest]) -> float | None:
    """The highest step every contestant sustained in every one of its tests."""
    if not tests:
        return None
    by_contestant: dict[str, set[float]] = {}
    for test in tests:
        levels = held_levels(test)
        mine = by_contestant.get(test.contestant)
        by_contestant[test.contestant] = levels if mine is None else mine & levels
    shared = set.intersection(*by_contestant.values())
    return max(shared, default=None)


def _common_rows(tests: list[RecordedTest], rate: float, words: Words) -> list[CommonRow]:
    rows = []
    for contestant in dict.fromkeys(t.contestant for t in tests):
        mine = [t for t in tests if t.contestant == contestant]
        steps = [s for t in mine for s in t.run_info["capacity"]["steps"] if s["level"] == rate]
        rows.append(
            CommonRow(
                contestant,
                len(mine),
                _median(s.get(words.cpu) for s in steps),
                _median(s.get("p99_ms") for s in steps),
                [f"{test_label(t)}: {flag.text}" for t in mine for flag in validity_flags(t)],
            )
        )
    return rows


def _median(values) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), 3) if kept else None


def _chart(scenario: str, tests: list[RecordedTest], bound_ms: float, words: Words) -> Chart:
    fig = go.Figure()
    colours = {
        c: PALETTE[i % len(PALETTE)]
        for i, c in enumerate(dict.fromkeys(t.contestant for t in tests))
    }
    for test in tests:
        _curves(fig, test, colours[test.contestant], words)
    if fig.data:
        fig.add_hline(y=bound_ms, line_dash="dash", line_color="#888", annotation_text="bound")
        fig.update_xaxes(type="log")
        fig.update_yaxes(type="log")
    if words is CLIENTS_WORDS:
        title = f"{scenario}: delivery delay against the subscribers held"
        caption = (
            "Delivery delay over each step's window (its cycles between the end of the ramp and "
            "the emitters' stop; the engine's per-cycle histograms, on the server's clock), "
            "solid p99, dotted p50, one line per test; a star marks the test's knee (the most "
            f"subscribers held below any level that was not); dashed: the {bound_ms:g} ms bound."
        )
        y_axis = "delivery delay (ms)"
    else:
        title = f"{scenario}: latency against the offered rate"
        caption = (
            "Engine latency from each arrival's intended send time at each step of the search, "
            "solid p99, dotted p50, one line per test; a star marks the test's knee (the highest "
            f"offered rate sustained below any that was not); dashed: the {bound_ms:g} ms bound."
        )
        y_axis = "latency (ms)"
    chart = Chart(f"capacity-{scenario}", title, caption, flags=flags_of(tests))
    return finish(chart, fig, (words.axis, y_axis), "no step recorded")


def _curves(fig: go.Figure, test: RecordedTest, colour: str, words: Words) -> None:
    found = test.run_info["capacity"]
    steps = sorted(found["steps"], key=lambda s: s["level"])
    label = test_label(test)
    for name, dash in (("p99", "solid"), ("p50", "dot")):
        fig.add_trace(
            go.Scatter(
                x=[s["level"] for s in steps],
                y=[s.get(f"{name}_ms") for s in steps],
                mode="lines+markers",
                name=f"{label} {name}",
                line={"color": colour, "dash": dash},
                text=[s["reason"] or "sustained" for s in steps],
                hovertemplate="%{x:,.0f}" + words.unit + ": %{y:.3g} ms<br>%{text}",
            )
        )
    knee = found.get("knee")
    at = next((s for s in steps if s["level"] == knee), None)
    if at is not None and at.get("p99_ms") is not None:
        fig.add_trace(
            go.Scatter(
                x=[knee],
                y=[at["p99_ms"]],
                mode="markers",
                marker={"symbol": "star", "size": 14, "color": colour},
                name=f"{label} knee {knee:,.0f}{words.unit}",
            )
        )
