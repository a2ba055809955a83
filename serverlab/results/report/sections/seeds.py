"""The report's seed sections: for each seed study whose suite is among the selected runs, the
seed's published table beside our figures, as ratios between contestants (the machines
differ, so absolute figures do not compare), and one sentence, computed from the data, on
whether the seed's conclusion still holds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from serverlab.results import stats
from serverlab.results.records import RecordedTest, Run, StoredSuite

# The summary table's number format, so the same figure reads the same in both places.
from serverlab.results.report.cells.formatting import _number
from serverlab.results.report.figures.seed_figures import SEED_METRICS, FoldedFigure, fold
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.sections.seed_data import (
    EVERY_SCENARIO,
    LARGEST,
    Comparison,
    Expectation,
    Published,
    PublishedTable,
    Side,
    load_published,
)
from serverlab.results.report.sections.slow_link import SlowLinkBlock, slow_link_blocks

SUITE_SEED = re.compile(r"(?:^|/)seed-(\d{3})\b")
HOLDS, FAILS, NO_DATA = "holds", "fails", "not enough data"


@dataclass
class SeedRow:
    """One row of a seed's section: the study's published figure beside ours."""

    label: str
    where: str
    metric: str
    published: str
    ours: str
    detail: str
    beside: list[str]
    check: str
    ratio: float | None = None
    state: str = ""  # HOLDS, FAILS or NO_DATA; empty when nothing is expected


@dataclass
class SeedSection:
    seed: str
    anchor: str
    title: str
    source: str
    claim: str
    metric_note: str
    suites: list[str]
    tables: tuple[PublishedTable, ...]
    rows: list[SeedRow] = field(default_factory=list)
    verdict: str = NO_DATA
    sentence: str = ""
    # Tests whose generator was above 90 % CPU: their figures may be the sender's limit.
    generator_bound: list[str] = field(default_factory=list)
    # The seed's scenarios through a shaped link, the server's side of them (slow_link).
    slow_links: list[SlowLinkBlock] = field(default_factory=list)
    # Tests spread over generators that share one machine with the server: what their
    # figures are (capacity, not speed), as the run recorded it.
    spread_note: str = ""


def seed_of_suite(suite: StoredSuite) -> str | None:
    """The seed a suite reproduces: its recorded `seed`, else `seed-NNN` in its name or path."""
    recorded = getattr(suite, "seed", None)
    if recorded:
        return str(recorded)
    for text in (suite.name, suite.path):
        found = SUITE_SEED.search(text or "")
        if found:
            return found.group(1)
    return None


def seed_sections(
    tests: list[RecordedTest], runs: list[Run], suites: dict[int, StoredSuite]
) -> list[SeedSection]:
    """One section per seed present in the selected runs, in seed order."""
    seed_by_run: dict[int, str] = {}
    suite_names: dict[str, set[str]] = {}
    for run in runs:
        suite = suites.get(run.suite_id)
        seed = seed_of_suite(suite) if suite else None
        if seed:
            seed_by_run[run.id] = seed
            suite_names.setdefault(seed, set()).add(suite.name)
    sections = []
    for seed in sorted(suite_names):
        mine = [t for t in tests if seed_by_run.get(t.run_id) == seed]
        section = build_section(load_published(seed), mine, sorted(suite_names[seed]))
        section.spread_note = spread_note(mine, runs)
        sections.append(section)
    return sections


def spread_note(tests: list[RecordedTest], runs: list[Run]) -> str:
    """What the runs that spread these tests over generators said of their figures: on the
    virtual lab, that the generators and the server share one machine's CPUs."""
    spread = {t.run_id for t in tests if t.run_info.get("generators")}
    notes = {
        ((run.machine or {}).get("placement") or {}).get("note") for run in runs if run.id in spread
    }
    return "; ".join(sorted(note for note in notes if note))


