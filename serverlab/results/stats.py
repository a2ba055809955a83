"""Statistics over repeats: medians, confidence intervals of the median, and a two-sample test.

Methods, chosen so that they hold without assuming any distribution of the measurements:

- Confidence interval of the median: the distribution-free order-statistic interval. For n
  values the interval (x_(k), x_(n+1-k)) covers the true median with probability
  1 - 2 * P(Binomial(n, 1/2) <= k - 1); we take the largest k whose coverage is still at
  least the requested level. Below six repeats not even (min, max) reaches 95 %, so the
  interval returned is (min, max) with its true, lower coverage (``Interval.coverage``), and
  ``Interval.reaches_level`` is False. The report prints that coverage.
- Two sets compared: the Mann-Whitney U test, two-sided. Exact (full enumeration of the
  rank sums, which also handles ties exactly) while C(n1 + n2, n1) is small enough; above
  that the normal approximation with tie and continuity corrections. It is run only when
  both sides have at least MIN_REPEATS_TO_TEST values: with three against three the
  smallest possible two-sided p is 0.1, so the test could never find a difference at 0.05,
  and "no significant difference" would be a wrong answer, not a weak one. Below that the
  verdict is "too few repeats to test", as benchstat warns.
- The ratio of two medians, with the distribution-free interval that goes with the U
  test (Hodges-Lehmann on the log scale): the ordered ratios a_i / b_j of every pair, from
  the k-th smallest to the k-th largest, k the largest count whose coverage
  1 - 2 P(U <= k - 1) still reaches the level. Too few pairs for 95 % give the range of
  the pairwise ratios, with its real, lower coverage (90 % for 3 against 3).
- Many verdicts at once: Holm-Bonferroni (``holm``). Twenty tests at p < 0.05 find one
  difference by chance alone; Holm's step-down adjustment keeps the chance of any false
  verdict among them under alpha, and is never less powerful than plain Bonferroni.
- Which tests join that family: Tarone's rule (``tarone_family``). A test's repeat counts
  alone bound the smallest p it can give (``smallest_p``: 2 / C(n_a + n_b, n_a), fully
  separated; 6 against 6: 0.0022, 5 against 6: 0.0043, 4 against 6: 0.0095, 4 against 4:
  0.029). A test that could not get under alpha / K, with K tests adjusted together, can
  never reach a verdict; it is said to have too few repeats, and leaves the family, so
  that it does not weaken the others. With eight figures judged per scenario, 5 repeats
  against 6 are enough (0.0043 < 0.05 / 8) and 4 against 6 are not.

Never best-of-N: the figures are the median and its interval.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05
# Above this many rank arrangements the exact test would take too long; C(20, 10) = 184,756.
EXACT_ENUMERATION_LIMIT = 200_000
# Fewer repeats a side than this, and no two-sided p can fall below 0.05 (4 against 4: 0.029).
MIN_REPEATS_TO_TEST = 4


@dataclass(frozen=True)
class Interval:
    """A confidence interval of the median and the coverage it really has."""

    low: float
    high: float
    coverage: float
    requested: float

    @property
    def reaches_level(self) -> bool:
        return self.coverage >= self.requested


@dataclass(frozen=True)
class Summary:
    """The median of a set of repeats and its confidence interval."""

    n: int
    median: float
    interval: Interval | None


@dataclass(frozen=True)
class MannWhitney:
    """A two-sided Mann-Whitney U test of sample ``a`` against sample ``b``."""

    u: float
    p_value: float
    method: str


@dataclass(frozen=True)
class Ratio:
    """median(a) / median(b), and the interval of the ratio with its real coverage."""

    value: float
    interval: Interval


class Verdict(Enum):
    BETTER = "better"
    WORSE = "worse"
    NO_DIFFERENCE = "no significant difference"
    # Significant, but smaller than the least difference that matters (a share, an A/A
    # noise floor, or a figure's least absolute difference).
    NOT_MATERIAL = "no material difference"
    # Both sides at the figure's ceiling (a CPU % a closed loop cannot push higher).
    SATURATED = "both saturated"
    TOO_FEW = "too few repeats to test"
    FLAGGED = "no verdict: flagged"


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def _binomial_half_cdf(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The order-statistic confidence interval of the median (see the module docstring)."""
    if not values:
        raise ValueError("confidence interval of no values")
    ordered = sorted(values)
    n = len(ordered)
    best_k = 1
    for k in range(1, n // 2 + 1):
        if 1 - 2 * _binomial_half_cdf(n, k - 1) >= confidence:
            best_k = k
        else:
            break
    coverage = 1 - 2 * _binomial_half_cdf(n, best_k - 1)
    return Interval(
        low=float(ordered[best_k - 1]),
        high=float(ordered[n - best_k]),
        coverage=coverage,
        requested=confidence,
    )


def summarize(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Summary:
    """Median and interval of the values that exist; an empty set gives a median of NaN."""
    present = [v for v in values if v is not None and not math.isnan(v)]
    if not present:
        return Summary(n=0, median=math.nan, interval=None)
    return Summary(
        n=len(present),
        median=median(present),
        interval=median_interval(present, confidence),
    )


def _midranks(pooled: Sequence[float]) -> list[float]:
    """Ranks 1..n of the pooled values, ties given the mean of the ranks they span."""
    order = sorted(range(len(pooled)), key=lambda i: pooled[i])
    ranks = [0.0] * len(pooled)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and pooled[order[end + 1]] == pooled[order[start]]:
            end += 1
        mean_rank = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = mean_rank
        start = end + 1
    return ranks


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """Two-sided Mann-Whitney U test; ``u`` is the U statistic of ``a``."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney needs at least one value on each side")
    ranks = _midranks(list(a) + list(b))
    rank_sum_a = sum(ranks[:n1])
    u = rank_sum_a - n1 * (n1 + 1) / 2
    if math.comb(n1 + n2, n1) <= EXACT_ENUMERATION_LIMIT:
        return MannWhitney(u=u, p_value=_exact_p(ranks, n1, rank_sum_a), method="exact")
    return MannWhitney(u=u, p_value=_normal_p(ranks, n1, n2, u), method="normal approximation")


def _exact_p(ranks: list[float], n1: int, observed_rank_sum: float) -> float:
    """P(|R - E[R]| >= |r - E[R]|) over every equally likely split of the pooled ranks."""
    n = len(ranks)
    expected = n1 * (n + 1) / 2
    observed_distance = abs(observed_rank_sum - expected)
    # Rank sums are multiples of 1/2; the tolerance absorbs float error in the comparison.
    tolerance = 1e-9
    as_extreme = sum(
        1
        for chosen in itertools.combinations(ranks, n1)
        if abs(sum(chosen) - expected) >= observed_distance - tolerance
    )
    return as_extreme / math.comb(n, n1)


def _normal_p(ranks: list[float], n1: int, n2: int, u: float) -> float:
    n = n1 + n2
    tie_sizes: dict[float, int] = {}
    for rank in ranks:
        tie_sizes[rank] = tie_sizes.get(rank, 0) + 1
    tie_term = sum(t**3 - t for t in tie_sizes.values()) / (n * (n - 1))
    variance = n1 * n2 / 12 * ((n + 1) - tie_term)
    if variance <= 0:
        return 1.0
    distance = max(abs(u - n1 * n2 / 2) - 0.5, 0.0)
    z = distance / math.sqrt(variance)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def verdict(
    a: Sequence[float],
    b: Sequence[float],
    higher_is_better: bool,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[Verdict, MannWhitney | None]:
    """Is ``a`` better, worse, or not significantly different from ``b``? With fewer than
    MIN_REPEATS_TO_TEST values on a side the test cannot tell: too few to test, no result."""
    if min(len(a), len(b)) < MIN_REPEATS_TO_TEST:
        return Verdict.TOO_FEW, None
    test = mann_whitney(a, b)
    return decided(test, test.p_value, len(a), len(b), higher_is_better, alpha), test


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the exact test can give n_a against n_b values: both sides
    fully separated, either way round (ties can only raise it)."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def tarone_family(smallest: Sequence[float], alpha: float = DEFAULT_ALPHA) -> tuple[list[int], int]:
    """Which of these tests can reach a verdict, from the smallest p each could give alone
    (its repeat counts, not its values): Tarone's rule. K is the least count such that at
    most K tests could fall below alpha / K; those tests are the family, and the others,
    which no adjustment for K tests could let through, leave it and cost it nothing. The
    choice reads only the counts of repeats, so the family's Holm adjustment stays exact.
    Returns (the indices of the family, K)."""
    for k in range(1, len(smallest) + 1):
        family = [i for i, p in enumerate(smallest) if p < alpha / k]
        if len(family) <= k:
            return family, k
    return list(range(len(smallest))), max(len(smallest), 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p values, in the order given: the i-th smallest of m is
    multiplied by m - i + 1, then made non-decreasing in that order and capped at 1. A
    verdict stands where its adjusted p is below alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def decided(
    test: MannWhitney,
    p_value: float,
    n_a: int,
    n_b: int,
    higher_is_better: bool,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The verdict of a test whose p (adjusted, say) is ``p_value``."""
    if p_value >= alpha:
        return Verdict.NO_DIFFERENCE
    # The U statistic says which side tends higher even when the medians happen to be equal.
    a_is_higher = test.u > n_a * n_b / 2
    return Verdict.BETTER if a_is_higher == higher_is_better else Verdict.WORSE


def ratio(a: Sequence[float], b: Sequence[float], confidence: float = DEFAULT_CONFIDENCE):
    """median(a) / median(b) with the pairwise-ratio interval (see the module docstring);
    None where a ratio means nothing: an empty side, or a value that is not positive."""
    if not a or not b or min(a) <= 0 or min(b) <= 0:
        return None
    ratios = sorted(x / y for x in a for y in b)
    k, coverage = _pairwise_rank(len(a), len(b), confidence)
    interval = Interval(ratios[k - 1], ratios[len(ratios) - k], coverage, confidence)
    return Ratio(median(a) / median(b), interval)


def _pairwise_rank(n1: int, n2: int, confidence: float) -> tuple[int, float]:
    """The largest k (at least 1) whose interval of ordered pairwise differences covers at
    least `confidence`, and the coverage it really has."""
    cdf = _u_null_cdf(n1, n2)
    best = (1, 1 - 2 * cdf[0])
    for k in range(2, n1 * n2 // 2 + 1):
        coverage = 1 - 2 * cdf[k - 1]
        if coverage < confidence:
            break
        best = (k, coverage)
    return best


@functools.cache
def _u_null_cdf(n1: int, n2: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0 .. n1*n2, U the Mann-Whitney statistic of n1 against n2 values
    with no true difference (no ties), by the recurrence over the largest value's side."""
    counts = [[[1] if i == 0 or j == 0 else [] for j in range(n2 + 1)] for i in range(n1 + 1)]
    for i in range(1, n1 + 1):
        for j in range(1, n2 + 1):
            # The largest of the pooled values is a's (every b below it adds j to U) or b's.
            with_a = [0] * j + counts[i - 1][j]
            with_b = counts[i][j - 1]
            size = i * j + 1
            counts[i][j] = [
                (with_a[u] if u < len(with_a) else 0) + (with_b[u] if u < len(with_b) else 0)
                for u in range(size)
            ]
    total = math.comb(n1 + n2, n1)
    running, cdf = 0, []
    for count in counts[n1][n2]:
        running += count
        cdf.append(running / total)
    return tuple(cdf)


def coverage_by_n(ns: Iterable[int], confidence: float = DEFAULT_CONFIDENCE) -> dict[int, float]:
    """The real coverage of the median interval for each number of repeats."""
    return {n: median_interval(range(n), confidence).coverage for n in sorted(set(ns)) if n}
