"""``serverlab history``: every series of figures followed across runs, as terminal tables
(or JSON), change points marked with their size, p-value and the versions that changed.
The series and the change points themselves: ``serverlab.results.report.charts.series``."""

from __future__ import annotations

import json

from serverlab.results.report.charts.series import (
    DEFAULT_MAX_PVALUE,
    HISTORY_METRICS,
    Point,
    Series,
    build_series,
)

__all__ = ["DEFAULT_MAX_PVALUE", "HISTORY_METRICS", "build_series", "dumps", "print_history"]


def series_json(series: Series) -> dict:
    """A series as plain data (``serverlab history --json``)."""
    return {
        "suite": series.suite,
        "scenario": series.scenario,
        "contestant": series.contestant,
        "tunables": series.tunables,
        "metric": series.metric.name,
        "fingerprint": series.fingerprint,
        "points": [
            {
                "run": p.run_id,
                "median": p.summary.median,
                "interval": None
                if p.summary.interval is None
                else [p.summary.interval.low, p.summary.interval.high],
                "n": p.summary.n,
                "flags": list(p.flags),
            }
            for p in series.points
        ],
        "change_points": [
            {
                "run": series.points[cp.index].run_id,
                "after_run": series.points[cp.index - 1].run_id,
                "percent": cp.percent,
                "p_value": cp.p_value,
                "versions_changed": list(cp.versions_changed),
            }
            for cp in series.change_points
        ],
    }


def dumps(series: list[Series]) -> str:
    return json.dumps([series_json(s) for s in series], indent=2)


def print_history(series: list[Series], console=None) -> None:
    """One table per series group (suite, scenario, contestant, tunables, fingerprint): a
    row per run, a column per figure; a change point is marked in the cell of the first
    run after it, and listed under the table with its size, p-value and version changes."""
    from rich import box
    from rich.table import Table

    from serverlab.base import terminal

    console = console or terminal.console()
    for label, group in _grouped_for_table(series).items():
        runs = sorted({p.run_id: p for s in group for p in s.points}.values(), key=_order)
        table = Table(title=label, title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("run")
        for s in group:
            table.add_column(s.metric.label + (f" ({s.metric.unit})" if s.metric.unit else ""))
        for point in runs:
            table.add_row(f"{point.run_id}", *(_cell(s, point.run_id) for s in group))
        console.print(table)
        for line in _change_lines(group):
            console.print(line, soft_wrap=True, highlight=False)
    console.print(HISTORY_NOTE)


def _order(point: Point) -> tuple[float, int]:
    return point.started_at, point.run_id


def _grouped_for_table(series: list[Series]) -> dict[str, list[Series]]:
    groups: dict[str, list[Series]] = {}
    for s in series:
        groups.setdefault(f"{s.label}  (machine {s.fingerprint or 'unknown'})", []).append(s)
    return groups


def _cell(series: Series, run_id: int) -> str:
    from serverlab.results.report.cells.formatting import compact_number

    index = series.point_of_run(run_id)
    if index is None:
        return "-"
    point = series.points[index]
    interval = point.summary.interval
    text = compact_number(point.summary.median)
    if interval is not None and point.summary.n > 1:
        text += f" ({compact_number(interval.low)}–{compact_number(interval.high)})"
    if point.flags:
        text += " ⚑"
    for cp in series.change_points:
        if cp.index == index:
            text += f"\n{'▲' if cp.percent > 0 else '▼'} {cp.percent:+.1f} % p={cp.p_value:.2g}"
    return text


def _change_lines(group: list[Series]) -> list[str]:
    lines = []
    for s in group:
        for cp in s.change_points:
            before, after = s.points[cp.index - 1].run_id, s.points[cp.index].run_id
            versions = "; ".join(cp.versions_changed) or "no version changed"
            lines.append(
                f"  change point in {s.metric.label} between run {before} and run {after}: "
                f"{cp.mean_before:,.4g} → {cp.mean_after:,.4g} ({cp.percent:+.1f} %, "
                f"p={cp.p_value:.2g}); {versions}"
            )
    return lines


HISTORY_NOTE = (
    "Each cell: the run's median over its repeats (its distribution-free interval in "
    "brackets; ⚑ a flagged test). ▲▼: a change point found by E-Divisive means (Apache "
    "Otava) over the run medians, with its size and p-value. Series never mix machine "
    "fingerprints."
)