def build_section(
    published: Published, tests: list[RecordedTest], suites: list[str]
) -> SeedSection:
    section = SeedSection(
        seed=published.seed,
        anchor=f"seed-{published.seed}",
        title=published.title,
        source=published.source,
        claim=published.claim,
        metric_note=published.metric_note,
        suites=suites,
        tables=published.tables,
    )
    section.rows = [compare(c, tests) for c in published.comparisons]
    section.generator_bound = generator_bound(tests)
    section.verdict, section.sentence = verdict(published, published.comparisons, section.rows)
    section.slow_links = slow_link_blocks(section.anchor, tests)
    return section


def generator_bound(tests: list[RecordedTest]) -> list[str]:
    """One line per test flagged generator-bound, naming its matrix point and engine CPU."""
    lines = []
    for test in tests:
        for flag in validity_flags(test):
            if flag.code == "generator-bound":
                mode = test.params.get("syslog_mode")
                where = f"{test.scenario} x {test.contestant}" + (f" ({mode})" if mode else "")
                lines.append(f"{where}, repeat {test.repeat_index + 1}: {flag.text}")
    return lines


def compare(comparison: Comparison, tests: list[RecordedTest]) -> SeedRow:
    params = _resolved_params(comparison, tests)
    top = _side_figure(comparison.numerator, params, tests)
    bottom = _side_figure(comparison.denominator, params, tests) if comparison.denominator else None
    ratio = _ratio(top, bottom) if comparison.denominator else (top.value if top else None)
    interval = _interval(top, bottom) if comparison.denominator else _interval(top, None)
    check, state = "", ""
    if comparison.expect:
        state = checked(comparison.expect, ratio, interval)
        check = f"{state} (expected {comparison.expect.text()}{_interval_text(interval)})"
    return SeedRow(
        label=comparison.label,
        where=", ".join(f"{k}={v}" for k, v in params),
        metric=_metric_label(comparison),
        published=_published_text(comparison),
        ours=_ratio_text(top, bottom, ratio) if comparison.denominator else _value_text(top),
        detail=_detail(top, bottom),
        beside=_beside(comparison, params, tests) if comparison.beside else [],
        check=check,
        ratio=ratio,
        state=state,
    )


def _interval(top: FoldedFigure | None, bottom: FoldedFigure | None) -> stats.Interval | None:
    """The interval of a median (no denominator) or of a ratio of medians; None for a
    count, or where a ratio has no interval (a side at zero)."""
    if top is None or not top.values:
        return None
    if bottom is None:
        return stats.median_interval(top.values)
    if not bottom.values:
        return None
    ratio = stats.ratio(top.values, bottom.values)
    return ratio.interval if ratio else None


def checked(expect: Expectation, value: float | None, interval: stats.Interval | None) -> str:
    """Holds when the whole interval meets the expectation, fails when none of it does,
    and is not enough data when the interval straddles the threshold. Without an interval
    (a count, a zero side) the figure itself is checked."""
    if value is None:
        return NO_DATA
    if interval is None:
        return HOLDS if expect.met_by(value) else FAILS
    ends = expect.met_by(interval.low), expect.met_by(interval.high)
    if all(ends):
        return HOLDS
    outside = (
        interval.high < expect.bounds[0] or interval.low > expect.bounds[1]
        if expect.kind == "between"
        else not any(ends)
    )
    return FAILS if outside else NO_DATA


def _interval_text(interval: stats.Interval | None) -> str:
    if interval is None:
        return ""
    if interval.coverage <= 0:
        return "; one repeat a side, no interval"
    return f"; interval {_number(interval.low)}–{_number(interval.high)}, {interval.coverage:.0%}"


def _resolved_params(
    comparison: Comparison, tests: list[RecordedTest]
) -> tuple[tuple[str, Any], ...]:
    """The comparison's parameters, "max" replaced by the largest value the tests have."""
    scenario = comparison.numerator.scenario
    candidates = [t for t in tests if scenario in (EVERY_SCENARIO, t.scenario)]
    resolved = []
    for key, value in comparison.params:
        if value == LARGEST:
            present = [t.params[key] for t in candidates if key in t.params]
            value = max(present) if present else LARGEST
        resolved.append((key, value))
    return tuple(resolved)


