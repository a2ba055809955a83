"""``build_report``: one self-contained HTML file (plotly.js inline, no network) per selection."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import plotly.offline

from serverlab.base.paramtext import param_text
from serverlab.results import stats
from serverlab.results.records import RecordedTest, Run, StoredSuite
from serverlab.results.report.cells.cell import Cell
from serverlab.results.report.cells.formatting import coverage_note
from serverlab.results.report.cells.scenarios import permutation_params, scenario_labels
from serverlab.results.report.charts.chart import (
    Chart,
    descriptor_chart,
    scenario_charts,
    shared_template,
    test_label,
)
from serverlab.results.report.charts.signal_charts import signal_charts
from serverlab.results.report.figures.engine_summary import number_at
from serverlab.results.report.figures.figure import PUSH, REQUESTS
from serverlab.results.report.figures.push import is_push
from serverlab.results.report.figures.table import METRICS, METRICS_BY_NAME
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.sections.amplification import amplification_rows
from serverlab.results.report.sections.attacks import attack_rows, verdict_rows
from serverlab.results.report.sections.capacity import capacity_groups, is_capacity_search
from serverlab.results.report.sections.client_groups import GroupRow, group_rows
from serverlab.results.report.sections.findings import Finding
from serverlab.results.report.sections.glance import at_a_glance
from serverlab.results.report.sections.grpc import grpc_section
from serverlab.results.report.sections.history import history_section
from serverlab.results.report.sections.not_run import NotRun
from serverlab.results.report.sections.seeds import seed_sections
from serverlab.results.report.sections.tls import tls_section
from serverlab.results.report.sections.transports import FIGURES, transport_section
from serverlab.results.report.sections.warmup import time_to_steady, warmup_chart
from serverlab.results.report.selection import load_selected, parse_selection
from serverlab.results.report.summary import (
    SummaryRow,
    architectures,
    rerun_note,
    scenario_groups,
    status_counts,
    summary_rows,
    tunable_text,
)

DEFAULT_REPORT = Path("results/report.html")


@dataclass
class ScenarioSection:
    anchor: str
    label: str
    params: str
    summary: list[SummaryRow]
    charts: list[Chart]
    pushed: bool = False  # every test of it a push test: its figures are push figures
    tests: list[dict] = field(default_factory=list)
    generators: list[dict] = field(default_factory=list)  # spread tests: one row each
    client_groups: list[GroupRow] = field(default_factory=list)  # grouped tests: per group
    attacks: list[dict] = field(default_factory=list)  # a probe beside attacks: per attack
    verdicts: list[dict] = field(default_factory=list)  # per attack: shipped beside hardened
    amplification: list[dict] = field(default_factory=list)  # per attack: server cost per client's


def build_report(
    db_path: str | Path,
    selection: Iterable[str] | str | None = None,
    out_path: str | Path = DEFAULT_REPORT,
    labels: dict[str, str] | None = None,
    progress=None,
) -> Path:
    """Write the report of the selected tests (see ``serverlab.results.report.selection``) to
    ``out_path``, atomically; returns the path. Raises ``SelectionError`` or ``StoreError``
    with a readable message when there is nothing to report. ``progress`` counts the tests
    as they load (``serverlab.base.progress.Tally``)."""
    parsed = parse_selection(selection)
    found = load_selected(db_path, parsed, progress)
    html = render_report(
        found.tests,
        found.runs,
        found.suites,
        parsed.describe(),
        str(db_path),
        architectures(found.runs, labels),
        rerun_note(found.superseded),
        found.not_run,
        generated=_utc(dt.datetime.now(dt.UTC).timestamp()),
    )
    return write_atomically(Path(out_path), html)


def report_data(
    db_path: str | Path,
    selection: Iterable[str] | str | None = None,
    labels: dict[str, str] | None = None,
) -> dict:
    """``report --json``: the cells the report's tables are drawn from and its "at a glance"
    judgements, as data (the same computation as the HTML and the terminal summary)."""
    parsed = parse_selection(selection)
    found = load_selected(db_path, parsed)
    data = cells_data(found.tests, architectures(found.runs, labels), found.not_run)
    return {"selection": parsed.describe(), **data}


def cells_data(tests: list[RecordedTest], labels: dict[str, str], refused: NotRun) -> dict:
    """The report's cells, its "at a glance" judgements, its capacity knees and what was
    not run, as data (``report --json``, and each run of a published site)."""
    sections = _sections(tests, labels)
    cells = section_cells(sections)
    return {
        "cells": [cell.as_dict() for cell in cells],
        "at_a_glance": [glance.as_dict() for glance in at_a_glance(cells)],
        "capacity": [group.as_dict() for group in capacity_groups(tests)],
        "findings": [finding.as_dict() for finding in section_findings(sections)],
        "flags": [
            {"scenario": s.label, "contestant": row.contestant, "tunables": row.tunables}
            | group.as_dict()
            for s in sections
            for row in s.summary
            for group in row.flag_groups
        ],
        "not_run": refused.as_dict(),
        "time_to_steady": time_to_steady(tests),
        "client_groups": [
            {"scenario": s.label, **row.as_dict()} for s in sections for row in s.client_groups
        ],
        "attacks": [{"scenario": s.label, **row} for s in sections for row in s.attacks],
        "verdicts": [{"scenario": s.label, **row} for s in sections for row in s.verdicts],
        "amplification": [
            {"scenario": s.label, **row} for s in sections for row in s.amplification
        ],
        **_grpc_data(tests),
    }


def _grpc_data(tests: list[RecordedTest]) -> dict:
    """The gRPC section's data under "grpc", where a gRPC test was recorded."""
    section = grpc_section(tests)
    return {} if section is None else {"grpc": section.as_dict()}


