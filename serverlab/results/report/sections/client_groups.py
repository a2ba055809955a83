"""The client groups of a grouped test (issue 35; engine/README.md, "Client groups"): each
group's own figures beside the test's totals, every one read from the engine's summary
(its `groups`, each group's own counts and histograms over the group's window), with the
window it covers and the test's flags, which travel with every figure of the test."""

from __future__ import annotations

from dataclasses import dataclass

from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.cell import tunable_text
from serverlab.results.report.charts.chart import test_label
from serverlab.results.report.figures.engine_summary import number_at
from serverlab.results.report.flags.validity import validity_flags

# The row of the test's own figures: every group's together, over the whole run.
TOTALS = "all groups"


@dataclass(frozen=True)
class GroupRow:
    """One group of one test (or the test's totals), as the engine's summary has it."""

    test: str
    tunables: str
    group: str
    window: str  # seconds from the load's start
    clients: str
    requests: str
    answered: str
    throughput: str  # answers a second over the window
    p50_ms: str
    p99_ms: str
    errors: str
    flags: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


def group_rows(tests: list[RecordedTest]) -> list[GroupRow]:
    """Per grouped test, a row for each group then one for its totals; none for a test the
    engine ran without groups."""
    rows = []
    for test in tests:
        groups = (test.summary or {}).get("groups")
        if not isinstance(groups, dict) or not groups:
            continue
        planned = _planned_clients(test)
        for name, summary in sorted(groups.items(), key=lambda item: _order(planned, item[0])):
            window = summary.get("window") or {}
            start, stop = window.get("start_s"), window.get("stop_s")
            rows.append(_row(test, name, summary, start, stop, planned.get(name)))
        whole = sum(planned.values()) if planned else None
        duration = number_at(test.summary, "duration_s")
        rows.append(_row(test, TOTALS, test.summary, 0.0, duration, whole))
    return rows


def _planned_clients(test: RecordedTest) -> dict[str, float]:
    """Each group's clients, in the order the plan names them: the whole plan's (kept in
    run_info), not a generator's part, which a spread test's merged summary holds."""
    plan = test.run_info.get("engine_plan") or (test.summary or {}).get("plan") or {}
    groups = [g for g in plan.get("groups") or [] if isinstance(g, dict)]
    return {str(g.get("name")): number_at(g, "connections") or 0.0 for g in groups}


def _order(planned: dict[str, float], name: str) -> tuple[int, str]:
    """Groups in the order the plan names them (the summary's are by name)."""
    names = list(planned)
    return (names.index(name) if name in names else len(names), name)


def _row(test, name: str, summary: dict, start, stop, clients: float | None) -> GroupRow:
    duration = number_at(summary, "duration_s")
    answered = number_at(summary, "answered")
    errors = summary.get("errors") or {}
    return GroupRow(
        test=test_label(test),
        tunables=tunable_text(test),
        group=name,
        window=_window(start, stop),
        clients=_count(clients),
        requests=_count(number_at(summary, "requests")),
        answered=_count(answered),
        throughput="-" if not duration or answered is None else f"{answered / duration:,.0f}",
        p50_ms=_ms(number_at(summary, "latency_us", "p50")),
        p99_ms=_ms(number_at(summary, "latency_us", "p99")),
        errors=_count(sum(v for v in errors.values() if isinstance(v, int))),
        flags="; ".join(flag.text for flag in validity_flags(test)),
    )


def _window(start, stop) -> str:
    if start is None or stop is None:
        return "-"
    return f"{start:g}-{stop:g} s"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3g}"
