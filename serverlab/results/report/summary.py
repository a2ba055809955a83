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
from serverlab.results.records import RecordedTest, Run
from serverlab.results.report.cells.cell import Cell, grouped, make_cell, tunable_text
from serverlab.results.report.cells.formatting import coverage_note
from serverlab.results.report.cells.scenarios import scenario_key, scenario_labels
from serverlab.results.report.figures.push import is_push
from serverlab.results.report.figures.table import COMET_NOTE, METRICS, SUMMARIZED_STATUSES
from serverlab.results.report.flags.groups import FlagGroup, group_flags
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.sections.findings import Finding, findings
from serverlab.results.report.sections.glance import at_a_glance
from serverlab.results.report.selection import Selected, load_selected, parse_selection

# Six figures fit 120 columns: the rate, the tail (of request latency, and of a push
# test's delivery delay), and what the server spent per request, per delivered event (push)
# and per held connection. The others are in the HTML and JSON.
TERMINAL_METRICS = ("rps", "p99", "delay_p99", "cpu_req", "cpu_event", "memory")


@dataclass
class SummaryRow:
    contestant: str
    architecture: str
    tunables: str
    counts: str
    figures: list[Cell]  # one cell per metric of METRICS, in order
    flag_groups: list[FlagGroup]  # every kind of flag of the row's tests, crashed ones too
    summarized: int = 0  # the repeats the medians are over
    codes: list[str] = field(default_factory=list)  # the flags' short codes
    compact: bool = False
    finding: Finding | None = None  # what its tests showed of the architecture

    @property
    def flags(self) -> list[str]:
        """Each kind of flag once, with the repeats that carry it and its sizes: "not
        steady: r1–r6, +17 % to +72 %" (serverlab.results.report.flags.groups)."""
        return [group.text for group in self.flag_groups]

    @property
    def cells(self) -> list[tuple[str, str]]:
        """(median, "[low, high] n=N") per metric, as both tables print them."""
        return [cell.text(self.compact) for cell in self.figures]


def architectures(runs: Iterable[Run], fallback: dict[str, str] | None = None) -> dict[str, str]:
    """Each contestant's architecture label as its runs recorded it; `fallback` (today's
    manifests, say) names those that runs before the label was recorded did not."""
    labels = dict(fallback or {})
    for run in runs:
        labels.update(run.machine.get("contestant_architectures") or {})
    return labels


def summary_rows(
    group: list[RecordedTest],
    labels: dict[str, str],
    compact: bool = False,
    scenarios: dict[str, str] | None = None,
) -> list[SummaryRow]:
    """One row per permutation of one scenario's tests: per contestant and tunables, its
    cells (``serverlab.results.report.cells.cell``). ``labels`` maps contestant names to
    architecture labels, ``scenarios`` scenario keys to their labels."""
    scenarios = scenarios or scenario_labels(group)
    found = {finding.key: finding for finding in findings(group, scenarios)}
    rows = []
    for key, mine in grouped(group).items():
        label = scenarios[scenario_key(mine[0])]
        first = mine[0]
        rows.append(
            SummaryRow(
                first.contestant,
                labels.get(first.contestant, ""),
                tunable_text(first),
                status_counts(mine),
                [make_cell(mine, metric, label, key) for metric in METRICS],
                group_flags(mine),
                len([t for t in mine if t.status in SUMMARIZED_STATUSES]),
                sorted({flag.code for t in mine for flag in validity_flags(t)}),
                compact,
                found.get(key),
            )
        )
    return rows


