"""The report's charts, one function each, as plotly figures turned into plain JSON.

Each function takes the tests of one scenario (every contestant, every repeat) and returns a
``Chart``: its title, the figure (None when the scenario recorded nothing to draw, which is
said in ``empty``), and the validity flags of the tests it draws.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import plotly.graph_objects as go
import plotly.io as pio

from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.engine_summary import summary_number
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.histogram import (
    HistogramError,
    latency_histogram,
    percentile_curve,
)
from serverlab.results.report.figures.push import is_push
from serverlab.results.report.figures.table import MIB, SUMMARIZED_STATUSES
from serverlab.results.report.flags.validity import SIGNAL_FIGURES, Flag, validity_flags

TEMPLATE_NAME = "plotly_white"
MAX_LINE_POINTS = 1500
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
# Engine interval fields, by preference: per-interval answers (output version 2 on), other
# per-interval completions, else a cumulative count.
COMPLETED_PER_INTERVAL = ("answered", "completed", "responses")
COMPLETED_CUMULATIVE = ("requests", "ok")
OPEN_CONNECTION_FIELDS = ("open_connections", "open", "connections_open")


@dataclass
class Chart:
    key: str
    title: str
    caption: str
    figure: dict | None = None
    empty: str = ""
    flags: list[tuple[str, Flag]] = field(default_factory=list)
    # In place of a chart whose every value is zero: an axis from -1 to 1 says nothing.
    sentence: str = ""


# What a chart whose every value is zero says, by its title; others get ZERO_DEFAULT.
ZERO_SENTENCES = {"events lost by transport": "no event lost in any test"}
ZERO_DEFAULT = "{title}: zero in every test"


def all_zero(fig: go.Figure) -> bool:
    """Whether the figure has data and every value it plots is zero."""
    values = [v for trace in fig.data for v in (trace.y if trace.y is not None else ())]
    return bool(values) and all(v == 0 for v in values if v is not None)


def zero_sentence(title: str) -> str:
    key = title.lower()
    return ZERO_SENTENCES.get(key, ZERO_DEFAULT.format(title=title))


def finish(chart: Chart, fig: go.Figure, axes: tuple[str, str], empty: str) -> Chart:
    """The chart's figure; or its one sentence when every value is zero; or why it has none."""
    if fig.data and all_zero(fig):
        chart.sentence = zero_sentence(chart.title)
    elif fig.data:
        chart.figure = _figure(fig, *axes)
    else:
        chart.empty = empty
    return chart


def contestant_colours(tests: list[RecordedTest]) -> dict[str, str]:
    names = list(dict.fromkeys(t.contestant for t in tests))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def test_label(test: RecordedTest) -> str:
    return f"{test.contestant} r{test.repeat_index + 1}"


def flags_of(tests: list[RecordedTest]) -> list[tuple[str, Flag]]:
    # A flag on the runtime's signals alone (a garbled side file) stays on their own charts
    # (signal_charts).
    return [
        (test_label(t), flag)
        for t in tests
        for flag in validity_flags(t)
        if not (flag.figures and flag.figures <= SIGNAL_FIGURES)
    ]


def _figure(fig: go.Figure, x_title: str, y_title: str) -> dict:
    # No template here: the page applies one shared template to every figure (see builder),
    # which keeps both the file and the build time small.
    fig.update_layout(
        height=360,
        margin={"l": 60, "r": 20, "t": 20, "b": 50},
        xaxis_title=x_title,
        yaxis_title=y_title,
        legend={"orientation": "h", "y": -0.2},
    )
    # Through plotly's encoder: plain JSON that the template embeds with |tojson.
    figure = json.loads(fig.to_json())
    figure["layout"].pop("template", None)
    return figure


def shared_template() -> dict:
    """The plotly template every figure of the page is drawn with."""
    return pio.templates[TEMPLATE_NAME].to_plotly_json()


def _chart(key, title, caption, tests, fig, axes, empty) -> Chart:
    return finish(Chart(key, title, caption, flags=flags_of(tests)), fig, axes, empty)


