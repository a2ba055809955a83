"""The runtime's own signals laid over the load's timeline: GC pauses and event-loop (or
scheduler) delay, from the side file each server's runtime wrote (serverlab.run.execution.signals),
beside the emit durations the clients saw and the CPU the monitor sampled, so that a reader
can see whether an emit spike or a CPU dip is a pause.

Every series is put on the monitor's clock (seconds since it started, as the CPU chart):
signals are stored on the test's clock, emit cycles carry the server's own Unix time.
"""

from __future__ import annotations

import plotly.graph_objects as go

from serverlab.results.records import RecordedTest
from serverlab.results.report.charts.chart import (
    Chart,
    contestant_colours,
    cpu_points,
    finish,
    test_label,
    thinned,
)
from serverlab.results.report.flags.validity import validity_flags

# Kinds drawn as a delay line: Node's and Ruby's event loop, Go's scheduler latency.
DELAY_KINDS = ("loop_delay", "sched_latency")
SOURCE = (
    "GC pauses and loop delay: the server's runtime, in its side file (JVM unified GC log, "
    "Node perf_hooks, Go runtime/metrics, Ruby GC.stat and reactor lag)"
)


def _monitor_t0(test: RecordedTest) -> float:
    return float(test.run_info.get("monitor_t0_s") or 0.0)


def signal_points(test: RecordedTest, kinds: tuple[str, ...]) -> tuple[list[float], list[float]]:
    t0 = _monitor_t0(test)
    chosen = [s for s in test.signals if s.kind in kinds]
    return [s.t - t0 for s in chosen], [s.value for s in chosen]


def emit_cycle_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    """Each emit cycle's longest sampled delivery, at the cycle's start on the monitor's clock."""
    longest: dict[tuple[str, int], tuple[float, float]] = {}
    for emit in test.emits:
        if emit.created_ms is None:
            continue
        at = emit.created_ms / 1000 - test.started_at - _monitor_t0(test)
        _, worst = longest.get((emit.event, emit.seq), (at, 0.0))
        longest[(emit.event, emit.seq)] = (at, max(worst, emit.duration_ms))
    pairs = sorted(longest.values())
    return [at for at, _ in pairs], [ms for _, ms in pairs]


def _trace(test, points, colour, name, *, y2=False, markers=False, dash=None) -> go.Scatter:
    x, y = points if markers else thinned(*points)
    return go.Scatter(
        x=x,
        y=y,
        mode="markers" if markers else "lines",
        marker={"color": colour, "symbol": "x", "size": 7},
        line={"color": colour, "dash": dash},
        name=f"{test_label(test)} {name}",
        legendgroup=test.contestant,
        yaxis="y2" if y2 else "y",
        hovertemplate=f"{test_label(test)} {name}<br>%{{x:.2f}} s: %{{y:,.4g}}<extra></extra>",
    )


def _signal_traces(test, colour, y2: bool) -> list[go.Scatter]:
    pauses = signal_points(test, ("gc_pause",))
    delays = signal_points(test, DELAY_KINDS)
    traces = []
    if pauses[0]:
        traces.append(_trace(test, pauses, colour, "GC pause (ms)", y2=y2, markers=True))
    if delays[0]:
        traces.append(_trace(test, delays, colour, "loop delay (ms)", y2=y2, dash="dot"))
    return traces


def _signal_flags(tests: list[RecordedTest]):
    """Every flag of the tests drawn, a garbled side file's (signals-unreadable) included:
    the other charts leave that one out (charts.flags_of)."""
    return [(test_label(t), f) for t in tests for f in validity_flags(t)]


def _overlaid(tests: list[RecordedTest], points_of, label: str, y2: bool) -> go.Figure:
    """Each test's own series (`points_of`), with its runtime signals laid over it."""
    colours = contestant_colours(tests)
    fig = go.Figure()
    for test in tests:
        colour = colours[test.contestant]
        points = points_of(test)
        if points[0]:
            fig.add_trace(_trace(test, points, colour, label))
        for trace in _signal_traces(test, colour, y2=y2):
            fig.add_trace(trace)
    return fig


def emit_and_pauses(key: str, tests: list[RecordedTest]) -> Chart:
    fig = _overlaid(tests, emit_cycle_points, "emit cycle, longest delivery (ms)", y2=False)
    chart = Chart(
        key,
        "Emit duration and runtime pauses over time",
        "Each emit cycle's longest sampled delivery (the engine's emit records) at the cycle's "
        "start, with each GC pause (×) and the loop's delay per 100 ms (dotted), all in ms, "
        f"over the whole test on the monitor's clock. {SOURCE}.",
        flags=_signal_flags(tests),
    )
    return finish(chart, fig, ("seconds", "ms"), "no runtime signals and no emit records")


def cpu_and_pauses(key: str, tests: list[RecordedTest]) -> Chart:
    fig = _overlaid(tests, cpu_points, "CPU %", y2=True)
    fig.update_layout(
        yaxis2={"title": "pause, delay (ms)", "overlaying": "y", "side": "right"},
    )
    chart = Chart(
        key,
        "Server CPU with GC pauses and loop delay",
        "CPU of the server's process tree (the monitor, left axis, 100 = one core) with each GC "
        f"pause (×) and the loop's delay (dotted) on the right axis in ms. {SOURCE}.",
        flags=_signal_flags(tests),
    )
    return finish(chart, fig, ("seconds", "CPU % (100 = one core)"), "no monitor samples")


def signal_charts(prefix: str, tests: list[RecordedTest]) -> list[Chart]:
    """The overlays, for a scenario whose servers wrote any runtime signal."""
    if not any(s.kind in (*DELAY_KINDS, "gc_pause") for t in tests for s in t.signals):
        return []
    return [emit_and_pauses(prefix + "sig-emit", tests), cpu_and_pauses(prefix + "sig-cpu", tests)]
