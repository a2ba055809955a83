"""``serverlab compare A B``: medians, their ratio and a verdict per scenario and metric.

A and B are selections (see ``serverlab.results.report.selection``): two contestant names
compare contestants scenario by scenario within the latest suite; ``run:3 run:5`` compares
each contestant with itself across two runs. Figures are medians over repeats, never
best-of-N; the ratio A/B comes with its distribution-free interval. Each side's figure is a
cell (``serverlab.results.report.cells.cell``) with its own n and flags; the verdicts come from
``serverlab.results.report.cells.verdicts``: over the repeats no flag qualifies, a two-sided
Mann-Whitney test where both sides have enough of them, Holm-adjusted across the whole
comparison, and stated only where the difference is material and the figure is not at its
ceiling on both sides. Where side A holds a paired run's two A arms (A and A'), their
difference is the A/A noise floor, and a difference under it is not material. Within a
scenario the stated verdicts come first, largest effect first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from serverlab.base import terminal
from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.cell import cells_of
from serverlab.results.report.cells.formatting import coverage_note
from serverlab.results.report.cells.scenarios import comparison_key, scenario_labels
from serverlab.results.report.cells.verdicts import Judgement, by_effect, judge
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import METRICS_BY_NAME, SUMMARIZED_STATUSES
from serverlab.results.report.selection import SelectionError, parse_selection, select_tests
from serverlab.results.report.summary import terminal_cell
from serverlab.results.store import Store

DEFAULT_METRICS = (
    *("rps", "p50", "p99", "delay_p50", "delay_p99"),
    *("errors", "cpu", "cpu_req", "cpu_event", "rss", "memory"),
)


@dataclass(frozen=True)
class ComparisonRow:
    """One scenario (and contestant, when runs are the sides) and metric: A's cell, B's
    cell and their judgement."""

    scenario: str
    contestants: str
    judgement: Judgement

    @property
    def metric(self) -> Figure:
        return self.judgement.metric

    @property
    def a(self) -> stats.Summary:
        return self.judgement.a.summary

    @property
    def b(self) -> stats.Summary:
        return self.judgement.b.summary

    @property
    def verdict(self) -> stats.Verdict:
        return self.judgement.verdict

    @property
    def test(self) -> stats.MannWhitney | None:
        return self.judgement.test

    @property
    def ratio(self) -> stats.Ratio | None:
        return self.judgement.ratio

    @property
    def words(self) -> str:
        return self.judgement.words

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "contestant": self.contestants,
            "metric": self.metric.name,
            "a": self.judgement.a.as_dict(),
            "b": self.judgement.b.as_dict(),
            **self.judgement.as_dict(),
        }


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
    by_contestant = not (len(selection_a.contestants) == len(selection_b.contestants) == 1)
    labels = scenario_labels(tests_a + tests_b)
    chosen = [METRICS_BY_NAME[name] for name in metrics]
    cells_a = {(c.key, c.metric.name): c for c in cells_of(tests_a, chosen, by_contestant, labels)}
    cells_b = {(c.key, c.metric.name): c for c in cells_of(tests_b, chosen, by_contestant, labels)}
    # A figure neither side has (a push test's requests/s) is not compared.
    pairs = [
        (cell, cells_b[key])
        for key, cell in cells_a.items()
        if key in cells_b and (cell.values or cells_b[key].values)
    ]
    if not pairs:
        raise SelectionError("the two sides ran no scenario in common")
    floors = aa_floors(tests_a, by_contestant)
    # A paired run's arms are cells of their own; the floor its A and A' measured holds for
    # each of them (and only them).
    unarmed = {
        comparison_key(t, by_contestant): comparison_key(t, by_contestant, False) for t in tests_a
    }
    noise = [floors.get((unarmed.get(a.key, a.key), a.metric.name)) for a, _ in pairs]
    return [
        ComparisonRow(j.a.scenario, j.a.contestant if by_contestant else "", j)
        for j in _by_scenario(judge(pairs, alpha, noise))
    ]


def _by_scenario(judgements: list[Judgement]) -> list[Judgement]:
    """Scenario by scenario as they first appear, each one's verdicts by effect size."""
    scenarios: dict[tuple[str, str], list[Judgement]] = {}
    for judgement in judgements:
        where = (judgement.a.scenario, judgement.a.contestant)
        scenarios.setdefault(where, []).append(judgement)
    return [j for same in scenarios.values() for j in by_effect(same)]


def aa_floors(tests: Sequence[RecordedTest], by_contestant: bool) -> dict[tuple[str, str], float]:
    """The A/A noise floor per (cell key, metric), where a side holds a paired run's arms A
    and A' (``serverlab compare --paired``): |median(A') / median(A) - 1| over their
    summarized tests, as the paired gate measures it."""
    floors = {}
    groups: dict[str, list[RecordedTest]] = {}
    for test in tests:  # arms lined up (``scenario_key``'s with_arm=False)
        groups.setdefault(comparison_key(test, by_contestant, False), []).append(test)
    for key, group in groups.items():
        arms = {(t.run_info.get("paired") or {}).get("arm") for t in group}
        if not {"A", "A'"} <= arms:
            continue
        for metric in METRICS_BY_NAME.values():
            ratio = stats.ratio(_arm_values(group, "A'", metric), _arm_values(group, "A", metric))
            if ratio is not None:
                floors[(key, metric.name)] = abs(ratio.value - 1)
    return floors