def median_bars(key: str, tests: list[RecordedTest], metrics: list[Figure], title: str) -> Chart:
    """Median of each metric per contestant, the 95 % interval as error bars, and every
    repeat as a dot, so that a reader sees the spread rather than one number."""
    contestants = list(contestant_colours(tests))
    fig = go.Figure()
    for metric, colour in zip(metrics, PALETTE, strict=False):
        bars = [(c, stats.summarize(_metric_values(tests, c, metric))) for c in contestants]
        bars = [(c, summary) for c, summary in bars if summary.n]
        if not bars:
            continue
        fig.add_trace(_bars(bars, colour, metric))
        dots = [(c, v) for c in contestants for v in _metric_values(tests, c, metric)]
        fig.add_trace(_dots(dots, colour, metric))
    fig.update_layout(barmode="group", scattermode="group")
    unit = metrics[0].unit
    return _chart(
        key,
        title,
        "Bar: median over repeats; whisker: 95 % interval of the median (its real coverage in "
        "the hover text when repeats are too few); dots: each repeat. Crashed and invalid "
        "tests are not included.",
        tests,
        fig,
        ("", f"{metrics[0].label if len(metrics) == 1 else 'latency'} ({unit})"),
        "no test of this scenario finished with an engine summary",
    )


def _metric_values(tests: list[RecordedTest], contestant: str, metric: Figure) -> list[float]:
    values = [
        metric.of(t)
        for t in tests
        if t.contestant == contestant and t.status in SUMMARIZED_STATUSES
    ]
    return [v for v in values if v is not None and not math.isnan(v)]


def _bars(bars: list[tuple[str, stats.Summary]], colour: str, metric: Figure) -> go.Bar:
    hover = [
        f"median {s.median:.4g} {metric.unit}<br>interval [{s.interval.low:.4g}, "
        f"{s.interval.high:.4g}], coverage {s.interval.coverage:.1%}<br>n = {s.n}"
        for _, s in bars
    ]
    return go.Bar(
        x=[c for c, _ in bars],
        y=[s.median for _, s in bars],
        marker_color=colour,
        opacity=0.7,
        name=f"{metric.label} median",
        offsetgroup=metric.name,
        legendgroup=metric.name,
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [s.interval.high - s.median for _, s in bars],
            "arrayminus": [s.median - s.interval.low for _, s in bars],
        },
        hovertext=hover,
        hovertemplate="%{x}<br>%{hovertext}<extra></extra>",
    )


def _dots(dots: list[tuple[str, float]], colour: str, metric: Figure) -> go.Scatter:
    return go.Scatter(
        x=[c for c, _ in dots],
        y=[v for _, v in dots],
        mode="markers",
        marker={"color": colour, "size": 7, "line": {"width": 1, "color": "white"}},
        name=f"{metric.label} repeats",
        offsetgroup=metric.name,
        legendgroup=metric.name,
        hovertemplate="%{x}: repeat %{y:.4g}<extra></extra>",
    )


def percentile_curves(key: str, tests: list[RecordedTest]) -> Chart:
    """Latency against percentile, tail stretched (x = -log10(1 - p)), one line a repeat."""
    fig = go.Figure()
    colours = contestant_colours(tests)
    problems, in_legend = [], set()
    for test in tests:
        encoded = latency_histogram(test)
        if encoded is None:
            continue
        try:
            curve = percentile_curve(encoded, scale=1 / 1000)
        except HistogramError as error:
            problems.append(f"{test_label(test)}: {error}")
            continue
        if curve.count:
            x = [_tail_position(q) for q in curve.quantiles]
            fig.add_trace(_line(test, x, curve.values, colours, "%{y:.3f} ms", in_legend))
    fig.update_xaxes(
        tickvals=[0, 1, 2, 3, 4, 5, 6],
        ticktext=["0 %", "90 %", "99 %", "99.9 %", "99.99 %", "99.999 %", "max"],
    )
    fig.update_yaxes(type="log")
    chart = _chart(
        key,
        "Latency percentile curves",
        "From the engine's HdrHistogram of each test (for push, the delivery delay from the "
        "server's created stamp); the x axis stretches the tail.",
        tests,
        fig,
        ("percentile", "latency (ms, log scale)"),
        "no latency histogram recorded",
    )
    chart.flags += [("histogram", Flag("bad-histogram", p)) for p in problems]
    return chart


