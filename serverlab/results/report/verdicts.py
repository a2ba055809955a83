"""Verdicts between pairs of cells, one family at a time: the figures of ``compare`` and of
the report's "at a glance" block.

A pair gets no verdict when either cell is flagged (a flag says the figure is not to be
trusted, so no difference built on it is either), nor when a side has too few repeats for
the rank test to say anything. The others are tested (two-sided Mann-Whitney) and their p
values adjusted together by Holm-Bonferroni, so that the chance of any false verdict in
the family stays under alpha. A pair whose pooled values are all equal cannot reach any p
below 1 and is left out of the family (Tarone's rule: a test that cannot reject costs the
others nothing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from serverlab.results import stats
from serverlab.results.report.cells import Cell


@dataclass(frozen=True)
class Judgement:
    a: Cell
    b: Cell
    verdict: stats.Verdict
    test: stats.MannWhitney | None
    adjusted_p: float | None
    ratio: stats.Ratio | None

    @property
    def metric(self):
        return self.a.metric

    @property
    def supported(self) -> bool:
        return self.verdict in (stats.Verdict.BETTER, stats.Verdict.WORSE)

    @property
    def words(self) -> str:
        if self.verdict is stats.Verdict.BETTER:
            return self.metric.better
        if self.verdict is stats.Verdict.WORSE:
            return self.metric.worse
        if self.verdict is stats.Verdict.TOO_FEW:
            n_a, n_b = self.a.summary.n, self.b.summary.n
            counts = f"n={n_a} each" if n_a == n_b else f"n={n_a} and {n_b}"
            return f"{self.verdict.value} ({counts}; {stats.MIN_REPEATS_TO_TEST} or more needed)"
        if self.verdict is stats.Verdict.FLAGGED:
            codes = sorted({f.code for cell in (self.a, self.b) for f in cell.flags})
            return f"{self.verdict.value} ({', '.join(codes)})"
        return self.verdict.value

    def as_dict(self) -> dict:
        ratio = self.ratio
        return {
            "verdict": self.verdict.name.lower(),
            "words": self.words,
            "p": None if self.test is None else self.test.p_value,
            "adjusted_p": self.adjusted_p,
            "ratio": None
            if ratio is None
            else {
                "value": ratio.value,
                "low": ratio.interval.low,
                "high": ratio.interval.high,
                "coverage": ratio.interval.coverage,
            },
        }


def _untested(a: Cell, b: Cell) -> stats.Verdict | None:
    """Why the pair gets no test, or None when it gets one."""
    if a.flagged or b.flagged:
        return stats.Verdict.FLAGGED
    if min(a.summary.n, b.summary.n) < stats.MIN_REPEATS_TO_TEST:
        return stats.Verdict.TOO_FEW
    if len(set(a.values) | set(b.values)) == 1:
        return stats.Verdict.NO_DIFFERENCE  # every value equal: no p could fall below 1
    return None


def judge(
    pairs: Sequence[tuple[Cell, Cell]], alpha: float = stats.DEFAULT_ALPHA
) -> list[Judgement]:
    """Every pair's verdict, the tested ones Holm-adjusted together (see the docstring)."""
    reasons = [_untested(a, b) for a, b in pairs]
    tests = [
        None if reason else stats.mann_whitney(a.values, b.values)
        for (a, b), reason in zip(pairs, reasons, strict=True)
    ]
    tested = [i for i, test in enumerate(tests) if test is not None]
    adjusted = dict(zip(tested, stats.holm([tests[i].p_value for i in tested]), strict=True))
    judgements = []
    for i, ((a, b), reason, test) in enumerate(zip(pairs, reasons, tests, strict=True)):
        verdict = reason
        if test is not None:
            higher = a.metric.higher_is_better
            verdict = stats.decided(test, adjusted[i], len(a.values), len(b.values), higher, alpha)
        ratio = stats.ratio(a.values, b.values)
        judgements.append(Judgement(a, b, verdict, test, adjusted.get(i), ratio))
    return judgements
