"""The report's "at a glance" block: per scenario, the differences between contestants the
data supports, as ratios with their intervals, and nothing else.

Every pair of contestants of a scenario is judged on every metric (``verdicts.judge``:
no verdict on a flagged cell, Holm-Bonferroni across the scenario's pairs and metrics).
Each scenario is its own family, as each line of the block is a claim about one scenario:
with 2 contestants and 6 metrics a family is 6 tests, and 6 repeats a side (smallest p
2/924) can still support a difference; the whole report as one family (24 tests in the
quick suite) could not support any at 6 repeats, however far apart the servers are. Only a
supported difference becomes a sentence, as a ratio where both medians are positive, with
both medians, their unit and the repeats it stands on, largest effect first; a scenario
with none says so, and why the figures fell short.

The figures people choose a server by are answered for either way (``HEADLINE``): for a
request scenario its throughput, latency p99 and CPU per request; for push, its event
delay p50 and p99. Where one of those has no supported verdict, a line says why ("both
saturated", "no material difference", "flagged", "too few repeats") with its figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

from serverlab.results import stats
from serverlab.results.report.cells.cell import Cell
from serverlab.results.report.cells.verdicts import Judgement, by_effect, judge

# The figures the first screen answers for, supported or not, by kind of scenario.
REQUEST_HEADLINE = ("rps", "p99", "cpu_req")
PUSH_HEADLINE = ("delay_p50", "delay_p99")


@dataclass
class Glance:
    scenario: str
    sentences: list[str] = field(default_factory=list)
    judgements: list[Judgement] = field(default_factory=list)
    none_note: str = ""
    # One line per headline figure and pair with no supported verdict: why not.
    why_not: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "sentences": self.sentences or [self.none_note],
            "not_supported": self.why_not,
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
    """ "node-http has 0.48× java-tomcat-blocking's latency p99 [0.45–0.52]: 1.20 against
    2.50 ms"."""
    ratio = judgement.ratio
    medians = judgement.statement.removeprefix(judgement.words)
    if ratio is None:  # a median of zero: no ratio, the two medians alone
        return (
            f"{_who(judgement.a)} is {judgement.words} than {_who(judgement.b)} on "
            f"{judgement.metric.label}{medians}"
        )
    low, high = ratio.interval.low, ratio.interval.high
    coverage = "" if ratio.interval.reaches_level else f", {ratio.interval.coverage:.0%} interval"
    return (
        f"{_who(judgement.a)} has {ratio.value:.2f}× {_who(judgement.b)}'s "
        f"{judgement.metric.label} [{low:.2f}–{high:.2f}{coverage}]{medians}"
    )


def why_not(judgement: Judgement) -> str:
    """ "throughput, node-http against java-tomcat-blocking: both saturated (...)"."""
    who = f"{_who(judgement.a)} against {_who(judgement.b)}"
    return f"{judgement.metric.label}, {who}: {judgement.statement}"


def _headline(metrics: dict[str, list[Cell]]) -> tuple[str, ...]:
    """A request scenario's headline figures, or push's (no requests per second)."""
    requests = any(cell.summary.n for cell in metrics.get("rps", []))
    return REQUEST_HEADLINE if requests else PUSH_HEADLINE


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
        glance = Glance(name, judgements=by_effect(judge(pairs, alpha)))
        glance.sentences = [sentence(j) for j in glance.judgements if _stated(j)]
        glance.none_note = "" if glance.sentences else _none_note(glance.judgements)
        headline = _headline(metrics)
        glance.why_not = [
            why_not(j)
            for name in headline
            for j in glance.judgements
            if j.metric.name == name and not _stated(j)
        ]
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