def section_findings(sections: list[ScenarioSection]) -> list[Finding]:
    return [row.finding for s in sections for row in s.summary if row.finding]


def section_cells(sections: list[ScenarioSection]) -> list[Cell]:
    return [cell for s in sections for row in s.summary for cell in row.figures]


def render_report(
    tests: list[RecordedTest],
    runs: list[Run],
    suites: dict[int, StoredSuite],
    selection_text: str,
    db_text: str,
    labels: dict[str, str] | None = None,
    reruns: str = "",
    refused: NotRun | None = None,
    generated: str = "",
    plotly_src: str = "",
) -> str:
    """The report's HTML. ``generated`` (when it was written) is left out when empty, and
    ``plotly_src`` names a plotly.js file beside the page instead of holding it inline:
    a published site gives neither, so that one database gives the same bytes."""
    sections = _sections(tests, labels or {})
    cells = section_cells(sections)
    transports = transport_section(tests, runs, labels or {})
    charts = [c for s in sections for c in s.charts] + (transports.charts if transports else [])
    history = history_section(tests, runs, suites)
    charts += history.charts if history else []
    tls = tls_section(tests, runs)
    charts += tls.charts if tls else []
    capacity = capacity_groups(tests)
    charts += [group.chart for group in capacity]
    grpc = grpc_section(tests)
    seeds = seed_sections(tests, runs, suites)
    charts += [c for seed in seeds for block in seed.slow_links for c in block.charts]
    figures = {c.key: c.figure for c in charts if c.figure is not None}
    template = environment().get_template("report.html.j2")
    return template.render(
        title=_title(runs, suites),
        generated=generated,
        selection=selection_text,
        db=db_text,
        runs=[_run_view(r, suites) for r in runs],
        summary_tables=summary_tables(sections),
        sections=sections,
        seed_sections=seeds,
        transports=transports,
        tls=tls,
        capacity=capacity,
        grpc=grpc,
        history=history,
        transport_figures=FIGURES,
        figures=figures,
        plot_template=shared_template(),
        coverage_note=coverage_note(cell.summary.n for cell in cells),
        glances=at_a_glance(cells),
        findings=section_findings(sections),
        min_repeats_to_test=stats.MIN_REPEATS_TO_TEST,
        test_count=len(tests),
        status_counts=status_counts(tests),
        rerun_note=reruns,
        not_run=refused or NotRun(),
        plotly_src=plotly_src,
        plotly_js="" if plotly_src else plotly.offline.get_plotlyjs(),
    )