def _tail_position(quantile: float) -> float:
    remaining = 1 - quantile
    return 6.0 if remaining <= 1e-6 else min(6.0, -math.log10(remaining))


def _line(test: RecordedTest, x, y, colours, hover: str, in_legend: set[str]) -> go.Scatter:
    """A line of one test; only a contestant's first line carries its legend entry."""
    show = test.contestant not in in_legend
    in_legend.add(test.contestant)
    return go.Scatter(
        x=x,
        y=y,
        mode="lines",
        line={"color": colours[test.contestant], "width": 1.5},
        name=test.contestant,
        legendgroup=test.contestant,
        showlegend=show,
        hovertemplate=f"{test_label(test)}<br>{hover}<extra></extra>",
    )


def time_series(
    key: str,
    tests: list[RecordedTest],
    title: str,
    y_title: str,
    points: Callable[[RecordedTest], tuple[list[float], list[float]]],
    caption: str,
    empty: str,
    x_title: str = "seconds",
) -> Chart:
    """One line per test (colour = contestant) of whatever ``points`` extracts."""
    colours = contestant_colours(tests)
    fig, in_legend = go.Figure(), set()
    for test in tests:
        x, y = thinned(*points(test))
        if x:
            fig.add_trace(_line(test, x, y, colours, "%{x:.1f} s: %{y:,.4g}", in_legend))
    return _chart(key, title, caption, tests, fig, (x_title, y_title), empty)


def thinned(x: list[float], y: list[float], limit: int = MAX_LINE_POINTS):
    """At most ``limit`` points: consecutive points averaged in equal buckets, so that a ten
    minute test sampled ten times a second stays a light figure and keeps its shape."""
    if len(x) <= limit:
        return x, y
    size = math.ceil(len(x) / limit)
    buckets = range(0, len(x), size)
    return (
        [statistics.fmean(x[i : i + size]) for i in buckets],
        [statistics.fmean(y[i : i + size]) for i in buckets],
    )


def cpu_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    samples = [s for s in test.samples if s.cpu_percent is not None]
    return [s.t for s in samples], [s.cpu_percent for s in samples]


def rss_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    samples = [s for s in test.samples if s.rss_bytes is not None]
    return [s.t for s in samples], [s.rss_bytes / MIB for s in samples]


def _first_number(data: dict, names: tuple[str, ...]) -> float | None:
    for name in names:
        value = data.get(name)
        if isinstance(value, int | float):
            return float(value)
    return None


def open_connection_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    pairs = [(i.t, _first_number(i.data, OPEN_CONNECTION_FIELDS)) for i in test.intervals]
    pairs = [(t, v) for t, v in pairs if v is not None]
    return [t for t, _ in pairs], [v for _, v in pairs]


def responses_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    """Cumulative responses received by the engine, the seed 004 "responses sent" curve."""
    x, y, total = [], [], 0.0
    for interval in test.intervals:
        step = _first_number(interval.data, COMPLETED_PER_INTERVAL)
        if step is not None:
            total += step
        else:
            cumulative = _first_number(interval.data, COMPLETED_CUMULATIVE)
            if cumulative is None:
                continue
            total = cumulative
        x.append(interval.t)
        y.append(total)
    return x, y


def emit_durations(key: str, tests: list[RecordedTest]) -> Chart:
    """Emit duration by place when per-delivery records exist, else the server's own
    per-event emit durations from its final ``GET /stats``."""
    if any(t.emits for t in tests) or not any(server_events(t) for t in tests):
        return emit_duration_by_place(key, tests)
    chart = median_bars(key, tests, list(EMIT_FIGURES), "Emit duration (the server's own figures)")
    chart.caption = (
        "From the server's GET /stats at the end of each test: mean and longest emit cycle, "
        "start of the cycle to its last delivery. No per-place records were stored. "
        + chart.caption
    )
    return chart


