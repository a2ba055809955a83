"""The summary table: per scenario and contestant, the median and 95 % interval of each
metric over repeats, how many tests ended how, and the validity flags. Drawn into the HTML
report, and printed on the terminal (``print_summary``) after a run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from serverlab.base import terminal
from serverlab.results import stats
from serverlab.results.report.metrics import (
    COMET_NOTE,
    METRICS,
    SUMMARIZED_STATUSES,
    coverage_note,
    format_cell,
    scenario_key,
    scenario_labels,
    validity_flags,
)
from serverlab.results.report.push import is_push
from serverlab.results.report.selection import load_selected, parse_selection
from serverlab.results.store import RecordedTest, Run

TERMINAL_METRICS = ("rps", "p50", "p99", "cpu", "rss")


@dataclass
class SummaryRow:
    contestant: str
    architecture: str
    tunables: str
    counts: str
    cells: list[tuple[str, str]]
    flags: list[str]
    summarized: int = 0  # the repeats the medians are over
    codes: list[str] = field(default_factory=list)  # the flags' short codes


def architectures(runs: Iterable[Run], fallback: dict[str, str] | None = None) -> dict[str, str]:
    """Each contestant's architecture label as its runs recorded it; `fallback` (today's
    manifests, say) names those that runs before the label was recorded did not."""
    labels = dict(fallback or {})
    for run in runs:
        labels.update(run.machine.get("contestant_architectures") or {})
    return labels


def summary_rows(
    group: list[RecordedTest], labels: dict[str, str], compact: bool = False
) -> list[SummaryRow]:
    """One row per permutation of one scenario's tests: per contestant and tunables, its
    repeats summarized. ``labels`` maps contestant names to architecture labels. Each cell
    is (median, "[low, high] n=N")."""
    rows = []
    permutations = dict.fromkeys((t.contestant, tunable_text(t)) for t in group)
    for contestant, tunables in permutations:
        mine = [t for t in group if (t.contestant, tunable_text(t)) == (contestant, tunables)]
        summarized = [t for t in mine if t.status in SUMMARIZED_STATUSES]
        cells = [
            format_cell(stats.summarize([m.of(t) for t in summarized]), compact) for m in METRICS
        ]
        rows.append(
            SummaryRow(
                contestant,
                labels.get(contestant, ""),
                tunables,
                status_counts(mine),
                cells,
                _flags_with_repeats(mine),
                len(summarized),
                sorted({flag.code for t in mine for flag in validity_flags(t)}),
            )
        )
    return rows


def _flags_with_repeats(tests: list[RecordedTest]) -> list[str]:
    """Each distinct flag once, followed by the repeats that carry it: "crashed (r5)"."""
    repeats: dict[str, list[str]] = {}
    for test in tests:
        for flag in validity_flags(test):
            repeats.setdefault(flag.text, []).append(f"r{test.repeat_index + 1}")
    return [f"{text} ({', '.join(which)})" for text, which in sorted(repeats.items())]


def tunable_text(test: RecordedTest) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(test.tunables.items()))


def status_counts(tests: list[RecordedTest]) -> str:
    counts: dict[str, int] = {}
    for test in tests:
        counts[test.status] = counts.get(test.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def scenario_groups(tests: list[RecordedTest]) -> dict[str, list[RecordedTest]]:
    """Tests by scenario key, in the order the scenarios first appear."""
    groups: dict[str, list[RecordedTest]] = {}
    for test in tests:
        groups.setdefault(scenario_key(test), []).append(test)
    return groups


def print_summary(
    db_path: str | Path,
    selection: Iterable[str] | str | None = None,
    console: Console | None = None,
    labels: dict[str, str] | None = None,
) -> None:
    """The summary table of the selected tests on the terminal (for ``make demo``);
    `labels` are architecture labels for runs that did not record theirs."""
    found = load_selected(db_path, parse_selection(selection))
    tests, runs = found.tests, found.runs
    console = console or terminal.console()
    shown = [i for i, m in enumerate(METRICS) if m.name in TERMINAL_METRICS]
    # No inner borders, and cells that wrap between words only: a name or a figure is never
    # cut in two on a 120-column terminal. Flags are codes; their details follow the table.
    table = Table(title="serverlab summary: median, interval, repeats", box=box.SIMPLE_HEAD)
    scenarios = scenario_labels(tests)
    names = architectures(runs, labels)
    rows = [
        (key, row)
        for key, g in scenario_groups(tests).items()
        for row in summary_rows(g, names, compact=True)
    ]
    longest = max((len(r.contestant) for _, r in rows), default=0)
    table.add_column("scenario")
    table.add_column("contestant", min_width=longest)
    for i in shown:
        # As wide as its widest figure, so that the names and flags get the rest.
        widest = max(
            (len(part) for _, r in rows for part in "\n".join(r.cells[i]).split()), default=0
        )
        table.add_column(_heading(METRICS[i]), max_width=max(widest, 8))
    table.add_column("flags", min_width=max((len(c) for _, r in rows for c in r.codes), default=0))
    repeats, details = [], []
    for key, row in rows:
        cells = [f"{row.cells[i][0]}\n{row.cells[i][1]}" for i in shown]
        who = "\n".join(filter(None, (row.contestant, row.tunables, row.counts)))
        table.add_row(scenarios[key], who, *cells, "\n".join(row.codes))
        repeats.append(row.summarized)
        details += [f"{scenarios[key]}, {row.contestant}: {flag}" for flag in row.flags]
    console.print(table)
    for line in details:
        console.print(f"  {line}", highlight=False)
    console.print(coverage_note(repeats))
    if any(is_push(t) for t in tests):
        console.print(COMET_NOTE)


def _heading(metric) -> str:
    return f"{metric.label} ({metric.unit})" if metric.unit else metric.label