def summary_tables(sections: list[ScenarioSection]) -> list[dict]:
    """The HTML summary: a table of the request scenarios and one of the push scenarios,
    each with the figures its tests have by design (``Figure.applies_to``), as (index in
    ``METRICS``, figure); a kind no scenario is of has no table."""
    tables = []
    for pushed, other in ((False, PUSH), (True, REQUESTS)):
        mine = [s for s in sections if s.pushed == pushed]
        shown = [(i, m) for i, m in enumerate(METRICS) if m.applies_to != other]
        if mine:
            tables.append({"metrics": shown, "sections": mine})
    return tables


def environment() -> jinja2.Environment:
    # Autoescape everything: contestant names, labels and suite text are other people's input.
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("serverlab.results.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = _utc
    return env


def _sections(tests: list[RecordedTest], names: dict[str, str]) -> list[ScenarioSection]:
    # A capacity search's summary is one of its steps, at a rate the search chose: its
    # answer is its knee, in the capacity section, not a cell to give verdicts on.
    tests = [t for t in tests if not is_capacity_search(t)]
    groups = scenario_groups(tests)
    labels = scenario_labels(tests)
    sections = []
    for index, (key, group) in enumerate(groups.items(), start=1):
        anchor = f"s{index}"
        rows = attack_rows(group)
        attacks = [row.as_dict() for row in rows]
        sections.append(
            ScenarioSection(
                anchor=anchor,
                label=labels[key],
                params=", ".join(
                    f"{k}={param_text(k, v)}"
                    for k, v in sorted(permutation_params(group[0]).items())
                ),
                summary=summary_rows(group, names, scenarios=labels),
                pushed=all(is_push(t) for t in group),
                charts=scenario_charts(group, METRICS_BY_NAME, anchor)
                + ([descriptor_chart(f"{anchor}-fds", group)] if attacks else [])
                + signal_charts(f"{anchor}-", group)
                + warmup_chart(f"{anchor}-warmup", group),
                tests=[_test_view(t) for t in group],
                generators=[row for t in group for row in _generator_rows(t)],
                client_groups=group_rows(group),
                attacks=attacks,
                verdicts=[row.as_dict() for row in verdict_rows(rows)],
                amplification=[row.as_dict() for row in amplification_rows(group)],
            )
        )
    return sections


def _test_view(test: RecordedTest) -> dict:
    return {
        "label": test_label(test),
        "status": test.status,
        "tunables": tunable_text(test),
        "started": _utc(test.started_at),
        "seconds": f"{test.ended_at - test.started_at:.1f}",
        "flags": [f.text for f in validity_flags(test)],
    }


def _generator_rows(test: RecordedTest) -> list[dict]:
    rows = []
    for generator in test.run_info.get("generators", []):
        summary = generator.get("summary") or {}
        p99 = number_at(summary, "latency_us", "p99")
        offset, uncertainty = generator.get("offset_ms"), generator.get("uncertainty_ms")
        rows.append(
            {
                "test": test_label(test),
                "address": generator.get("address", "?"),
                "requests": f"{summary.get('requests', 0):,}",
                "rps": f"{summary.get('rps', 0):,.0f}",
                "p99": "-" if p99 is None else f"{p99 / 1000:.3g}",
                "cpu": generator.get("cpu_percent", "-"),
                "bound": generator.get("generator_bound", False),
                "offset": "-" if offset is None else f"{offset:+.2f} ± {uncertainty:.2f}",
            }
        )
    return rows


def _run_view(run: Run, suites: dict[int, StoredSuite]) -> dict:
    suite = suites.get(run.suite_id)
    return {
        "id": run.id,
        "suite": suite.name if suite else "?",
        "path": suite.path if suite else "",
        "sha256": suite.sha256 if suite else "",
        "scale": suite.scale if suite else "",
        "started": _utc(run.started_at),
        "ended": _utc(run.ended_at) if run.ended_at else "-",
        "status": run.status,
        "machine": json.dumps(run.machine, indent=2, sort_keys=True),
    }


def _title(runs: list[Run], suites: dict[int, StoredSuite]) -> str:
    names = sorted({suites[r.suite_id].name for r in runs if r.suite_id in suites})
    return f"serverlab report: {', '.join(names) or 'results'}"


def _utc(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_atomically(target: Path, text: str) -> Path:
    """A reader (or a browser reloading) never sees half a report."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