def server_events(test: RecordedTest) -> dict[str, dict]:
    """The ``events`` table of the last ``GET /stats`` the runner read in this test."""
    for snapshot in reversed(test.server_stats):
        events = snapshot.stats.get("events")
        if isinstance(events, dict) and events:
            return {k: v for k, v in events.items() if isinstance(v, dict)}
    return {}


STATS_WINDOW = "every emit of the test"
STATS_SOURCE = "the server's own counters (its final GET /stats)"


def _emit_mean_ms(test: RecordedTest) -> float | None:
    events = server_events(test).values()
    emits = sum(e.get("emits", 0) for e in events)
    total = sum(e.get("total_emit_duration_ms", 0) for e in events)
    return total / emits if emits else None


def _emit_max_ms(test: RecordedTest) -> float | None:
    durations = [e.get("max_emit_duration_ms") for e in server_events(test).values()]
    durations = [d for d in durations if isinstance(d, int | float)]
    return float(max(durations)) if durations else None


EMIT_FIGURES = (
    Figure(
        "emit_mean",
        "mean emit duration",
        "ms",
        False,
        _emit_mean_ms,
        window=STATS_WINDOW,
        source=STATS_SOURCE,
    ),
    Figure(
        "emit_max",
        "max emit duration",
        "ms",
        False,
        _emit_max_ms,
        window=STATS_WINDOW,
        source=STATS_SOURCE,
    ),
)


def _client_delay_lines(fig, contestant: str, colour: str, tests, span) -> None:
    """The clients' own delivery delay (the engine's p50 and p99, median over tests) as flat
    lines across the places: the figure the server's stamps should agree with."""
    for label, dash in (("p50", "dashdot"), ("p99", "longdash")):
        values = [summary_number(t, "event_delay_us", label) for t in tests]
        values = [v / 1000 for v in values if v is not None]
        if not values:
            continue
        level = statistics.median(values)
        fig.add_trace(
            go.Scatter(
                x=[float(span[0]), float(span[1])],
                y=[level, level],
                mode="lines",
                line={"color": colour, "dash": dash},
                name=f"{contestant} clients' delay {label}",
                legendgroup=contestant,
                hovertemplate=f"{contestant}: clients measured {label} %{{y}} ms<extra></extra>",
            )
        )


def emit_duration_by_place(key: str, tests: list[RecordedTest]) -> Chart:
    """Seed 004's emit duration against place in the emit list: per contestant, the median
    and the maximum over every emit cycle and repeat at each place."""
    colours = contestant_colours(tests)
    fig = go.Figure()
    for contestant, colour in colours.items():
        by_place: dict[int, list[float]] = {}
        for test in tests:
            if test.contestant == contestant:
                for emit in test.emits:
                    by_place.setdefault(emit.place, []).append(emit.duration_ms)
        if not by_place:
            continue
        places = sorted(by_place)
        for label, reduce, dash in (("median", statistics.median, None), ("max", max, "dot")):
            x, y = thinned([float(p) for p in places], [reduce(by_place[p]) for p in places])
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines",
                    line={"color": colour, "dash": dash},
                    name=f"{contestant} {label}",
                    legendgroup=contestant,
                    hovertemplate=f"{contestant} place %{{x}}: {label} %{{y}} ms<extra></extra>",
                )
            )
        mine = [t for t in tests if t.contestant == contestant]
        _client_delay_lines(fig, contestant, colour, mine, (places[0], places[-1]))
    return _chart(
        key,
        "Emit duration against place in the emit list",
        "Time from the start of an emit cycle to the delivery at each place (seed 004 §3.4), "
        "as the server stamped it (sent − created); beside it, the delivery delay its clients "
        "measured (created → arrival, p50 dash-dot, p99 long dash, median over tests). Stamps "
        "far below the clients' figure were taken before the writes reached the kernel.",
        tests,
        fig,
        ("place in the emit list", "emit duration (ms)"),
        "no emit records (no event emitter in this scenario, or none recorded)",
    )


