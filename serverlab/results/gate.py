"""The regression gate (``serverlab compare A B --fail-on-regression PCT``) and the paired
verdict: a delta with its interval, set beside an A/A noise floor measured in the same data.

For each series (scenario, contestant, figure) the delta is median(B) / median(A) - 1 with
the distribution-free interval of the ratio (Hodges-Lehmann on the log scale, from every
pair of tests: ``serverlab.results.stats.ratio``). The floor is the same computed between
the two halves of A, its tests taken alternately in the order they ran (in a paired run,
A against A'): how far apart two identical arms came in this sitting. Its size is that
difference itself (its interval is shown beside it): the noise of the tests is already in
the delta's own interval, and counting it twice would hide any change smaller than the
range of a few tests (one outlier among four A' sets that range).

- A difference is called only when the delta's interval excludes zero, the floor and 5 %
  (the least material difference of every verdict, ``verdicts.MATERIAL_SHARE``).
- The gate fails (exit 1) only when a regression larger than PCT is supported that way: the
  whole interval is worse than both PCT and the floor.
- It passes (exit 0) when no regression is supported and the delta itself is within PCT.
- It is inconclusive (exit 3) otherwise: a delta beyond PCT that the interval or the floor
  does not support, too few tests for an interval, or a flagged test (a flag, such as
  machine-busy or generator-bound, says the figure cannot be trusted, so it can neither
  pass nor fail a gate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.verdicts import MATERIAL_SHARE
from serverlab.results.report.charts.series import summarized_values
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import METRICS_BY_NAME
from serverlab.results.report.flags.validity import flags_for

# Request latency for request tests, delivery delay for push tests: a series gets the rows
# of the figures its tests have by design (Figure.applies).
GATE_METRICS = ("rps", "p50", "p99", "delay_p50", "delay_p99")
# The floor splits A in two; each half needs this many tests for an interval at all.
MIN_HALF = 2


class GateOutcome(Enum):
    REGRESSION = "regression"
    NONE = "no regression"
    INCONCLUSIVE = "inconclusive"


EXIT_CODES = {GateOutcome.REGRESSION: 1, GateOutcome.NONE: 0, GateOutcome.INCONCLUSIVE: 3}


@dataclass(frozen=True)
class Delta:
    """B against A in percent (positive: B's value is higher), with its interval."""

    percent: float
    low: float
    high: float
    coverage: float

    def text(self) -> str:
        return f"{self.percent:+.1f} % [{self.low:+.1f}, {self.high:+.1f}]"


def percent_delta(a: Sequence[float], b: Sequence[float]) -> Delta | None:
    ratio = stats.ratio(list(b), list(a))
    if ratio is None:
        return None
    interval = ratio.interval
    return Delta(
        (ratio.value - 1) * 100,
        (interval.low - 1) * 100,
        (interval.high - 1) * 100,
        interval.coverage,
    )


@dataclass(frozen=True)
class GateRow:
    series: str
    metric: Figure
    n_a: int
    n_b: int
    delta: Delta | None
    floor: Delta | None
    outcome: GateOutcome
    reason: str
    flags: tuple[str, ...] = ()

    @property
    def floor_size(self) -> float | None:
        """How far apart A and A' came, whichever way."""
        return None if self.floor is None else abs(self.floor.percent)

    @property
    def difference(self) -> str:
        """'B faster' (or better, worse, slower) only where the delta's interval excludes
        zero, the floor and the least material difference (verdicts.MATERIAL_SHARE);
        else that none stands out."""
        size = self.floor_size
        if self.delta is None or size is None:
            return "-"
        d, least = self.delta, max(size, 100 * MATERIAL_SHARE)
        if d.low > least or d.high < -least:
            better = (d.low > 0) == self.metric.higher_is_better
            return f"B {self.metric.better if better else self.metric.worse}"
        if size >= 100 * MATERIAL_SHARE:
            return "within the floor"
        return f"no material difference (within ±{least:g} %)"


def worsening(delta: Delta, metric: Figure) -> tuple[float, float, float]:
    """(point, low, high) of how much worse B is than A, in percent: the delta itself for a
    figure where lower is better, its negation where higher is better."""
    if metric.higher_is_better:
        return -delta.percent, -delta.high, -delta.low
    return delta.percent, delta.low, delta.high


def judge(
    values_a: list[float], values_b: list[float], metric: Figure, threshold: float
) -> tuple[Delta | None, Delta | None, GateOutcome, str]:
    """The delta, the floor and the gate's outcome for one series of unflagged values
    (``values_a`` in the order its tests ran)."""
    half_1, half_2 = values_a[0::2], values_a[1::2]
    delta = percent_delta(values_a, values_b)
    floor = percent_delta(half_1, half_2)
    if len(half_2) < MIN_HALF or len(values_b) < MIN_HALF:
        return delta, floor, GateOutcome.INCONCLUSIVE, _too_few(len(values_a), len(values_b))
    if delta is None or floor is None:
        return delta, floor, GateOutcome.INCONCLUSIVE, "no ratio: a value is zero or negative"
    size = abs(floor.percent)
    point, low, _high = worsening(delta, metric)
    if low > threshold and low > size:
        return delta, floor, GateOutcome.REGRESSION, f"worse by at least {low:.1f} %"
    if point > threshold:
        reason = f"worse by {point:.1f} %, not supported beyond " + (
            f"the floor ({size:.1f} %)" if low > threshold else f"{threshold:g} %"
        )
        return delta, floor, GateOutcome.INCONCLUSIVE, reason
    return delta, floor, GateOutcome.NONE, f"within {threshold:g} %"


def _too_few(n_a: int, n_b: int) -> str:
    return (
        f"too few tests (A {n_a}, B {n_b}): the floor needs {2 * MIN_HALF} of A, and B {MIN_HALF}"
    )


def gate_rows(
    tests_a: list[RecordedTest],
    tests_b: list[RecordedTest],
    key_of: Callable[[RecordedTest], tuple[str, str]],
    metrics: Sequence[str] = GATE_METRICS,
    threshold: float = 0.0,
) -> list[GateRow]:
    """One row per series both sides measured. ``key_of`` gives a test's (key, label)."""
    groups_a, groups_b = _grouped(tests_a, key_of), _grouped(tests_b, key_of)
    rows = []
    for key, (label, group_a) in groups_a.items():
        if key not in groups_b:
            continue
        group_b = groups_b[key][1]
        for figure in (METRICS_BY_NAME[name] for name in metrics):
            if any(figure.applies(test) for test in group_a + group_b):
                rows.append(_row(label, figure, group_a, group_b, threshold))
    return rows


def _row(
    label: str, metric: Figure, group_a: list[RecordedTest], group_b: list[RecordedTest], pct
) -> GateRow:
    values_a, values_b = summarized_values(group_a, metric), summarized_values(group_b, metric)
    flagged = sorted({f.code for t in group_a + group_b for f in flags_for(t, metric.name)})
    delta, floor, outcome, reason = judge(values_a, values_b, metric, pct)
    if flagged:
        outcome, reason = GateOutcome.INCONCLUSIVE, f"flagged: {', '.join(flagged)}"
    return GateRow(
        label, metric, len(values_a), len(values_b), delta, floor, outcome, reason, tuple(flagged)
    )


def _grouped(
    tests: list[RecordedTest], key_of: Callable[[RecordedTest], tuple[str, str]]
) -> dict[str, tuple[str, list[RecordedTest]]]:
    groups: dict[str, tuple[str, list[RecordedTest]]] = {}
    for test in sorted(tests, key=lambda t: (t.started_at, t.id or 0)):
        key, label = key_of(test)
        groups.setdefault(key, (label, []))[1].append(test)
    return groups


def exit_code(rows: list[GateRow]) -> int:
    """1 if any series regressed beyond the threshold; else 3 if any is inconclusive (or
    there is nothing to judge); else 0."""
    outcomes = {row.outcome for row in rows}
    if GateOutcome.REGRESSION in outcomes:
        return EXIT_CODES[GateOutcome.REGRESSION]
    if GateOutcome.INCONCLUSIVE in outcomes or not rows:
        return EXIT_CODES[GateOutcome.INCONCLUSIVE]
    return EXIT_CODES[GateOutcome.NONE]


def verdict_line(code: int) -> str:
    """The gate's verdict in words, with its exit code, for a CI log's last line."""
    outcome = next(o for o, c in EXIT_CODES.items() if c == code)
    return f"gate: {outcome.value} (exit {code})"


def print_gate(rows: list[GateRow], title: str, threshold: float | None, console=None) -> None:
    from rich import box
    from rich.table import Table

    from serverlab.base import terminal

    console = console or terminal.console()
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("series", "figure", "n A/B", "B vs A", "A/A floor", "difference"):
        table.add_column(column)
    if threshold is not None:
        table.add_column(f"gate ({threshold:g} %)")
    for row in rows:
        floor = "-" if row.floor is None else f"±{row.floor_size:.1f} %\n({row.floor.text()})"
        cells = [
            row.series,
            row.metric.label,
            f"{row.n_a}/{row.n_b}",
            "-" if row.delta is None else row.delta.text(),
            floor,
            row.difference,
        ]
        if threshold is not None:
            cells.append(f"{row.outcome.value}: {row.reason}")
        table.add_row(*cells)
    console.print(table)
    console.print(GATE_NOTE)


GATE_NOTE = (
    "B vs A: median(B) / median(A) - 1, with the distribution-free interval of the ratio. "
    "A/A floor: the same between the two halves of A taken alternately in the order they ran "
    "(A and A' in a paired run): ± its size, its interval below. A difference "
    "is called only when the interval excludes zero, the floor and 5 %; a flagged test makes "
    "the gate inconclusive."
)


def selection_gate(
    db_path, side_a, side_b, metrics: Sequence[str] = GATE_METRICS, threshold: float = 0.0
) -> list[GateRow]:
    """The gate over two stored selections, series lined up as ``serverlab compare`` does:
    scenario by scenario when the sides are two contestants, else scenario, contestant and
    tunables alike."""
    from serverlab.results.report.cells.scenarios import (
        comparison_key,
        scenario_key,
        scenario_labels,
    )
    from serverlab.results.report.selection import parse_selection, select_tests
    from serverlab.results.store import Store

    selection_a, selection_b = parse_selection(side_a), parse_selection(side_b)
    with Store(db_path, create=False) as store:
        tests_a, tests_b = select_tests(store, selection_a), select_tests(store, selection_b)
    by_contestant = not (len(selection_a.contestants) == len(selection_b.contestants) == 1)
    labels = scenario_labels(tests_a + tests_b)

    def key_of(test: RecordedTest) -> tuple[str, str]:
        label = labels[scenario_key(test)]
        if by_contestant:
            tunables = ", ".join(f"{k}={v}" for k, v in sorted(test.tunables.items()))
            label += f" / {test.contestant}" + (f" [{tunables}]" if tunables else "")
        return comparison_key(test, by_contestant), label

    return gate_rows(tests_a, tests_b, key_of, metrics, threshold)


def paired_gate(
    db_path, run_id: int, metrics: Sequence[str] = GATE_METRICS, threshold: float = 0.0
) -> list[GateRow]:
    """The gate over one paired run: arm B against arms A and A' (tests whose run info says
    ``paired``), series by scenario and contestant; the floor is A against A'."""
    from serverlab.results.report.cells.scenarios import paired_arm, scenario_key, scenario_labels
    from serverlab.results.report.selection import parse_selection, select_tests
    from serverlab.results.store import Store

    with Store(db_path, create=False) as store:
        tests = select_tests(store, parse_selection(f"run:{run_id}"))
    arms = [(t, paired_arm(t)) for t in tests]
    # The arms line up here, series by series: the keys and labels leave the arm out.
    labels = scenario_labels(tests, with_arm=False)

    def key_of(test: RecordedTest) -> tuple[str, str]:
        key = scenario_key(test, with_arm=False)
        return key + test.contestant, f"{labels[key]} / {test.contestant}"

    side_a = [t for t, arm in arms if arm in ("A", "A'")]
    side_b = [t for t, arm in arms if arm == "B"]
    return gate_rows(side_a, side_b, key_of, metrics, threshold)
