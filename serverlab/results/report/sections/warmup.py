"""The warm-up's own figures (docs/warmup.md): each test's time to steady state, in seconds
and answers, and its rate during the warm-up, read from `run_info["warmup"]` as the executor
recorded them. JIT warm-up is a property of an architecture that people choose by."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from pathlib import Path

import plotly.graph_objects as go
from rich.console import Console

from serverlab.base import terminal
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.scenarios import scenario_key, scenario_labels
from serverlab.results.report.charts.chart import Chart, contestant_colours, finish, test_label
from serverlab.results.report.selection import load_selected, parse_selection

SOURCE = "the warm-up engine pass's interval lines (0.5 s each), as the executor read them"
JIT_SOURCE = (
    "the kernel: utime + stime of the server's JIT compiler threads (/proc/<pid>/task/<tid>/"
    "stat), read as each warm-up line arrived"
)


def warmup_of(test: RecordedTest) -> dict | None:
    record = test.run_info.get("warmup")
    return record if isinstance(record, dict) and record.get("rates") is not None else None


def warmup_chart(key: str, tests: list[RecordedTest]) -> list[Chart]:
    """ "Rate during warm-up": one line per test, each contestant in its colour, the point
    where its rate became steady marked; none for a scenario without warm-ups."""
    warmed = [t for t in tests if warmup_of(t)]
    if not warmed:
        return []
    colours = contestant_colours(warmed)
    fig = go.Figure()
    for test in warmed:
        record = warmup_of(test)
        _add_line(fig, test, record, "rates", colours)
        if record.get("steady_s") is not None:
            fig.add_vline(
                x=record["steady_s"], line={"color": colours[test.contestant], "dash": "dot"}
            )
    chart = Chart(
        key,
        "Rate during warm-up",
        "Answers per second of each test's warm-up, interval by interval; a dotted line marks "
        f"where its rate became steady (its time to steady state). Source: {SOURCE}.",
    )
    chart.caption += f" Steady: {_rules(warmed)}."
    charts = [finish(chart, fig, ("seconds into the warm-up", "answers/s"), "no warm-up lines")]
    return charts + _jit_chart(f"{key}-jit", warmed, colours)


def _jit_chart(key: str, warmed: list[RecordedTest], colours: dict[str, str]) -> list[Chart]:
    """The JIT compiler threads' share of a core in each warm-up line, for the servers that
    have such threads (a JVM's); none otherwise."""
    compiled = [t for t in warmed if warmup_of(t).get("jit_percent")]
    if not compiled:
        return []
    fig = go.Figure()
    for test in compiled:
        _add_line(fig, test, warmup_of(test), "jit_percent", colours)
    chart = Chart(
        key,
        "JIT compiler threads during warm-up",
        "The share of one core the server's JIT compiler threads used in each 0.5 s line of "
        "its warm-up: the JIT at work while the rate climbs, and quiet once it is steady. "
        f"Source: {JIT_SOURCE}.",
    )
    return [finish(chart, fig, ("seconds into the warm-up", "% of one core"), "no JIT lines")]


def _add_line(fig: go.Figure, test: RecordedTest, record: dict, series: str, colours) -> None:
    """One test's warm-up series (a value per line of `interval_s`) in its contestant's
    colour."""
    step = float(record.get("interval_s") or 0.5)
    values = record[series]
    fig.add_trace(
        go.Scatter(
            x=[step * (i + 1) for i in range(len(values))],
            y=values,
            mode="lines",
            line={"color": colours[test.contestant]},
            name=test_label(test),
            legendgroup=test.contestant,
        )
    )


def _rules(tests: list[RecordedTest]) -> str:
    """The steady rule(s) the tests were judged by, as each recorded it."""
    rules = dict.fromkeys(str(warmup_of(t).get("rule")) for t in tests if warmup_of(t).get("rule"))
    return "; ".join(rules) or "the rule was not recorded"


def time_to_steady(tests: list[RecordedTest]) -> list[dict]:
    """Per scenario and contestant: the median time to steady state (seconds, answers) over
    the repeats that became steady, and how many of how many did."""
    labels = scenario_labels(tests) if tests else {}
    groups: dict[tuple[str, str], list[dict]] = {}
    for test in tests:
        record = warmup_of(test)
        if record is None:
            continue
        scenario = labels[scenario_key(test)]
        groups.setdefault((scenario, test.contestant), []).append(record)
    rows = []
    for (scenario, contestant), records in groups.items():
        steady = [r for r in records if r.get("steady") and r.get("steady_s") is not None]
        rows.append(
            {
                "scenario": scenario,
                "contestant": contestant,
                "steady": len(steady),
                "repeats": len(records),
                "cap_s": max(float(r.get("max_s") or 0) for r in records),
                "seconds": _median([r["steady_s"] for r in steady]),
                "requests": _median([r["steady_requests"] for r in steady]),
                "source": SOURCE,
            }
        )
    return rows


def time_to_steady_lines(rows: list[dict]) -> list[str]:
    """The terminal summary's lines: one per scenario and contestant."""
    lines = []
    for row in rows:
        where = f"{row['scenario']}, {row['contestant']}"
        if row["seconds"] is None:
            lines.append(f"time to steady: {where}: never steady within {row['cap_s']:g} s")
            continue
        of = f"(median of {row['steady']} of {row['repeats']} repeats that became steady)"
        if row["seconds"] == 0:
            # Its first four lines already met the rule: the rate held from the start.
            lines.append(f"time to steady: {where}: steady from its first line {of}")
            continue
        lines.append(
            f"time to steady: {where}: {row['seconds']:.1f} s, {row['requests']:,.0f} answers {of}"
        )
    return lines


def print_time_to_steady(
    db_path: str | Path, selection: Iterable[str] | str | None, console: Console
) -> None:
    """After the terminal summary (`report --summary`): each warmed cell's time to steady."""
    rows = time_to_steady(load_selected(db_path, parse_selection(selection)).tests)
    for line in time_to_steady_lines(rows):
        console.print(terminal.literal(line), highlight=False)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