def _arm_values(tests: Sequence[RecordedTest], arm: str, metric: Figure) -> list[float]:
    return [
        value
        for t in tests
        if t.status in SUMMARIZED_STATUSES and (t.run_info.get("paired") or {}).get("arm") == arm
        for value in [metric.of(t)]
        if value is not None
    ]


def print_comparison(
    rows: list[ComparisonRow],
    label_a: str,
    label_b: str,
    console: Console | None = None,
    note: str = "",
) -> None:
    """The comparison as a rich table: median [interval] per side, their ratio with its
    interval, the test's p and its Holm-adjusted p, and the verdict; then every flag of
    a cell the table shows, and ``note`` (what qualifies every verdict: machines mixed).
    Cells wrap between words only."""
    console = console or terminal.console()
    with_contestant = any(row.contestants for row in rows)
    table = Table(
        title=f"A = {terminal.literal(label_a)}   vs   B = {terminal.literal(label_b)}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    columns = ["scenario", "contestant", "metric", "A", "B", "A / B", "p (Holm)", "A is"]
    if not with_contestant:
        columns.remove("contestant")
    for column in columns:
        table.add_column(column)
    for row in rows:
        unit = f" ({row.metric.unit})" if row.metric.unit else ""
        cells = [terminal.literal(row.scenario), terminal.literal(row.contestants)]
        cells.append(row.metric.label + unit)
        if not with_contestant:
            del cells[1]
        sides = [terminal_cell(cell) for cell in (row.judgement.a, row.judgement.b)]
        table.add_row(*cells, *sides, _ratio_text(row.ratio), _p_text(row), _said(row.judgement))
    console.print(table)
    for line in flag_lines(rows):
        # A flag may quote what a server or the engine said, beside names from the suite.
        console.print(f"  {terminal.literal(line)}", highlight=False)
    cells = [cell for row in rows for cell in (row.judgement.a, row.judgement.b)]
    console.print(coverage_note([cell.summary.n for cell in cells]))
    console.print(STATISTICS_NOTE)
    if note:
        console.print(f"! {terminal.literal(note)}", highlight=False)


def _said(judgement: Judgement) -> str:
    """The verdict with both medians and their unit (the sides' columns show each cell's
    median over all its repeats; the verdict's are over the unflagged ones)."""
    return judgement.statement


def _p_text(row: ComparisonRow) -> str:
    if row.test is None:
        return "-"
    return f"{row.test.p_value:.2g}\n({row.judgement.adjusted_p:.2g})"


def flag_lines(rows: list[ComparisonRow]) -> list[str]:
    """Each flag of a cell the comparison shows, once per scenario and side, with its
    repeats and the figures it qualifies there."""
    figures: dict[str, list[str]] = {}
    for row in rows:
        where = ", ".join(filter(None, (row.scenario, row.contestants)))
        for side, cell in (("A", row.judgement.a), ("B", row.judgement.b)):
            for flag in cell.flags:
                repeats = ", ".join(flag.repeats)
                said = f"{where}, {side} ({cell.contestant}): {flag.text} ({repeats})"
                figures.setdefault(said, []).append(row.metric.label)
    return [f"! {said}; on {', '.join(labels)}" for said, labels in figures.items()]


STATISTICS_NOTE = (
    "A / B: the ratio of the medians, with the interval of the ratio from every pair of "
    "repeats (its coverage in brackets when under 95 %). The verdict is a two-sided "
    "Mann-Whitney U test, run where both sides have "
    f"{stats.MIN_REPEATS_TO_TEST} or more repeats (with fewer no p could fall below 0.05, so "
    "the table says so instead of finding no difference), its p adjusted by Holm-Bonferroni "
    "across every verdict of this comparison (in brackets) and judged at 0.05. A figure "
    "marked ! is flagged (listed above): its flagged repeats leave the verdict, which the "
    "others decide when enough remain (the verdict names the repeats it left out). A "
    "difference under 5 % of the smaller median (or the A/A floor of a paired run, or a "
    "figure's least difference: 1 MiB of socket memory) is no material difference; a CPU % "
    "at 90 % or more of the allowed CPU on both sides of a closed loop is both saturated."
)


def _ratio_text(ratio: stats.Ratio | None) -> str:
    if ratio is None:
        return "-"
    interval = ratio.interval
    coverage = "" if interval.reaches_level else f" ({interval.coverage:.0%})"
    return f"{ratio.value:.2f}×\n{interval.low:.2f}–{interval.high:.2f}{coverage}"
