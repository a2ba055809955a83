"""Verdicts between pairs of cells, one family at a time: the figures of ``compare`` and of
the report's "at a glance" block.

A verdict compares the repeats no flag qualifies (``Cell.compared``): a flagged repeat
leaves that figure's comparison, and the others decide when enough remain; the verdict says
which repeats it stands on ("5 of 6 repeats; r3 machine-busy"). A pair gets no test when a
side has fewer than ``stats.MIN_REPEATS_TO_TEST`` such repeats, nor when its repeat counts
could give no p small enough for the family (Tarone's rule, ``stats.tarone_family``): "too
few repeats", or "flagged" when it is the flags that left too few. The others are tested
(two-sided Mann-Whitney) and their p values adjusted together by Holm-Bonferroni, so that
the chance of any false verdict in the family stays under alpha. A pair whose pooled values
are all equal cannot reach any p below 1 and is left out of the family too.

A significant difference is then only stated when it matters:

- both sides at the figure's ceiling (``Figure.ceiling``: 90 % or more of the CPU a closed
  loop allowed the server) read "both saturated": neither server could have used more, so
  the difference is of what else ran in the window, not of the servers;
- a difference of medians under ``MATERIAL_SHARE`` (5 %) of the smaller, or under the A/A
  noise floor where one was measured, or under the figure's least absolute difference
  (``Figure.min_difference``: socket memory read at one instant), reads "no material
  difference".

Both stay in the family (they are tested), so that setting them aside after the test can
only make the other verdicts more cautious, never less. Every verdict states its unit and
both medians (``Judgement.statement``), and ``by_effect`` orders verdicts by effect size:
the absolute log of the ratio of the medians."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from serverlab.results import stats
from serverlab.results.report.cells.cell import Cell
from serverlab.results.report.cells.formatting import compact_number

# A difference of medians under this share of the smaller is not material.
MATERIAL_SHARE = 0.05
# Both sides at this share of the figure's ceiling or more: both saturated.
SATURATED_SHARE = 0.90


@dataclass(frozen=True)
class Judgement:
    a: Cell
    b: Cell
    verdict: stats.Verdict
    test: stats.MannWhitney | None
    adjusted_p: float | None
    ratio: stats.Ratio | None
    # The least relative difference that is material for this pair: MATERIAL_SHARE, or
    # the A/A noise floor when that is larger.
    floor: float = MATERIAL_SHARE
    # Why a tested pair was not stated: its figures' detail (saturation, the difference).
    detail: str = ""
    # Tarone: the smallest p the family needed, for a pair left out of it.
    needed_p: float | None = None

    @property
    def metric(self):
        return self.a.metric

    @property
    def supported(self) -> bool:
        return self.verdict in (stats.Verdict.BETTER, stats.Verdict.WORSE)

    @property
    def medians(self) -> tuple[float, float]:
        """The medians of the compared (unflagged) repeats, NaN for a side without any."""
        return _median(self.a.compared), _median(self.b.compared)

    @property
    def effect(self) -> float:
        """The effect size: |log(median A / median B)|; infinite where one median is zero
        and the other is not."""
        a, b = self.medians
        if math.isnan(a) or math.isnan(b):
            return 0.0
        if a > 0 and b > 0:
            return abs(math.log(a / b))
        return 0.0 if a == b else math.inf

    @property
    def words(self) -> str:
        verdict = self.verdict
        if verdict is stats.Verdict.BETTER:
            return self.metric.better
        if verdict is stats.Verdict.WORSE:
            return self.metric.worse
        if verdict is stats.Verdict.TOO_FEW:
            return f"{verdict.value} ({self._counts()}; {self._needed()})"
        if verdict is stats.Verdict.FLAGGED:
            return f"{verdict.value} (too few unflagged repeats: {self._needed()})"
        if self.detail:
            return f"{verdict.value} ({self.detail})"
        return verdict.value

    @property
    def statement(self) -> str:
        """The verdict with its unit, both medians and the repeats it stands on: "faster:
        21.3 against 92.1 µs (5 of 6 repeats against 6; r3 machine-busy)"."""
        a, b = self.medians
        if math.isnan(a) or math.isnan(b):
            return f"{self.words}{self._repeats()}"
        unit = self.metric.unit or self.metric.label
        said = f"{self.words}: {compact_number(a)} against {compact_number(b)} {unit}"
        return said + self._repeats()

    def _counts(self) -> str:
        n_a, n_b = len(self.a.compared), len(self.b.compared)
        return f"n={n_a} each" if n_a == n_b else f"n={n_a} and {n_b}"

    def _needed(self) -> str:
        if self.needed_p is not None:
            n_a, n_b = len(self.a.compared), len(self.b.compared)
            least = stats.smallest_p(n_a, n_b)
            return f"they can give no p below {least:.2g}, the family needs {self.needed_p:.2g}"
        return f"{stats.MIN_REPEATS_TO_TEST} or more needed"

    def _repeats(self) -> str:
        """ "(5 of 6 repeats against 6; r3 machine-busy)" where a flag took repeats out."""
        if not (self.a.dropped or self.b.dropped):
            return ""
        sides = [_repeat_count(c) for c in (self.a, self.b)]
        dropped = [_dropped_text(c) for c in (self.a, self.b) if c.dropped]
        return f" ({sides[0]} repeats against {sides[1]}; {'; '.join(dropped)})"

    def as_dict(self) -> dict:
        ratio = self.ratio
        a, b = self.medians
        return {
            "verdict": self.verdict.name.lower(),
            "words": self.words,
            "statement": self.statement,
            "unit": self.metric.unit,
            "median_a": None if math.isnan(a) else a,
            "median_b": None if math.isnan(b) else b,
            "n_a": len(self.a.compared),
            "n_b": len(self.b.compared),
            "dropped_a": [r for r, _ in self.a.dropped],
            "dropped_b": [r for r, _ in self.b.dropped],
            "effect": None if math.isinf(self.effect) else self.effect,
            "floor": self.floor,
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


def _repeat_count(cell: Cell) -> str:
    kept = len(cell.compared)
    return f"{kept} of {kept + len(cell.dropped)}" if cell.dropped else str(kept)


def _dropped_text(cell: Cell) -> str:
    """ "node-http machine-busy r1–r4, r6, not-steady r2": a cell's dropped repeats, by
    flag."""
    by_code: dict[str, list[int]] = {}
    for repeat, codes in cell.dropped:
        for code in codes.split(", "):
            by_code.setdefault(code, []).append(int(repeat.removeprefix("r")))
    said = ", ".join(f"{code} {_runs(numbers)}" for code, numbers in sorted(by_code.items()))
    return f"{cell.contestant} {said}"


def _runs(numbers: list[int]) -> str:
    """ "r1–r3, r5" for repeats 1, 2, 3 and 5."""
    spans: list[list[int]] = []
    for number in sorted(set(numbers)):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(f"r{a}" if a == b else f"r{a}–r{b}" for a, b in spans)


def _median(values: Sequence[float]) -> float:
    return stats.median(values) if values else math.nan


def _untested(a: Cell, b: Cell) -> stats.Verdict | None:
    """Why the pair gets no test, before its family is known, or None."""
    fewest = min(len(a.compared), len(b.compared))
    if fewest < stats.MIN_REPEATS_TO_TEST:
        dropped = a.dropped or b.dropped
        return stats.Verdict.FLAGGED if dropped else stats.Verdict.TOO_FEW
    if len(set(a.compared) | set(b.compared)) == 1:
        return stats.Verdict.NO_DIFFERENCE  # every value equal: no p could fall below 1
    return None


def _family(
    pairs: Sequence[tuple[Cell, Cell]], reasons: list, alpha: float
) -> tuple[set[int], float]:
    """The pairs Tarone's rule keeps for testing, and the p alone they each had to be able
    to reach (alpha / K)."""
    candidates = [i for i, reason in enumerate(reasons) if reason is None]
    smallest = [
        stats.smallest_p(len(pairs[i][0].compared), len(pairs[i][1].compared)) for i in candidates
    ]
    kept, k = stats.tarone_family(smallest, alpha)
    return {candidates[i] for i in kept}, alpha / k


def _settled(a: Cell, b: Cell, verdict: stats.Verdict, floor: float) -> tuple[stats.Verdict, str]:
    """A significant verdict set aside when both sides are saturated or the difference is
    not material (see the module docstring), with the figures that say why."""
    if verdict not in (stats.Verdict.BETTER, stats.Verdict.WORSE):
        return verdict, ""
    saturated = _saturation(a), _saturation(b)
    if all(share is not None and share >= SATURATED_SHARE for share in saturated):
        shares = " and ".join(f"{share:.0%}" for share in saturated)
        return stats.Verdict.SATURATED, f"{shares} of the CPU each was allowed"
    short = _immaterial(_median(a.compared), _median(b.compared), a.metric, floor)
    return (stats.Verdict.NOT_MATERIAL, short) if short else (verdict, "")


def _saturation(cell: Cell) -> float | None:
    shares = [share for share in cell.ceiling_shares if share is not None]
    return stats.median(shares) if shares else None


def _immaterial(a: float, b: float, metric, floor: float) -> str:
    """Why the difference of the medians a and b is not material, or ""."""
    apart = abs(a - b)
    unit = metric.unit or metric.label
    if apart < metric.min_difference:
        return f"{compact_number(apart)} {unit} apart, under {metric.min_difference:g} {unit}"
    smaller = min(abs(a), abs(b))
    if smaller > 0 and apart / smaller < floor:
        return f"{apart / smaller:.1%} apart, under {floor:.0%}"
    return ""


def judge(
    pairs: Sequence[tuple[Cell, Cell]],
    alpha: float = stats.DEFAULT_ALPHA,
    noise: Sequence[float | None] | None = None,
) -> list[Judgement]:
    """Every pair's verdict, the tested ones Holm-adjusted together (see the docstring).
    ``noise``, one per pair where given: the A/A noise floor measured for it, a share."""
    reasons = [_untested(a, b) for a, b in pairs]
    family, needed = _family(pairs, reasons, alpha)
    tests = [
        stats.mann_whitney(a.compared, b.compared) if i in family else None
        for i, (a, b) in enumerate(pairs)
    ]
    tested = [i for i, test in enumerate(tests) if test is not None]
    adjusted = dict(zip(tested, stats.holm([tests[i].p_value for i in tested]), strict=True))
    judgements = []
    for i, ((a, b), reason, test) in enumerate(zip(pairs, reasons, tests, strict=True)):
        floor = max(MATERIAL_SHARE, (noise[i] if noise else None) or 0.0)
        verdict, detail, short = reason, "", None
        if test is not None:
            higher = a.metric.higher_is_better
            decided = stats.decided(
                test, adjusted[i], len(a.compared), len(b.compared), higher, alpha
            )
            verdict, detail = _settled(a, b, decided, floor)
        elif reason is None:
            verdict, short = stats.Verdict.TOO_FEW, needed
        ratio = stats.ratio(a.compared, b.compared)
        judgements.append(
            Judgement(a, b, verdict, test, adjusted.get(i), ratio, floor, detail, short)
        )
    return judgements


def by_effect(judgements: Sequence[Judgement]) -> list[Judgement]:
    """The supported verdicts first, largest effect first; then the others as given."""
    stated = sorted((j for j in judgements if j.supported), key=lambda j: -j.effect)
    return stated + [j for j in judgements if not j.supported]
