"""The push study's section: which transport (long poll, comet, SSE, WebSocket) on which
architecture. Per transport, contestant and client count: the subscribers admitted by the
end of the ramp, the worst in-window cycle's completeness, the server's memory per held
connection, its CPU per event received over the window (both:
serverlab.results.report.figures.efficiency), the p50 and p99 delivery
delay over the window's cycles, the long poll's re-subscribe gap, the events lost,
duplicated and reordered, those the server delivered to clients that had gone ("delivered
to nobody", so that one architecture's dead subscribers do not pass for throughput) and
those it emitted after the window (a late clear's); per test, each in-window cycle's
completeness beside the server's own snapshot total, its delay p50/p99 and the engine's
drain time of it; and per transport and contestant, the capacity: the knee of its capacity
searches over the subscribers held (serverlab.base.capacity.holds; each search's curve is in
the capacity section, serverlab.results.report.sections.capacity), the most held in every
repeat below any level that was not. Runs stored before the search had a ladder of fixed
rungs, one test each, judged as a step by the ladder's rule (p99 delay at most 250 ms, nothing
lost). Cycles and their window: serverlab.results.report.figures.push.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import plotly.graph_objects as go

import serverlab.results.report.figures.push as push
from serverlab.base import capacity
from serverlab.results import stats
from serverlab.results.records import RecordedTest, Run
from serverlab.results.report.cells.formatting import format_cell
from serverlab.results.report.charts.chart import PALETTE, Chart, finish, flags_of
from serverlab.results.report.figures.figure import SUM, Accessor, Figure
from serverlab.results.report.figures.table import (
    METRICS_BY_NAME,
    PUSH_WINDOW,
    SUMMARIZED_STATUSES,
)
from serverlab.results.report.flags.groups import group_flags
from serverlab.results.report.flags.validity import Flag, validity_flags
from serverlab.results.report.sections.capacity import is_capacity_search

TRANSPORTS = ("longpoll", "comet", "sse", "websocket")
# The rule of the fixed-rung ladders of runs stored before the push capacity search.
CAPACITY_P99_MS = 250.0
# A search's (or a ladder's) top level this close to a process's descriptor limit is as far
# as the machine lets one process go, not as far as the server can.
DESCRIPTOR_MARGIN = 0.95
# The three Tomcat contestants answer WebSocket with one implementation (JSR 356 on the NIO
# connector): for WebSocket they are not three architectures.
SHARED_WEBSOCKET = ("java-tomcat-blocking", "java-tomcat-async", "java-virtual-threads")
SHARED_WEBSOCKET_NOTE = (
    "For WebSocket, java-tomcat-blocking, java-tomcat-async and java-virtual-threads share one "
    "implementation (Tomcat's JSR 356 endpoint on the NIO connector): a difference between "
    "them there is not a difference of architecture."
)


def is_push_test(test: RecordedTest) -> bool:
    """A cleartext push test: push over TLS is the TLS section's
    (serverlab.results.report.sections.tls), and a cell here must not mix the two."""
    return (
        test.params.get("behaviour") in TRANSPORTS
        and bool(test.params.get("emit_interval_ms"))
        and test.params.get("transport", "clear") == "clear"
    )


def is_capacity(test: RecordedTest) -> bool:
    """A push capacity search, or a rung of a ladder stored before the search."""
    return is_capacity_search(test) or test.scenario.startswith("capacity")


# --- figures of one test ------------------------------------------------------------------


def _events(test: RecordedTest) -> dict:
    return (test.summary or {}).get("events") or {}


def resubscribe_gap_ms(percentile: str) -> Accessor:
    """Long poll: an answer's arrival to the next poll (engine), in ms."""

    def of(test: RecordedTest) -> float | None:
        value = push.resubscribe_gap_us(test, percentile)
        return None if value is None else value / 1000

    return of


def _event_count(kind: str) -> Accessor:
    def of(test: RecordedTest) -> float | None:
        value = _events(test).get(kind)
        return None if value is None else float(value)

    return of


lost = _event_count("lost")


def admitted(test: RecordedTest) -> float | None:
    value = push.admitted(test)
    return None if value is None else float(value)


def _push(*row, **more) -> Figure:
    """A figure of the push window's cycles (serverlab.results.report.figures.push)."""
    return Figure(*row, window=PUSH_WINDOW, source="engine", **more)


def _count(name: str, label: str, of: Accessor, source: str = "engine") -> Figure:
    """A count over a cell's tests, summed rather than a median."""
    return Figure(name, label, "", False, of, window=PUSH_WINDOW, source=source, fold=SUM)


FIGURES = (
    _push("admitted", "subscribers at the end of the ramp", "", True, admitted),
    _push(
        "complete",
        "worst in-window cycle: received ÷ the plan's clients",
        "%",
        True,
        push.worst_completeness_percent,
    ),
    METRICS_BY_NAME["memory"],
    METRICS_BY_NAME["cpu_event"],
    METRICS_BY_NAME["delay_p50"],
    METRICS_BY_NAME["delay_p99"],
    _push("gap50", "long-poll re-subscribe gap p50", "ms", False, resubscribe_gap_ms("p50")),
    _push("gap99", "long-poll re-subscribe gap p99", "ms", False, resubscribe_gap_ms("p99")),
    _count("lost", "events lost", lost),
    _count("duplicated", "events duplicated", _event_count("duplicated")),
    _count("reordered", "events reordered", _event_count("reordered")),
    _count("nobody", "delivered to nobody", push.delivered_to_nobody),
    _count("after", "emitted after the window", push.emitted_after_window, "the server's /stats"),
)


