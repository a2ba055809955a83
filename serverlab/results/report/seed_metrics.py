"""The figures the seed sections compare, each taken from one stored test, and how the tests
of one side are folded into one figure (the median over repeats, or a count)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.engine_summary import number_at, summary_number
from serverlab.results.report.metrics import (
    SUMMARIZED_STATUSES,
    error_count,
    mean_server_cpu,
    peak_rss_mib,
)


@dataclass(frozen=True)
class SeedMetric:
    label: str
    of: Callable[[RecordedTest], float | None]
    # A count over every test, crashed ones included, rather than a median over good ones.
    counts_all: bool = False


def _milliseconds(*path: str) -> Callable[[RecordedTest], float | None]:
    def of(test: RecordedTest) -> float | None:
        micros = summary_number(test, *path)
        return None if micros is None else micros / 1000

    return of


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


SEED_METRICS: dict[str, SeedMetric] = {
    "mean_ms": SeedMetric("mean latency (ms)", _milliseconds("latency_us", "mean")),
    "p50_ms": SeedMetric("latency p50 (ms)", _milliseconds("latency_us", "p50")),
    "p99_ms": SeedMetric("latency p99 (ms)", _milliseconds("latency_us", "p99")),
    "connect_mean_ms": SeedMetric("mean connect time (ms)", _milliseconds("connect_us", "mean")),
    "duration_s": SeedMetric("test duration (s)", lambda t: summary_number(t, "duration_s")),
    "rps": SeedMetric("answers per second", lambda t: summary_number(t, "rps")),
    "errors": SeedMetric("failed requests", error_count),
    "rss_mib": SeedMetric("server peak RSS (MiB)", peak_rss_mib),
    "cpu_percent": SeedMetric("server mean CPU (%)", mean_server_cpu),
    "emit_mean_ms": SeedMetric("mean emit duration (ms)", mean_emit_ms),
    "received_per_s": SeedMetric("messages received per second", received_per_s),
    "lost": SeedMetric("messages lost", syslog_lost),
    "crashes": SeedMetric("crashed tests", crashed, counts_all=True),
}


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
    if chosen.counts_all:
        return FoldedFigure(sum(chosen.of(t) or 0 for t in tests), len(tests)) if tests else None
    values = [chosen.of(t) for t in tests if t.status in SUMMARIZED_STATUSES]
    present = [v for v in values if v is not None]
    return FoldedFigure(stats.median(present), len(present), tuple(present)) if present else None