def status_counts(tests: list[RecordedTest]) -> str:
    counts: dict[str, int] = {}
    for test in tests:
        counts[test.status] = counts.get(test.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def rerun_note(superseded: list[RecordedTest]) -> str:
    """How many repeats were run again, and why: "2 repeats re-run (machine-busy (58 % of
    a core), ...); the first attempts are kept, marked superseded"; "" when none was."""
    if not superseded:
        return ""
    # Only machine-busy makes serverlab run a repeat again; the test's other flags are not why.
    busy = {f.text for t in superseded for f in validity_flags(t) if f.code == "machine-busy"}
    reasons = sorted(busy or {"no flag"})
    noun = "repeat" if len(superseded) == 1 else "repeats"
    return (
        f"{len(superseded)} {noun} re-run ({'; '.join(reasons)}): the re-runs are in the "
        "figures, the first attempts stay stored, marked superseded."
    )


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
    """The summary table of the selected tests on the terminal (for ``make demo``), then
    the report's "at a glance" lines, from the same cells; `labels` are architecture
    labels for runs that did not record theirs."""
    found = load_selected(db_path, parse_selection(selection))
    tests, runs = found.tests, found.runs
    console = console or terminal.console()
    scenarios = scenario_labels(tests)
    names = architectures(runs, labels)
    rows = [
        (scenarios[key], row)
        for key, g in scenario_groups(tests).items()
        for row in summary_rows(g, names, compact=True, scenarios=scenarios)
    ]
    shown = [i for i, m in enumerate(METRICS) if m.name in TERMINAL_METRICS]
    console.print(_table(rows, shown))
    for scenario, row in rows:
        for flag in row.flags:
            # A flag may quote what a server or the engine said.
            console.print(
                f"  {terminal.literal(f'{scenario}, {row.contestant}: {flag}')}", highlight=False
            )
    console.print(FLAGGED_NOTE)
    console.print(coverage_note([row.figures[i].summary.n for _, row in rows for i in shown]))
    _print_notes(console, found)
    console.print("At a glance (differences the data supports, Holm-adjusted per scenario):")
    found = [row.finding for _, row in rows if row.finding]
    for glance in at_a_glance([cell for _, row in rows for cell in row.figures]):
        said = "; ".join(glance.sentences) + "." if glance.sentences else glance.none_note
        console.print(
            f"  {terminal.literal(glance.scenario)}: {terminal.literal(said)}", highlight=False
        )
        for line in glance.why_not:
            console.print(f"    - {terminal.literal(line)}", highlight=False)
        _print_findings(console, [f for f in found if f.scenario == glance.scenario])


def _print_findings(console: Console, found: list[Finding]) -> None:
    """A scenario's findings, under its verdicts (serverlab.results.report.sections.findings)."""
    for finding in found:
        said = f"finding, {finding.sentence}."
        console.print(f"    {terminal.literal(said)}", highlight=False)


def _print_notes(console: Console, found: Selected) -> None:
    """What qualifies the table as a whole: re-runs, tests refused before they ran, push."""
    if found.superseded:
        console.print(rerun_note(found.superseded))
    if found.not_run:
        # One line: the report's "Not run" section lists each with its reason.
        console.print(terminal.literal(found.not_run.sentence()), highlight=False)
    if any(is_push(t) for t in found.tests):
        console.print(COMET_NOTE)


def _table(rows: list[tuple[str, SummaryRow]], shown: list[int]) -> Table:
    # No inner borders, and cells that wrap between words only: a name or a figure is never
    # cut in two on a 120-column terminal. Flags are codes; their details follow the table.
    # One space between columns, none at the edges: six figures and the longest flag fit.
    table = Table(
        title="serverlab summary: median, interval, repeats",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    longest = max((len(terminal.literal(r.contestant, markup=False)) for _, r in rows), default=0)
    table.add_column("scenario")
    table.add_column("contestant", min_width=longest)
    for i in shown:
        # As wide as its widest figure or heading word, so that the names and flags get the
        # rest and no word is cut.
        words = [part for _, r in rows for part in "\n".join(r.cells[i]).split()]
        words += _heading(METRICS[i]).split()
        widest = max(len(word) for word in words)
        table.add_column(_heading(METRICS[i]), max_width=max(widest, 8))
    table.add_column("flags", min_width=max((len(c) for _, r in rows for c in r.codes), default=0))
    for scenario, row in rows:
        cells = [terminal_cell(row.figures[i]) for i in shown]
        who = "\n".join(
            terminal.literal(part) for part in (row.contestant, row.tunables, row.counts) if part
        )
        table.add_row(terminal.literal(scenario), who, *cells, "\n".join(row.codes))
    return table


FLAGGED_NOTE = (
    "A figure marked ! is qualified by a flag of its row that touches it: its flagged repeats "
    "leave its comparison, and the others decide when enough remain."
)


def terminal_cell(cell: Cell) -> str:
    """A cell as the terminal table prints it: median (! when flagged), interval, n."""
    median, detail = cell.text(compact=True)
    return f"{median}{' !' if cell.flagged else ''}\n{detail}"


def _heading(metric) -> str:
    return f"{metric.label} ({metric.unit})" if metric.unit else metric.label