# Figures drawn as charts (the counts are in the table).
CHARTED = ("complete", "memory", "cpu_event", "delay_p50", "delay_p99", "lost")


# --- the section --------------------------------------------------------------------------


@dataclass
class TransportRow:
    transport: str
    contestant: str
    architecture: str
    clients: int
    tests: int
    cells: list[tuple[str, str]]
    # Per figure, the codes of the flags of its tests that touch it (a cell marked !).
    marks: list[list[str]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # each kind with its repeats and sizes


@dataclass
class TransportSection:
    rows: list[TransportRow]
    capacity: list[tuple[str, str, str]]  # (transport, contestant, "≥ N …")
    charts: list[Chart]
    cycles: list[CycleRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class CycleRow:
    """One test's in-window cycles: completeness (received / subscribers at the end of the
    ramp) with the server's snapshot total beside it."""

    transport: str
    contestant: str
    repeat: int
    admitted: str
    cycles: list[str]
    plan_rate: str  # cycles x subscribers / window: a property of the plan


def cycle_row(test: RecordedTest) -> CycleRow:
    window = push.window_ms(test)
    start = window[0] if window else 0.0
    cells = [
        f"+{(c.created_ms - start) / 1000:.1f} s: {share:.1%} (server {c.total:,})"
        + _cycle_delays(c)
        for c, share in push.completeness(test)
    ]
    subscribers = push.admitted(test)
    rate = push.plan_events_per_s(test)
    return CycleRow(
        test.params.get("behaviour", ""),
        test.contestant,
        test.repeat_index,
        "-" if subscribers is None else f"{subscribers:,}",
        cells or ["no cycle in the window"],
        "-" if rate is None else f"{rate:,.0f}",
    )


def _cycle_delays(cycle: push.Cycle) -> str:
    """A cycle's delivery delay p50/p99 (clients) and its drain time at the engine."""
    delays, record = push.cycle_delay_us(cycle, [0.5, 0.99]), push.measured(cycle)
    if delays is None or record is None:
        return ""
    drain = record.drain_us
    drained = "-" if drain is None else f"{drain / 1000:,.1f}"
    return (
        f", delay p50 {delays[0] / 1000:,.1f} / p99 {delays[1] / 1000:,.1f} ms, drain {drained} ms"
    )


def transport_section(
    tests: list[RecordedTest], runs: list[Run], labels: dict[str, str]
) -> TransportSection | None:
    pushed = [t for t in tests if is_push_test(t)]
    if not pushed:
        return None
    study = [t for t in pushed if not is_capacity(t)]
    rows = [_row(cell, labels) for cell in _cells(study)]
    notes = []
    if any(r.tests == 1 for r in rows):
        notes.append("Some cells ran once (one repeat): their figures have no interval.")
    if any(r.transport == "websocket" and r.contestant in SHARED_WEBSOCKET for r in rows):
        notes.append(SHARED_WEBSOCKET_NOTE)
    return TransportSection(
        rows=rows,
        capacity=capacity_table([t for t in pushed if is_capacity(t)], descriptor_limit(runs)),
        charts=[_chart(figure, study) for figure in FIGURES if figure.name in CHARTED],
        cycles=[cycle_row(t) for t in study if push.window_ms(t) is not None],
        notes=notes,
    )


def _cells(tests: list[RecordedTest]) -> list[list[RecordedTest]]:
    cells: dict[tuple, list[RecordedTest]] = {}
    for test in tests:
        key = (
            TRANSPORTS.index(test.params["behaviour"]),
            test.params.get("clients", 0),
            test.contestant,
        )
        cells.setdefault(key, []).append(test)
    return [cells[key] for key in sorted(cells)]


def _row(cell: list[RecordedTest], labels: dict[str, str]) -> TransportRow:
    first = cell[0]
    kept = [t for t in cell if t.status in SUMMARIZED_STATUSES]
    cells = []
    for figure in FIGURES:
        values = [v for v in (figure.of(t) for t in kept) if v is not None]
        if figure.fold == SUM:
            cells.append((f"{sum(values):,.0f}" if values else "-", f"over {len(values)} tests"))
        else:
            cells.append(format_cell(stats.summarize(values)))
    architecture = labels.get(first.contestant, "")
    if first.params["behaviour"] == "websocket" and first.contestant in SHARED_WEBSOCKET:
        architecture = "Tomcat JSR 356 (shared by the three Tomcats)"
    return TransportRow(
        first.params["behaviour"],
        first.contestant,
        architecture,
        int(first.params.get("clients", 0)),
        len(cell),
        cells,
        [_marks(kept, figure) for figure in FIGURES],
        [group.text for group in group_flags(cell, _touches_a_figure)],
    )


def _marks(tests: list[RecordedTest], figure: Figure) -> list[str]:
    """The codes of the flags of these tests that touch one figure of the table."""
    return sorted(
        {flag.code for t in tests for flag in validity_flags(t) if flag.qualifies(figure)}
    )


def _touches_a_figure(flag: Flag) -> bool:
    # A crashed or invalid repeat's status flag touches every figure: it is listed too.
    return any(flag.qualifies(figure) for figure in FIGURES)


def descriptor_limit(runs: list[Run]) -> int | None:
    """The smallest descriptor limit a run's processes had, where runs recorded it."""
    limits = [
        (r.machine.get("rlimit_nofile") or {}).get("hard")
        for r in runs
        if isinstance(r.machine.get("rlimit_nofile"), dict)
    ]
    limits = [int(limit) for limit in limits if limit]
    return min(limits) if limits else None


def held(test: RecordedTest) -> bool:
    """A stored ladder rung's rule: p99 delay at most 250 ms, nothing lost, nothing invalid."""
    p99 = METRICS_BY_NAME["delay_p99"].of(test)
    return (
        test.status in SUMMARIZED_STATUSES
        and p99 is not None
        and p99 <= CAPACITY_P99_MS
        and not lost(test)
    )


def capacity_steps(test: RecordedTest) -> list[capacity.StepResult]:
    """A test's steps over the subscribers held: a search's, every one held only in a test
    that ended well; a stored ladder rung is one step."""
    if not is_capacity_search(test):
        return [capacity.StepResult(int(test.params["clients"]), held(test))]
    ok = test.status in SUMMARIZED_STATUSES
    found = test.run_info["capacity"]["steps"]
    return [capacity.StepResult(s["level"], ok and s["sustained"], s["reason"]) for s in found]


def capacity_table(tests: list[RecordedTest], nofile: int | None) -> list[tuple[str, str, str]]:
    """Per transport and contestant, the most subscribers held by every repeat, below any
    level that was not: the knee of all its steps together."""
    steps: dict[tuple[str, str], list[capacity.StepResult]] = {}
    tops: dict[tuple[str, str], float] = {}
    for test in tests:
        key = (test.params["behaviour"], test.contestant)
        steps.setdefault(key, []).extend(capacity_steps(test))
        tops[key] = max(tops.get(key, 0.0), _top(test))
    order = sorted(steps, key=lambda key: (TRANSPORTS.index(key[0]), key[1]))
    return [(*key, _capacity_text(steps[key], tops[key], nofile)) for key in order]


def _top(test: RecordedTest) -> float:
    """The most subscribers the test could try: its search's maximum, or its rung."""
    if is_capacity_search(test):
        return float(test.run_info["capacity"]["maximum"])
    return float(test.params["clients"])


def _capacity_text(steps: list[capacity.StepResult], top: float, nofile: int | None) -> str:
    found = capacity.knee(steps)
    if found is None:
        first = min(steps, key=lambda s: s.level)
        return f"< {first.level:,.0f} (none held)"
    best = int(found)
    if best >= top and nofile and top >= DESCRIPTOR_MARGIN * nofile:
        return f"≥ {best:,} (descriptor cap)"
    if best >= top:
        return f"≥ {best:,} (the search's maximum)"
    return f"{best:,}"


def _chart(figure: Figure, tests: list[RecordedTest]) -> Chart:
    """Median per transport, a bar per contestant (and client count when there are
    several), the interval as a whisker."""
    fig = go.Figure()
    groups: dict[tuple[str, int], list[RecordedTest]] = {}
    for test in tests:
        groups.setdefault((test.contestant, test.params.get("clients", 0)), []).append(test)
    several = len({clients for _, clients in groups}) > 1
    for index, ((contestant, clients), mine) in enumerate(sorted(groups.items())):
        xs, ys, up, down = [], [], [], []
        for transport in TRANSPORTS:
            values = [
                v
                for t in mine
                if t.params["behaviour"] == transport and t.status in SUMMARIZED_STATUSES
                for v in [figure.of(t)]
                if v is not None
            ]
            summary = stats.summarize(values)
            if not summary.n:
                continue
            xs.append(transport)
            ys.append(summary.median)
            up.append(summary.interval.high - summary.median)
            down.append(summary.median - summary.interval.low)
        if not xs:
            continue
        name = f"{contestant} ({clients:,} clients)" if several else contestant
        fig.add_trace(
            go.Bar(
                x=xs,
                y=ys,
                name=name,
                marker_color=PALETTE[index % len(PALETTE)],
                error_y={"type": "data", "symmetric": False, "array": up, "arrayminus": down},
            )
        )
    fig.update_layout(barmode="group")
    chart = Chart(
        f"transports-{figure.name}",
        f"{figure.label} by transport",
        "Bar: median over repeats; whisker: the interval of the median.",
        flags=flags_of(tests),
    )
    axes = ("transport", f"{figure.label} ({figure.unit})")
    return finish(chart, fig, axes, "no push test recorded this figure")
