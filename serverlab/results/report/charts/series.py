"""Series over runs and their change points, for ``serverlab history`` and the report's
History section.

A series is one figure of one contestant in one scenario (same parameters and tunables) of one
suite, on one machine fingerprint: runs on other hardware or kernels are other series, never
mixed in. Its points are the runs that measured it, in the order they started: the median over
that run's repeats with its distribution-free interval (``serverlab.results.stats``).

Change points come from E-Divisive means as Apache Otava implements it (Fleming et al.,
"Hunter", ICPE 2023: sliding windows, then a two-sided t-test per candidate split), run over
the run medians. Otava was chosen over MongoDB's signal-processing-algorithms because it is
maintained (an Apache project, released 2026) and installs as wheels beside what the lab
already uses, where the other was last released in 2024 and pins numpy below 2 and an old
setuptools. Each change point gives its size (mean after over mean before) and p-value, and the
software versions that changed between the two runs it lies between (the fingerprint leaves
versions out, so a series crosses a version change and shows it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from serverlab.results import stats
from serverlab.results.records import RecordedTest, Run, StoredSuite
from serverlab.results.report.cells.scenarios import paired_arm, scenario_key, scenario_labels
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import METRICS_BY_NAME, SUMMARIZED_STATUSES
from serverlab.results.report.flags.validity import flags_for

# A push test's p50 and p99 are its delivery delay's (delay_p50, delay_p99), a request test's
# its latency's: a series keeps those its tests have values of (build_series drops the rest).
HISTORY_METRICS = ("rps", "p50", "p99", "delay_p50", "delay_p99", "cpu", "rss")
# Otava's own default: a change point is kept only below this p (it tests 10x looser first).
DEFAULT_MAX_PVALUE = 0.001
# Otava's sliding window, in points; longer histories are split into windows this long.
WINDOW = 50


@dataclass(frozen=True)
class Point:
    """One run's value of a series: the median over its repeats, and what ran it."""

    run_id: int
    started_at: float
    summary: stats.Summary
    versions: dict[str, str]
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChangePoint:
    """Between points ``index - 1`` and ``index`` the series' mean moved by ``percent``."""

    index: int
    percent: float
    p_value: float
    mean_before: float
    mean_after: float
    versions_changed: tuple[str, ...] = ()


@dataclass
class Series:
    suite: str
    scenario: str
    contestant: str
    tunables: str
    metric: Figure
    fingerprint: str
    points: list[Point] = field(default_factory=list)
    change_points: list[ChangePoint] = field(default_factory=list)

    @property
    def label(self) -> str:
        tunables = f" [{self.tunables}]" if self.tunables else ""
        return f"{self.suite} / {self.scenario} / {self.contestant}{tunables}"

    def point_of_run(self, run_id: int) -> int | None:
        return next((i for i, p in enumerate(self.points) if p.run_id == run_id), None)


def change_points(
    values: Sequence[float], max_pvalue: float = DEFAULT_MAX_PVALUE
) -> list[ChangePoint]:
    """E-Divisive change points of a series of values (Otava), without version detail."""
    if len(values) < 3:
        return []
    # Imported here: Otava brings numpy and scipy, a second to load that every other
    # command (and every report of a single run) would pay for nothing.
    from otava.analysis import compute_change_points

    # Otava's t-test warns on segments of identical values (a p of NaN); those are no change.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        found, _weak = compute_change_points(list(values), window_len=WINDOW, max_pvalue=max_pvalue)
    return [
        ChangePoint(
            index=int(point.index),
            percent=float(point.stats.forward_change_percent()),
            p_value=float(point.stats.pvalue),
            mean_before=float(point.stats.mean_before()),
            mean_after=float(point.stats.mean_after()),
        )
        for point in found
        if not math.isnan(point.stats.pvalue)
    ]


def flat_versions(run: Run, contestant: str) -> dict[str, str]:
    """The versions that bear on one contestant's series: serverlab, the engine build, that
    contestant, and the tools on the machine (a runtime such as node is one)."""
    versions = run.versions
    flat = {
        "serverlab": versions.get("serverlab"),
        "engine": versions.get("engine"),
        contestant: (versions.get("contestants") or {}).get(contestant),
    }
    flat.update({f"tool {k}": v for k, v in (versions.get("tools") or {}).items()})
    return {k: str(v) for k, v in flat.items() if v}


def version_changes(before: dict[str, str], after: dict[str, str]) -> tuple[str, ...]:
    """'name old → new' for every version that differs between two runs."""
    names = sorted(set(before) | set(after))
    return tuple(
        f"{name}: {before.get(name, '-')} → {after.get(name, '-')}"
        for name in names
        if before.get(name) != after.get(name)
    )


def build_series(
    tests: list[RecordedTest],
    runs: list[Run],
    suites: dict[int, StoredSuite],
    metrics: Sequence[str] = HISTORY_METRICS,
    max_pvalue: float = DEFAULT_MAX_PVALUE,
    mix_machines: bool = False,
) -> list[Series]:
    """Every series the tests hold, its points in run order, and its change points.
    ``mix_machines`` (asked for, never the default) lets one series cross fingerprints."""
    by_run = {r.id: r for r in runs}
    labels = scenario_labels(tests)
    groups: dict[tuple, dict[int, list[RecordedTest]]] = {}
    # A paired run's arms are two configurations in one run: they belong to its own
    # verdict (serverlab compare --paired), not to one series over runs.
    alone = [t for t in tests if not paired_arm(t)]
    for test in sorted(alone, key=lambda t: (by_run[t.run_id].started_at, t.run_id)):
        run = by_run[test.run_id]
        suite = suites[run.suite_id].name if run.suite_id in suites else "?"
        tunables = ", ".join(f"{k}={v}" for k, v in sorted(test.tunables.items()))
        machine = "any" if mix_machines else run.fingerprint_id
        key = (suite, labels[scenario_key(test)], test.contestant, tunables, machine)
        groups.setdefault(key, {}).setdefault(run.id, []).append(test)
    found = []
    for key, tests_by_run in groups.items():
        for name in metrics:
            series = Series(*key[:4], METRICS_BY_NAME[name], key[4])
            series.points = _points(series, tests_by_run, by_run)
            if len(series.points) >= 1:
                _mark_change_points(series, max_pvalue)
                found.append(series)
    return found


def _points(
    series: Series, tests_by_run: dict[int, list[RecordedTest]], by_run: dict[int, Run]
) -> list[Point]:
    points = []
    for run_id, group in tests_by_run.items():
        values = summarized_values(group, series.metric)
        if not values:
            continue
        flags = sorted({f.code for t in group for f in flags_for(t, series.metric.name)})
        run = by_run[run_id]
        points.append(
            Point(
                run_id,
                run.started_at,
                stats.summarize(values),
                flat_versions(run, series.contestant),
                tuple(flags),
            )
        )
    return points


def summarized_values(tests: list[RecordedTest], metric: Figure) -> list[float]:
    """The metric's values over the tests that count (status ok), missing ones left out."""
    values = [metric.of(t) for t in tests if t.status in SUMMARIZED_STATUSES]
    return [v for v in values if v is not None and not math.isnan(v)]


def _mark_change_points(series: Series, max_pvalue: float) -> None:
    medians = [p.summary.median for p in series.points]
    series.change_points = [
        ChangePoint(
            **{
                **cp.__dict__,
                "versions_changed": version_changes(
                    series.points[cp.index - 1].versions, series.points[cp.index].versions
                ),
            }
        )
        for cp in change_points(medians, max_pvalue)
    ]
