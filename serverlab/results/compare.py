"""``serverlab compare A B``: medians, 95 % intervals and a significance verdict per scenario.

A and B are selections (see ``serverlab.results.report.selection``): two contestant names compare
contestants scenario by scenario within the latest suite; ``run:3 run:5`` compares each
contestant with itself across two runs. Figures are medians over repeats, never best-of-N;
the verdict comes from a two-sided Mann-Whitney test (``serverlab.results.stats``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from serverlab.results import stats
from serverlab.base import terminal
from serverlab.results.report.metrics import (
    METRICS_BY_NAME,
    SUMMARIZED_STATUSES,
    Metric,
    comparison_key,
    format_summary,
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

    @property
    def words(self) -> str:
        if self.verdict is stats.Verdict.BETTER:
            return self.metric.better
        if self.verdict is stats.Verdict.WORSE:
            return self.metric.worse
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
            outcome, test = stats.verdict(values_a, values_b, metric.higher_is_better, alpha)
            summaries = stats.summarize(values_a), stats.summarize(values_b)
            rows.append(ComparisonRow(scenario, contestant, metric, *summaries, outcome, test))
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
    """The comparison as a rich table: median [95 % interval] per side, p-value, verdict."""
    console = console or terminal.console()
    with_contestant = any(row.contestants for row in rows)
    table = Table(title=f"A = {label_a}   vs   B = {label_b}", title_justify="left")
    columns = ["scenario", "contestant", "metric", "A", "B", "p", "A is"]
    if not with_contestant:
        columns.remove("contestant")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        p_value = "-" if row.test is None else f"{row.test.p_value:.3g}"
        unit = f" ({row.metric.unit})" if row.metric.unit else ""
        cells = [row.scenario, row.contestants, row.metric.label + unit]
        if not with_contestant:
            del cells[1]
        sides = [_two_lines(format_summary(side)) for side in (row.a, row.b)]
        table.add_row(*cells, *sides, p_value, row.words)
    console.print(table)
    console.print(
        "Median, then [95 % interval of the median] over repeats; a percentage after the "
        "interval is its real coverage when there are too few repeats for 95 %. Two-sided "
        "Mann-Whitney test; 'no significant difference' when p >= 0.05."
    )


def _two_lines(summary_text: str) -> str:
    median, _, detail = summary_text.partition(" ")
    return f"{median}\n{detail}" if detail else median
