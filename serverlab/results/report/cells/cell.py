"""Cells, the one computation every figure of a report or a comparison is rendered from.

A cell is one metric of one scenario for one contestant (and its tunables): the values of
the tests it summarizes, their median and interval, its n, and the flags of those tests
that touch that metric (``Flag.figures``). The terminal summary, the HTML summary,
``report --json``, ``compare`` and ``compare --json`` all render cells made here, so no
two of them can disagree about a figure, its n or its flags."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.formatting import format_cell
from serverlab.results.report.cells.scenarios import (
    comparison_key,
    paired_arm,
    scenario_key,
    scenario_labels,
)
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import METRICS, SUMMARIZED_STATUSES
from serverlab.results.report.flags.validity import validity_flags


@dataclass(frozen=True)
class CellFlag:
    """One flag of a cell and the repeats (r1, r2, ...) that carry it."""

    code: str
    text: str
    repeats: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"code": self.code, "text": self.text, "repeats": list(self.repeats)}


@dataclass(frozen=True)
class Cell:
    scenario: str  # the scenario's label
    key: str  # the grouping key: scenario and parameters, and contestant and tunables
    contestant: str
    tunables: str
    metric: Figure
    values: tuple[float, ...]
    summary: stats.Summary
    flags: tuple[CellFlag, ...]
    arm: str = ""  # a paired run's arm ('A', 'B', "A'"); its label says it too
    # Of ``values``, those of repeats no flag of the cell touches: what a verdict compares
    # (None: all of them, for a cell made without its tests).
    unflagged: tuple[float, ...] | None = None
    # The repeats whose values a flag took out of ``unflagged``, with the flags' codes:
    # ("r3", "machine-busy").
    dropped: tuple[tuple[str, str], ...] = ()
    # Each unflagged value's share of its test's ceiling (``Figure.ceiling``): 0.97 is 97 %
    # of the CPU the test allowed; None where the test has no ceiling.
    ceiling_shares: tuple[float | None, ...] = ()
    # Why the cell has no figure, where none of its tests can have one by design
    # (``Figure.absent``: "n/a: no held connections"); "" otherwise.
    absent: str = ""

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def compared(self) -> tuple[float, ...]:
        """The values a verdict compares: the unflagged repeats'."""
        return self.values if self.unflagged is None else self.unflagged

    def text(self, compact: bool = False) -> tuple[str, str]:
        """(median, interval and n) as the tables print them; why there is no figure, where
        the metric does not apply to the cell's tests."""
        if self.absent and self.summary.n == 0:
            return self.absent, ""
        return format_cell(self.summary, compact)

    def as_dict(self) -> dict:
        summary, interval = self.summary, self.summary.interval
        said = {"not_applicable": self.absent} if self.absent and summary.n == 0 else {}
        return {
            "scenario": self.scenario,
            "arm": self.arm,
            "contestant": self.contestant,
            "tunables": self.tunables,
            "metric": self.metric.name,
            "label": self.metric.label,
            "unit": self.metric.unit,
            "n": summary.n,
            "median": None if math.isnan(summary.median) else summary.median,
            "interval": None
            if interval is None
            else {"low": interval.low, "high": interval.high, "coverage": interval.coverage},
            "values": list(self.values),
            "unflagged": list(self.compared),
            "dropped": [{"repeat": r, "flags": codes} for r, codes in self.dropped],
            "flags": [flag.as_dict() for flag in self.flags],
            "window": self.metric.window,
            "source": self.metric.source,
            **said,
        }


def tunable_text(test: RecordedTest) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(test.tunables.items()))


def cell_flags(tests: Sequence[RecordedTest], metric: Figure) -> tuple[CellFlag, ...]:
    """The flags of these tests that touch the figure, each once, with its repeats."""
    return flags_touching(tests, metric.flag_names)