def events_per_cycle(key: str, tests: list[RecordedTest]) -> Chart:
    """Deliveries the clients received from each emit cycle, one line a test; estimated from
    the engine's per-interval event counts when no per-delivery records were stored."""
    if not any(t.emits for t in tests) and any(_estimated_per_cycle(t)[0] for t in tests):
        return time_series(
            key,
            tests,
            "Events delivered per emit cycle (estimated)",
            "deliveries per emit cycle",
            _estimated_per_cycle,
            "Events the engine received per second times the emit interval: the deliveries an "
            "average emit cycle reached in each engine interval (seed 004 figure 20).",
            "no events received",
        )
    return time_series(
        key,
        tests,
        "Events delivered per emit cycle",
        "deliveries received",
        _deliveries_by_cycle,
        "How many subscribers each emit cycle reached (seed 004 figure 20); x is the cycle's "
        "sequence number.",
        "no emit records (no event emitter in this scenario, or none recorded)",
        x_title="emit cycle (seq)",
    )


def _estimated_per_cycle(test: RecordedTest) -> tuple[list[float], list[float]]:
    emit_interval_ms = test.params.get("emit_interval_ms")
    if not isinstance(emit_interval_ms, int | float) or emit_interval_ms <= 0:
        return [], []
    x, y = [], []
    for interval in test.intervals:
        events = _first_number(interval.data, ("events",))
        length = _first_number(interval.data, ("interval_s",))
        if events is not None and length:
            x.append(interval.t)
            y.append(events / length * emit_interval_ms / 1000)
    return x, y


def _deliveries_by_cycle(test: RecordedTest) -> tuple[list[float], list[float]]:
    counts: dict[int, int] = {}
    for emit in test.emits:
        # Sampled rows carry the cycle's count; unsampled ones count themselves.
        counts[emit.seq] = emit.received or counts.get(emit.seq, 0) + 1
    cycles = sorted(counts)
    return [float(c) for c in cycles], [float(counts[c]) for c in cycles]


def fds_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    samples = [s for s in test.samples if s.fds is not None]
    return [s.t for s in samples], [float(s.fds) for s in samples]


def descriptor_chart(key: str, tests: list[RecordedTest]) -> Chart:
    """The server's open descriptors over time: what idle and slow clients hold (issue 35)."""
    return time_series(
        key,
        tests,
        "Server descriptors over time",
        "open descriptors",
        fds_points,
        "Descriptors open in the server's whole process tree, sampled by the monitor "
        "(seconds from its start, as the CPU and memory charts).",
        "no monitor samples",
    )


def scenario_charts(tests: list[RecordedTest], metrics: dict[str, Figure], prefix: str):
    """Every chart of one scenario, in reading order."""
    keyed = f"{prefix}-"
    # A push scenario has no rate of its own: its events per second are its plan's.
    pushed = all(is_push(t) for t in tests)
    rates = [] if pushed else [keyed + "rps"]
    # A push scenario's tail is its delivery delay, a request scenario's its latency.
    tails = ["delay_p50", "delay_p99"] if pushed else ["p50", "p99"]
    title = "Delivery delay p50, p99" if pushed else "Latency p50, p99"
    return [
        *[median_bars(key, tests, [metrics["rps"]], "Requests/s per contestant") for key in rates],
        median_bars(keyed + "lat", tests, [metrics[name] for name in tails], title),
        percentile_curves(keyed + "pct", tests),
        time_series(
            keyed + "cpu",
            tests,
            "Server CPU over time",
            "CPU % (100 = one core)",
            cpu_points,
            "The server's whole process tree, sampled by the monitor.",
            "no monitor samples",
        ),
        time_series(
            keyed + "rss",
            tests,
            "Server memory (RSS) over time",
            "RSS (MiB)",
            rss_points,
            "Resident memory of the server's whole process tree.",
            "no monitor samples",
        ),
        time_series(
            keyed + "conn",
            tests,
            "Open connections over time",
            "open connections",
            open_connection_points,
            "Connections the engine held open, per engine interval.",
            "no engine intervals",
        ),
        time_series(
            keyed + "resp",
            tests,
            "Responses over time",
            "responses (cumulative)",
            responses_points,
            "Responses the engine received, summed over the test.",
            "no engine intervals",
        ),
        emit_durations(keyed + "emit", tests),
        events_per_cycle(keyed + "cycle", tests),
    ]
