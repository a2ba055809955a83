"""The report's History section: one trend chart per figure over the selected runs, every
series a line (run medians, intervals as whiskers), change points marked with their size,
p-value and the versions that changed there (``serverlab.results.report.charts.series``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import plotly.graph_objects as go

from serverlab.results.records import RecordedTest, Run, StoredSuite
from serverlab.results.report.cells.scenarios import paired_arm
from serverlab.results.report.charts.chart import PALETTE, Chart, _figure
from serverlab.results.report.charts.series import HISTORY_METRICS, Series, build_series


@dataclass
class HistorySection:
    charts: list[Chart]
    changes: list[dict] = field(default_factory=list)
    runs: int = 0


def history_section(
    tests: list[RecordedTest], runs: list[Run], suites: dict[int, StoredSuite]
) -> HistorySection | None:
    """None when the selection holds fewer than two runs: a history needs a past."""
    if len({t.run_id for t in tests if not paired_arm(t)}) < 2:
        return None
    series = [s for s in build_series(tests, runs, suites) if len(s.points) >= 2]
    charts = [
        _trend(name, [s for s in series if s.metric.name == name]) for name in HISTORY_METRICS
    ]
    changes = [_change_row(s, cp) for s in series for cp in s.change_points]
    return HistorySection([c for c in charts if c is not None], changes, len(runs))


def _trend(metric_name: str, series: list[Series]) -> Chart | None:
    if not series:
        return None
    metric = series[0].metric
    fig = go.Figure()
    for index, s in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        fig.add_trace(_line(s, colour))
        if s.change_points:
            fig.add_trace(_marks(s, colour))
    chart = Chart(
        key=f"history-{metric_name}",
        title=f"{metric.titled} over runs",
        caption=(
            f"Each point: one run's median {metric.label} over its repeats, the whisker its "
            f"distribution-free interval; source: {metric.source}, over {metric.window}. "
            "One line per series (suite / scenario / contestant, one machine fingerprint). "
            "Diamonds: change points found by E-Divisive means (Apache Otava), with size, "
            "p-value and the versions that changed."
        ),
    )
    chart.figure = _figure(fig, "run", metric.titled)
    return chart


def _line(series: Series, colour: str) -> go.Scatter:
    points = series.points
    return go.Scatter(
        x=[f"run {p.run_id}" for p in points],
        y=[p.summary.median for p in points],
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [(p.summary.interval.high - p.summary.median) for p in points],
            "arrayminus": [(p.summary.median - p.summary.interval.low) for p in points],
        },
        mode="lines+markers",
        line={"color": colour},
        name=f"{series.label} · {series.fingerprint or 'machine unknown'}",
        hovertext=[
            f"n = {p.summary.n}{' ⚑ ' + ', '.join(p.flags) if p.flags else ''}" for p in points
        ],
    )


def _marks(series: Series, colour: str) -> go.Scatter:
    marks = series.change_points
    return go.Scatter(
        x=[f"run {series.points[cp.index].run_id}" for cp in marks],
        y=[series.points[cp.index].summary.median for cp in marks],
        mode="markers+text",
        marker={"symbol": "diamond-open", "size": 16, "color": colour, "line": {"width": 2}},
        text=[f"{cp.percent:+.1f} % (p={cp.p_value:.2g})" for cp in marks],
        textposition="top center",
        hovertext=["<br>".join(cp.versions_changed) or "no version changed" for cp in marks],
        name=f"change points: {series.label}",
        showlegend=False,
    )


def _change_row(series: Series, cp) -> dict:
    before, after = series.points[cp.index - 1].run_id, series.points[cp.index].run_id
    return {
        "series": f"{series.label} · {series.fingerprint or 'machine unknown'}",
        "figure": series.metric.label,
        "between": f"run {before} → run {after}",
        "size": f"{cp.mean_before:,.4g} → {cp.mean_after:,.4g} ({cp.percent:+.1f} %)",
        "p": f"{cp.p_value:.2g}",
        "versions": list(cp.versions_changed) or ["no version changed"],
    }
