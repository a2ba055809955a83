"""Known answers: order-statistic intervals from binomial tables (Conover, Practical
Nonparametric Statistics, table A3) and Mann-Whitney p-values counted by hand or published."""

import itertools
import math

import pytest

from serverlab.results import stats
from serverlab.results.stats import (
    Verdict,
    _u_null_cdf,
    mann_whitney,
    median,
    median_interval,
    ratio,
    summarize,
    verdict,
)


def test_median_of_odd_and_even_counts():
    assert median([5, 1, 3]) == 3
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_interval_of_ten_repeats_is_second_to_ninth_value():
    values = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5]
    interval = median_interval(values)
    assert (interval.low, interval.high) == (2, 9)
    # 1 - 2 * (1 + 10) / 1024
    assert interval.coverage == pytest.approx(0.978515625)
    assert interval.reaches_level


def test_interval_of_twenty_repeats_is_sixth_to_fifteenth_value():
    interval = median_interval(list(range(1, 21)))
    assert (interval.low, interval.high) == (6, 15)
    assert interval.coverage == pytest.approx(0.9586, abs=1e-4)


def test_five_repeats_cannot_reach_95_percent_and_say_so():
    interval = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (interval.low, interval.high) == (1.0, 5.0)
    assert interval.coverage == pytest.approx(1 - 2 / 32)
    assert not interval.reaches_level


def test_summary_ignores_missing_values_and_survives_none_at_all():
    summary = summarize([None, 3.0, math.nan, 1.0, 2.0])
    assert (summary.n, summary.median) == (3, 2.0)
    empty = summarize([None])
    assert empty.n == 0 and math.isnan(empty.median) and empty.interval is None


def test_mann_whitney_separated_samples_of_five():
    test = mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert test.u == 25
    # Only the two most extreme of C(10, 5) = 252 splits are as extreme.
    assert test.p_value == pytest.approx(2 / 252)
    assert test.method == "exact"


def test_mann_whitney_published_example():
    # The SciPy documentation's example (Conover's): U1 = 17, exact two-sided p = 1/9.
    test = mann_whitney([19, 22, 16, 29, 24], [20, 11, 17, 12])
    assert test.u == 17
    assert test.p_value == pytest.approx(0.1111111111)


def test_mann_whitney_with_ties_enumerates_midranks():
    # Pooled 1, 2, 2, 3 -> midranks 1, 2.5, 2.5, 4; a = {2, 3} has rank sum 6.5, E = 5.
    # The 6 splits' rank sums: 3.5 twice, 5 twice ({1, 4} and {2.5, 2.5}), 6.5 twice;
    # |R - 5| >= 1.5 for 4 of them.
    test = mann_whitney([2, 3], [1, 2])
    assert test.u == 3.5
    assert test.p_value == pytest.approx(4 / 6)


def test_mann_whitney_large_samples_use_the_normal_approximation():
    a = [float(v) for v in range(100, 130)]
    b = [float(v) for v in range(0, 30)]
    test = mann_whitney(a, b)
    assert test.method == "normal approximation"
    # U = 900; mean 450; sd = sqrt(30 * 30 * 61 / 12) = 67.64; z = (450 - 0.5) / 67.64
    assert test.p_value == pytest.approx(math.erfc(449.5 / math.sqrt(900 * 61 / 12) / 2**0.5))
    assert test.p_value < 1e-10


def test_identical_samples_are_not_different():
    test = mann_whitney([5, 5, 5], [5, 5, 5])
    assert test.p_value == 1.0


def test_three_repeats_a_side_are_too_few_to_test_rather_than_no_difference():
    # Even the most extreme split of 3 against 3 gives p = 0.1: the test could never say.
    assert mann_whitney([10, 11, 12], [1, 2, 3]).p_value == pytest.approx(0.1)
    assert verdict([10, 11, 12], [1, 2, 3], higher_is_better=True) == (Verdict.TOO_FEW, None)
    outcome, test = verdict([10, 11, 12, 13], [1, 2, 3, 4], higher_is_better=True)
    assert outcome is Verdict.BETTER and test.p_value == pytest.approx(2 / 70)


def test_the_null_distribution_of_u_matches_counting_every_split():
    for n1, n2 in ((1, 1), (2, 3), (3, 3), (4, 5), (6, 4)):
        pooled = range(n1 + n2)
        counts = [0] * (n1 * n2 + 1)
        for chosen in itertools.combinations(pooled, n1):
            u = sum(1 for a in chosen for b in pooled if b not in chosen and a > b)
            counts[u] += 1
        total = math.comb(n1 + n2, n1)
        expected = list(itertools.accumulate(c / total for c in counts))
        assert _u_null_cdf(n1, n2) == pytest.approx(expected)


def test_the_ratio_interval_takes_the_tabled_pairwise_rank():
    # The 95 % interval of 10 against 10 runs from the 24th smallest pairwise ratio to the
    # 24th largest (critical U of 23 in the Mann-Whitney tables).
    a = [float(100 + i) for i in range(10)]
    b = [float(50 + 2 * i) for i in range(10)]
    found = ratio(a, b)
    pairs = sorted(x / y for x in a for y in b)
    assert (found.interval.low, found.interval.high) == (pairs[23], pairs[-24])
    assert found.interval.reaches_level
    assert found.value == pytest.approx(median(a) / median(b))


def test_three_against_three_gives_the_range_of_pairwise_ratios_covering_90_percent():
    found = ratio([76_000, 76_400, 77_000], [39_000, 39_750, 40_000])
    assert found.value == pytest.approx(76_400 / 39_750)
    assert (found.interval.low, found.interval.high) == (76_000 / 40_000, 77_000 / 39_000)
    assert found.interval.coverage == pytest.approx(0.9)
    assert not found.interval.reaches_level
    assert ratio([1, 2], [0, 1]) is None and ratio([], [1]) is None


def test_verdict_direction_follows_what_is_better():
    fast = [900, 950, 1000, 1010, 990]
    slow = [500, 520, 480, 510, 530]
    assert verdict(fast, slow, higher_is_better=True)[0] is Verdict.BETTER
    assert verdict(fast, slow, higher_is_better=False)[0] is Verdict.WORSE
    assert verdict(slow, fast, higher_is_better=True)[0] is Verdict.WORSE


def test_verdict_with_an_empty_side_has_no_test():
    assert verdict([], [1, 2], higher_is_better=True) == (Verdict.TOO_FEW, None)


def test_holm_multiplies_the_smallest_p_by_the_count_and_keeps_the_order():
    # The textbook example (R's p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm")).
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([]) == []


def test_an_adjusted_p_decides_the_verdict_and_u_its_direction():
    test = stats.mann_whitney([10, 11, 12, 13], [1, 2, 3, 4])
    assert stats.decided(test, test.p_value, 4, 4, higher_is_better=True) is Verdict.BETTER
    assert stats.decided(test, test.p_value, 4, 4, higher_is_better=False) is Verdict.WORSE
    adjusted = stats.holm([test.p_value] * 6)[0]
    assert stats.decided(test, adjusted, 4, 4, True) is Verdict.NO_DIFFERENCE