def flags_touching(tests: Sequence[RecordedTest], names) -> tuple[CellFlag, ...]:
    """The flags of these tests that touch any of the metrics named (a figure that reads
    several), each once, with its repeats."""
    repeats: dict[tuple[str, str], list[str]] = {}
    for test in tests:
        for flag in validity_flags(test):
            if any(flag.touches(name) for name in names):
                repeats.setdefault((flag.code, flag.text), []).append(f"r{test.repeat_index + 1}")
    return tuple(CellFlag(code, text, tuple(r)) for (code, text), r in sorted(repeats.items()))


def metric_values(tests: Sequence[RecordedTest], metric: Figure) -> tuple[float, ...]:
    values = (metric.of(t) for t in tests)
    return tuple(v for v in values if v is not None and not math.isnan(v))


def make_cell(tests: Sequence[RecordedTest], metric: Figure, scenario: str, key: str) -> Cell:
    """The cell of one group of tests: only summarized (ok) tests give values and flags; the
    others are counted and flagged on their row, not inside a figure they are not part of."""
    used = [t for t in tests if t.status in SUMMARIZED_STATUSES]
    values = metric_values(used, metric)
    unflagged, dropped, shares = _unflagged(used, metric)
    return Cell(
        scenario=scenario,
        key=key,
        contestant=", ".join(dict.fromkeys(t.contestant for t in tests)),
        tunables="; ".join(dict.fromkeys(tunable_text(t) for t in tests)),
        metric=metric,
        values=values,
        summary=stats.summarize(values),
        flags=cell_flags(used, metric),
        # One key, one arm (serverlab.results.report.cells.scenarios.scenario_key).
        arm=paired_arm(tests[0]) if tests else "",
        unflagged=unflagged,
        dropped=dropped,
        ceiling_shares=shares,
        absent=_absent(used or list(tests), metric),
    )


def _absent(tests: Sequence[RecordedTest], metric: Figure) -> str:
    """The reason every one of these tests gives for having no value of the metric (by
    design, ``Figure.absent``), when they all give the same one; "" otherwise."""
    if metric.absent is None or not tests:
        return ""
    reasons = {metric.absent(t) for t in tests}
    return reasons.pop() if len(reasons) == 1 and None not in reasons else ""


def _unflagged(tests: Sequence[RecordedTest], metric: Figure):
    """(the values of tests no flag touching the metric qualifies, ("r3", "machine-busy")
    for each test with a value that one does, each unflagged value's share of its
    ceiling)."""
    values, dropped, shares = [], [], []
    for test in tests:
        value = metric.of(test)
        if value is None or math.isnan(value):
            continue
        codes = sorted({f.code for f in validity_flags(test) if f.touches(metric.name)})
        if codes:
            dropped.append((f"r{test.repeat_index + 1}", ", ".join(codes)))
            continue
        values.append(value)
        ceiling = metric.ceiling(test) if metric.ceiling else None
        shares.append(value / ceiling if ceiling else None)
    return tuple(values), tuple(dropped), tuple(shares)


def grouped(tests: Sequence[RecordedTest], with_contestant: bool = True) -> dict[str, list]:
    """Tests by comparison key (scenario and parameters, and contestant and tunables when
    ``with_contestant``), in the order they first appear."""
    groups: dict[str, list[RecordedTest]] = {}
    for test in tests:
        groups.setdefault(comparison_key(test, with_contestant), []).append(test)
    return groups


def cells_of(
    tests: Sequence[RecordedTest],
    metrics: Sequence[Figure] = METRICS,
    with_contestant: bool = True,
    labels: dict[str, str] | None = None,
) -> list[Cell]:
    """Every cell of the tests: per group (see ``grouped``), one per metric, in order."""
    labels = labels or scenario_labels(list(tests))
    return [
        make_cell(group, metric, labels[scenario_key(group[0])], key)
        for key, group in grouped(tests, with_contestant).items()
        for metric in metrics
    ]
