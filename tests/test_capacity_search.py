"""The capacity search as a pure function: doubling from the start level, bisection to within
5 %, a first step that already fails, the maximum reached; and the "sustains" rule."""

import pytest

from serverlab.base import capacity
from serverlab.base.capacity import Search, StepResult


def server_holding_up_to(limit: float):
    """A step function of a server that sustains every level up to `limit`, and records
    the levels it was offered."""
    offered: list[float] = []

    def step(level: float) -> StepResult:
        offered.append(level)
        return StepResult(level, level <= limit, "" if level <= limit else "p99 over")

    return step, offered


def test_the_search_doubles_from_the_start_until_a_step_fails():
    step, offered = server_holding_up_to(700)
    capacity.search(Search(100, 10_000), step)
    assert offered[:4] == [100, 200, 400, 800]
    assert all(level < 800 for level in offered[4:]), "bisection stays below the failed step"


def test_bisection_ends_within_five_percent_below_the_limit():
    step, offered = server_holding_up_to(700)
    outcome = capacity.search(Search(100, 10_000), step)
    assert outcome.stop == capacity.BISECTED
    assert 700 * 0.95 <= outcome.knee <= 700
    failed_above = min(s.level for s in outcome.steps if not s.sustained)
    assert failed_above - outcome.knee <= 0.05 * outcome.knee
    assert len(offered) <= Search(100, 10_000).worst_case_steps()


def test_a_first_step_that_fails_gives_no_knee_and_no_further_step():
    step, offered = server_holding_up_to(50)
    outcome = capacity.search(Search(100, 10_000), step)
    assert (outcome.knee, outcome.stop, offered) == (None, capacity.FIRST_FAILED, [100])


def test_a_server_holding_everything_stops_at_the_maximum_which_is_its_knee():
    step, offered = server_holding_up_to(1e9)
    outcome = capacity.search(Search(100, 1000), step)
    assert offered == [100, 200, 400, 800, 1000]
    assert (outcome.knee, outcome.stop) == (1000, capacity.MAX_REACHED)


def test_a_limit_between_the_last_doubling_and_the_maximum_is_bisected_there():
    step, offered = server_holding_up_to(900)
    outcome = capacity.search(Search(100, 1000), step)
    assert offered[:5] == [100, 200, 400, 800, 1000]
    assert outcome.stop == capacity.BISECTED and 900 * 0.95 <= outcome.knee <= 900


@pytest.mark.parametrize("limit", [101, 150, 333, 799, 1000, 1601, 3199, 6400, 9999])
def test_no_search_takes_more_steps_than_its_worst_case(limit):
    spec = Search(100, 10_000)
    step, offered = server_holding_up_to(limit)
    outcome = capacity.search(spec, step)
    assert len(offered) <= spec.worst_case_steps()
    assert outcome.knee <= limit and outcome.knee >= min(limit, 10_000) * 0.95


def test_the_worst_case_counts_every_doubling_and_five_bisections():
    assert Search(2000, 128_000).worst_case_steps() == 7 + 5
    assert Search(100, 100).worst_case_steps() == 1


def test_whole_levels_stop_when_no_whole_number_lies_between():
    step, offered = server_holding_up_to(5)
    outcome = capacity.search(Search(1, 64, whole=True), step)
    assert all(level == int(level) for level in offered)
    assert outcome.knee == 5


def test_a_search_that_cannot_start_is_refused_in_words():
    with pytest.raises(ValueError, match="start <= maximum"):
        Search(200, 100)


def test_the_knee_is_the_highest_level_held_below_the_lowest_that_failed():
    steps = [
        StepResult(1000, True),
        StepResult(4000, False),
        StepResult(8000, True),  # a noisy pass above a failure does not raise the knee
        StepResult(2000, True),
        StepResult(2000, False),  # a level held once and failed once was not sustained
    ]
    assert capacity.knee(steps) == 1000
    assert capacity.knee([StepResult(1000, False)]) is None


def test_a_step_short_of_its_rate_erroring_or_slow_is_not_sustained_and_says_why():
    assert capacity.sustains(1000, 995, 1, 10_000, 4.0, 10.0) == ""
    assert "answered 980/s" in capacity.sustains(1000, 980, 0, 10_000, 4.0, 10.0)
    assert "errors 0.2 %" in capacity.sustains(1000, 1000, 20, 10_000, 4.0, 10.0)
    assert "p99 12 ms over the 10 ms bound" in capacity.sustains(1000, 1000, 0, 10_000, 12, 10)
    assert "p99 none" in capacity.sustains(1000, 1000, 0, 0, None, 10)