def side_tests(
    side: Side, params: tuple[tuple[str, Any], ...], tests: list[RecordedTest]
) -> list[RecordedTest]:
    return [
        t
        for t in tests
        if t.contestant == side.contestant
        and side.scenario in (EVERY_SCENARIO, t.scenario)
        and all(t.tunables.get(k) == v for k, v in side.tunables)
        and all(t.params.get(k) == v for k, v in params)
    ]


def _side_figure(
    side: Side | None, params: tuple[tuple[str, Any], ...], tests: list[RecordedTest]
) -> FoldedFigure | None:
    return fold(side.metric, side_tests(side, params, tests)) if side else None


def _ratio(top: FoldedFigure | None, bottom: FoldedFigure | None) -> float | None:
    if top is None or bottom is None or bottom.value == 0:
        return None
    return top.value / bottom.value


def _beside(
    comparison: Comparison, params: tuple[tuple[str, Any], ...], tests: list[RecordedTest]
) -> list[str]:
    """Every other contestant of the scenario as a ratio to the denominator's figure (to the
    numerator's when there is no denominator)."""
    reference_side = comparison.denominator or comparison.numerator
    reference = _side_figure(reference_side, params, tests)
    named = {comparison.numerator.contestant, reference_side.contestant}
    scenario = comparison.numerator.scenario
    others = dict.fromkeys(t.contestant for t in tests if scenario in (EVERY_SCENARIO, t.scenario))
    texts = []
    for contestant in others:
        if contestant in named:
            continue
        side = Side(scenario, contestant, comparison.numerator.metric)
        ratio = _ratio(_side_figure(side, params, tests), reference)
        texts.append(f"{contestant} {_times(ratio)}")
    return texts


def verdict(
    published: Published, comparisons: tuple[Comparison, ...], rows: list[SeedRow]
) -> tuple[str, str]:
    """One sentence: holds when every expected comparison holds, fails naming the ones that do
    not, and not enough data when any expected comparison has no figure or an interval
    that straddles its threshold."""
    judged = [(c, r) for c, r in zip(comparisons, rows, strict=True) if c.expect]
    missing = [c.label for c, r in judged if r.state == NO_DATA]
    failed = [c.label for c, r in judged if r.state == FAILS]
    claim = f"Seed {published.seed}'s conclusion, that {published.claim},"
    if not judged or missing:
        what = "; ".join(missing) or "no comparison to judge"
        return NO_DATA, f"{claim} cannot be judged: not enough data ({what})."
    if failed:
        failures = "; ".join(failed)
        return FAILS, f"{claim} does not hold here: {failures} did not come out as the seed found."
    return HOLDS, f"{claim} still holds on our runs ({len(judged)} of {len(judged)} checks)."


def _metric_label(comparison: Comparison) -> str:
    metrics = dict.fromkeys(s.metric for s in (comparison.numerator, comparison.denominator) if s)
    return " / ".join(SEED_METRICS[m].titled for m in metrics)


def _published_text(comparison: Comparison) -> str:
    figures = comparison.published
    if not figures:
        return "not published"
    if len(figures) == 1:
        return _number(figures[0])
    ratio = figures[0] / figures[1] if figures[1] else None
    return f"{_number(figures[0])} / {_number(figures[1])} = {_times(ratio)}"


def _ratio_text(top: FoldedFigure | None, bottom: FoldedFigure | None, ratio: float | None) -> str:
    if top is None or bottom is None:
        return "no data"
    return f"{_number(top.value)} / {_number(bottom.value)} = {_times(ratio)}"


def _value_text(figure: FoldedFigure | None) -> str:
    return "no data" if figure is None else _number(figure.value)


def _detail(top: FoldedFigure | None, bottom: FoldedFigure | None) -> str:
    counts = [f"n={f.tests}" for f in (top, bottom) if f is not None]
    return " / ".join(counts)


def _times(ratio: float | None) -> str:
    return "no data" if ratio is None else f"{ratio:.2f}×"
