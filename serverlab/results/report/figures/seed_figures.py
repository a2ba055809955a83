"""The figures the seed sections compare, each taken from one stored test, and how the tests
of one side are folded into one figure (the median over repeats, or a count)."""

from __future__ import annotations

from dataclasses import dataclass

from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.engine_summary import number_at, summary_number
from serverlab.results.report.figures.figure import SUM_ALL, Figure, request_latency_ms
from serverlab.results.report.figures.table import (
    ENGINE_WINDOW,
    METRICS_BY_NAME,
    SUMMARIZED_STATUSES,
)


def _connect_mean_ms(test: RecordedTest) -> float | None:
    micros = summary_number(test, "connect_us", "mean")
    return None if micros is None else micros / 1000


def received_per_s(test: RecordedTest) -> float | None:
    """Messages/s counted at the receiver, over the time until its count stopped rising
    (the runner's `syslog` figures, spec §7)."""
    return summary_number(test, "syslog", "messages_per_s")


def syslog_lost(test: RecordedTest) -> float | None:
    return summary_number(test, "syslog", "lost")


def mean_emit_ms(test: RecordedTest) -> float | None:
    """Mean emit-cycle duration over every event, from the last /stats of the test."""
    if not test.server_stats:
        return None
    events = test.server_stats[-1].stats.get("events")
    if not isinstance(events, dict):
        return None
    counters = [e for e in events.values() if isinstance(e, dict)]
    emits = sum(number_at(e.get("emits")) or 0 for e in counters)
    total = sum(number_at(e.get("total_emit_duration_ms")) or 0 for e in counters)
    return total / emits if emits else None


def crashed(test: RecordedTest) -> float:
    return 1.0 if test.status == "crashed" else 0.0


def _engine(*row, **more) -> Figure:
    """A figure of the engine's summary, over its measured run."""
    return Figure(*row, window=ENGINE_WINDOW, source="engine", **more)


SYSLOG_WINDOW = "until the receiver's count stopped rising"
SEED_FIGURES = (
    _engine("mean_ms", "mean latency", "ms", False, request_latency_ms("mean")),
    _engine("p50_ms", "latency p50", "ms", False, request_latency_ms("p50")),
    _engine("p99_ms", "latency p99", "ms", False, request_latency_ms("p99")),
    _engine("connect_mean_ms", "mean connect time", "ms", False, _connect_mean_ms),
    _engine("duration_s", "test duration", "s", False, lambda t: summary_number(t, "duration_s")),
    _engine("rps", "answers per second", "", True, lambda t: summary_number(t, "rps")),
    METRICS_BY_NAME["errors"].view("errors", label="failed requests"),
    METRICS_BY_NAME["rss"].view("rss_mib", label="server peak RSS"),
    METRICS_BY_NAME["cpu"].view("cpu_percent", label="server mean CPU"),
    Figure(
        "emit_mean_ms",
        "mean emit duration",
        "ms",
        False,
        mean_emit_ms,
        window="the whole test",
        source="the server's last /stats",
    ),
    Figure(
        "received_per_s",
        "messages received per second",
        "",
        True,
        received_per_s,
        window=SYSLOG_WINDOW,
        source="the runner's syslog receiver",
    ),
    Figure(
        "lost",
        "messages lost",
        "",
        False,
        syslog_lost,
        window=SYSLOG_WINDOW,
        source="the runner's syslog receiver",
    ),
    Figure(
        "crashes",
        "crashed tests",
        "",
        False,
        crashed,
        window="the whole test",
        source="the runner",
        fold=SUM_ALL,
    ),
)
SEED_METRICS = {figure.name: figure for figure in SEED_FIGURES}


@dataclass(frozen=True)
class FoldedFigure:
    """One side's figure folded over its tests (``fold``) and how many tests it stands on;
    ``values``, one per test, when the figure is a median (a count has none: it is exact)."""

    value: float
    tests: int
    values: tuple[float, ...] = ()


def fold(metric: str, tests: list[RecordedTest]) -> FoldedFigure | None:
    """The median over the side's good tests, or the count over all of them; None when no
    test gives the figure (missing, crashed or invalid)."""
    chosen = SEED_METRICS[metric]
    if chosen.fold == SUM_ALL:
        return FoldedFigure(sum(chosen.of(t) or 0 for t in tests), len(tests)) if tests else None
    values = [chosen.of(t) for t in tests if t.status in SUMMARIZED_STATUSES]
    present = [v for v in values if v is not None]
    return FoldedFigure(stats.median(present), len(present), tuple(present)) if present else None
