"""``serverlab compare A B``: medians, their ratio and a verdict per scenario and metric.

A and B are selections (see ``serverlab.results.report.selection``): two contestant names
compare contestants scenario by scenario within the latest suite; ``run:3 run:5`` compares
each contestant with itself across two runs. Figures are medians over repeats, never
best-of-N; the ratio A/B comes with its distribution-free interval, and the verdict from a
two-sided Mann-Whitney test where both sides have enough repeats for it to say anything
(``serverlab.results.stats``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from serverlab.base import terminal
from serverlab.results import stats
from serverlab.results.report.metrics import (
    METRICS_BY_NAME,
    SUMMARIZED_STATUSES,
    Metric,
    comparison_key,
    coverage_note,
    format_cell,
    scenario_key,
    scenario_labels,
)
from serverlab.results.report.selection import SelectionError, parse_selection, select_tests
from serverlab.results.store import RecordedTest, Store

DEFAULT_METRICS = ("rps", "p50", "p99", "errors", "cpu", "rss")


@dataclass(frozen=True)
class ComparisonRow:
    scenario: str
    contestants: str
    metric: Metric
    a: stats.Summary
    b: stats.Summary
    verdict: stats.Verdict
    test: stats.MannWhitney | None
    ratio: stats.Ratio | None = None

    @property
    def words(self) -> str:
        if self.verdict is stats.Verdict.BETTER:
            return self.metric.better
        if self.verdict is stats.Verdict.WORSE:
            return self.metric.worse
        if self.verdict is stats.Verdict.TOO_FEW:
            ns = "each" if self.a.n == self.b.n else "and"
            counts = f"n={self.a.n} {ns}" if ns == "each" else f"n={self.a.n} and {self.b.n}"
            return f"{self.verdict.value} ({counts}; {stats.MIN_REPEATS_TO_TEST} or more needed)"
        return self.verdict.value


def compare(
    db_path: str | Path,
    side_a: Iterable[str] | str,
    side_b: Iterable[str] | str,
    metrics: Sequence[str] = DEFAULT_METRICS,
    alpha: float = stats.DEFAULT_ALPHA,
) -> list[ComparisonRow]:
    """Every scenario (or scenario x contestant) that both sides ran, metric by metric."""
    unknown = [m for m in metrics if m not in METRICS_BY_NAME]
    if unknown:
        raise SelectionError(f"unknown metric {', '.join(unknown)} ({', '.join(METRICS_BY_NAME)})")
    selection_a, selection_b = parse_selection(side_a), parse_selection(side_b)
    with Store(db_path, create=False) as store:
        tests_a = select_tests(store, selection_a)
        tests_b = select_tests(store, selection_b)
    sides_are_contestants = len(selection_a.contestants) == len(selection_b.contestants) == 1
    groups_a = _grouped(tests_a, not sides_are_contestants)
    groups_b = _grouped(tests_b, not sides_are_contestants)
    shared = [key for key in groups_a if key in groups_b]
    if not shared:
        raise SelectionError("the two sides ran no scenario in common")
    labels = scenario_labels(tests_a + tests_b)
    rows = []
    for key in shared:
        first = groups_a[key][0]
        scenario = labels[scenario_key(first)]
        contestant = "" if sides_are_contestants else first.contestant
        for name in metrics:
            metric = METRICS_BY_NAME[name]
            values_a, values_b = _values(groups_a[key], metric), _values(groups_b[key], metric)
            if not values_a and not values_b:
                continue  # a figure the scenario has not (a push test's requests/s)
            outcome, test = stats.verdict(values_a, values_b, metric.higher_is_better, alpha)
            summaries = stats.summarize(values_a), stats.summarize(values_b)
            ratio = stats.ratio(values_a, values_b)
            rows.append(
                ComparisonRow(scenario, contestant, metric, *summaries, outcome, test, ratio)
            )
    return rows


def _grouped(tests: list[RecordedTest], with_contestant: bool) -> dict[str, list[RecordedTest]]:
    groups: dict[str, list[RecordedTest]] = {}
    for test in tests:
        groups.setdefault(comparison_key(test, with_contestant), []).append(test)
    return groups


def _values(tests: list[RecordedTest], metric: Metric) -> list[float]:
    values = [metric.of(t) for t in tests if t.status in SUMMARIZED_STATUSES]
    return [v for v in values if v is not None and not math.isnan(v)]


def print_comparison(
    rows: list[ComparisonRow], label_a: str, label_b: str, console: Console | None = None
) -> None:
    """The comparison as a rich table: median [interval] per side, their ratio with its
    interval, the test's p and the verdict. Cells wrap between words only."""
    console = console or terminal.console()
    with_contestant = any(row.contestants for row in rows)
    table = Table(
        title=f"A = {label_a}   vs   B = {label_b}", title_justify="left", box=box.SIMPLE_HEAD
    )
    columns = ["scenario", "contestant", "metric", "A", "B", "A / B", "p", "A is"]
    if not with_contestant:
        columns.remove("contestant")
    for column in columns:
        table.add_column(column)
    for row in rows:
        p_value = "-" if row.test is None else f"{row.test.p_value:.2g}"
        unit = f" ({row.metric.unit})" if row.metric.unit else ""
        cells = [row.scenario, row.contestants, row.metric.label + unit]
        if not with_contestant:
            del cells[1]
        sides = ["\n".join(format_cell(side, compact=True)) for side in (row.a, row.b)]
        table.add_row(*cells, *sides, _ratio_text(row.ratio), p_value, row.words)
    console.print(table)
    console.print(coverage_note([side.n for row in rows for side in (row.a, row.b)]))
    console.print(STATISTICS_NOTE)


STATISTICS_NOTE = (
    f"A / B: the ratio of the medians, with the interval of the ratio from every pair of "
    f"repeats (its coverage in brackets when under 95 %). The verdict is a two-sided "
    f"Mann-Whitney U test at p < 0.05, run where both sides have "
    f"{stats.MIN_REPEATS_TO_TEST} or more repeats; with fewer no p could fall below 0.05, so "
    f"the table says so instead of finding no difference."
)


def _ratio_text(ratio: stats.Ratio | None) -> str:
    if ratio is None:
        return "-"
    interval = ratio.interval
    coverage = "" if interval.reaches_level else f" ({interval.coverage:.0%})"
    return f"{ratio.value:.2f}×\n{interval.low:.2f}–{interval.high:.2f}{coverage}"
