"""The report's "at a glance" block: per scenario, the differences between contestants the
data supports, as ratios with their intervals, and nothing else.

Every pair of contestants of a scenario is judged on every metric (``verdicts.judge``:
no verdict on a flagged cell, Holm-Bonferroni across the scenario's pairs and metrics).
Each scenario is its own family, as each line of the block is a claim about one scenario:
with 2 contestants and 6 metrics a family is 6 tests, and 6 repeats a side (smallest p
2/924) can still support a difference; the whole report as one family (24 tests in the
quick suite) could not support any at 6 repeats, however far apart the servers are. Only a
supported difference becomes a sentence, as a ratio where both medians are positive; a scenario
with none says so, and why the figures fell short."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

from serverlab.results import stats
from serverlab.results.report.cells import Cell
from serverlab.results.report.verdicts import Judgement, judge


@dataclass
class Glance:
    scenario: str
    sentences: list[str] = field(default_factory=list)
    judgements: list[Judgement] = field(default_factory=list)
    none_note: str = ""

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "sentences": self.sentences or [self.none_note],
            "differences": [
                {
                    "a": j.a.contestant,
                    "b": j.b.contestant,
                    "metric": j.metric.name,
                    "a_tunables": j.a.tunables,
                    "b_tunables": j.b.tunables,
                    **j.as_dict(),
                }
                for j in self.judgements
                if _stated(j)
            ],
        }


def _stated(judgement: Judgement) -> bool:
    return judgement.supported


def sentence(judgement: Judgement) -> str:
    """ "node-http has 0.48× java-tomcat-blocking's latency p99 [0.45–0.52]"."""
    ratio = judgement.ratio
    if ratio is None:  # a median of zero: no ratio, the two medians instead
        a, b = judgement.a.summary.median, judgement.b.summary.median
        return (
            f"{_who(judgement.a)} is {judgement.words} than {_who(judgement.b)} on "
            f"{judgement.metric.label} ({a:.3g} against {b:.3g})"
        )
    low, high = ratio.interval.low, ratio.interval.high
    coverage = "" if ratio.interval.reaches_level else f", {ratio.interval.coverage:.0%} interval"
    return (
        f"{_who(judgement.a)} has {ratio.value:.2f}× {_who(judgement.b)}'s "
        f"{judgement.metric.label} [{low:.2f}–{high:.2f}{coverage}]"
    )


def _who(cell: Cell) -> str:
    return f"{cell.contestant} ({cell.tunables})" if cell.tunables else cell.contestant


def at_a_glance(cells: Sequence[Cell], alpha: float = stats.DEFAULT_ALPHA) -> list[Glance]:
    """One glance per scenario, in the order the cells give them."""
    by_scenario: dict[str, dict[str, list[Cell]]] = {}
    for cell in cells:
        by_scenario.setdefault(cell.scenario, {}).setdefault(cell.metric.name, []).append(cell)
    glances = []
    for name, metrics in by_scenario.items():
        # A figure no test of a side measured (socket memory of an old test) is no pair.
        measured = [[cell for cell in same if cell.summary.n] for same in metrics.values()]
        pairs = [pair for same in measured for pair in combinations(same, 2)]
        glance = Glance(name, judgements=judge(pairs, alpha))
        glance.sentences = [sentence(j) for j in glance.judgements if _stated(j)]
        glance.none_note = "" if glance.sentences else _none_note(glance.judgements)
        glances.append(glance)
    return glances


def _none_note(judgements: list[Judgement]) -> str:
    """Why nothing is stated: how many pairs were flagged, too few, or not significant."""
    if not judgements:
        return "No difference is supported: only one contestant ran this scenario."
    counts: dict[str, int] = {}
    for judgement in judgements:
        reason = judgement.verdict.value
        counts[reason] = counts.get(reason, 0) + 1
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"No difference is supported by the data ({len(judgements)} figures: {detail})."
