"""A plan split over generators makes the plan's own schedule, k6's way: shares that add
up, remainders on the first generators, interleaved arrivals and user starts, disjoint
syslog numbering."""

import pytest

from serverlab.cluster.split import SplitError, share, split

TARGET = "http://{host}:{port}/perf"


def test_shares_add_up_with_the_remainder_on_the_first_generators():
    assert [share(10, 3, i) for i in range(3)] == [4, 3, 3]
    assert sum(share(36_000, 2, i) for i in range(2)) == 36_000
    assert [share(1, 4, i) for i in range(4)] == [1, 0, 0, 0]


def test_closed_loop_connections_and_requests_are_divided():
    plan = {"target": TARGET, "connections": 101, "requests": 20_000, "pacer": {"kind": "closed"}}
    parts = split(plan, 2)
    assert [p["connections"] for p in parts] == [51, 50]
    assert [p["requests"] for p in parts] == [10_000, 10_000]
    assert [p["seed"] for p in parts] == [1, 2], "each generator picks its own paths"


def test_open_loop_arrivals_interleave_into_the_whole_rate():
    plan = {"target": TARGET, "duration_s": 5, "pacer": {"kind": "open", "rate": 200.0}}
    parts = split(plan, 4)
    arrivals = sorted(
        p["pacer"]["offset_s"] + k / p["pacer"]["rate"] for p in parts for k in range(50)
    )
    gaps = {round(b - a, 9) for a, b in zip(arrivals, arrivals[1:], strict=False)}
    assert gaps == {0.005}, "together: one arrival every 1/200 s, not four at once"


def test_users_start_where_the_whole_ramp_would_start_them_and_stop_together():
    plan = {
        "target": TARGET,
        "pacer": {"kind": "users", "users": 10, "ramp_up_s": 10.0, "hold_s": 5.0},
    }
    parts = split(plan, 3)
    starts = []
    for p in parts:
        users = p["pacer"]
        step = users["ramp_up_s"] / users["users"]
        starts += [users["offset_s"] + k * step for k in range(users["users"])]
        assert users["ramp_up_s"] + users["hold_s"] == pytest.approx(15.0)
    assert sorted(round(s, 9) for s in starts) == [float(j) for j in range(10)]


def test_syslog_numbers_are_disjoint_ranges():
    plan = {
        "target": "tcp://{host}:{syslog_port}",
        "requests": 10,
        "behaviour": {"kind": "syslog"},
        "pacer": {"kind": "closed"},
        "connections": 2,
    }
    parts = split(plan, 3)
    assert parts[2] is None, "two connections keep two generators busy"
    ranges = [
        range(p["behaviour"]["seq_start"] - 1, p["behaviour"]["seq_start"] - 1 + p["requests"])
        for p in parts[:2]
    ]
    assert sorted(n for r in ranges for n in r) == list(range(10))


def test_one_sequential_client_runs_on_the_first_generator_and_no_share_is_no_plan():
    sequential = {"target": TARGET, "requests": 100, "pacer": {"kind": "sequential"}}
    assert [p is not None for p in split(sequential, 3)] == [True, False, False]
    few = {"target": TARGET, "connections": 1, "duration_s": 1, "pacer": {"kind": "closed"}}
    assert [p is not None for p in split(few, 2)] == [True, False]
    with pytest.raises(SplitError):
        split(few, 0)


def test_a_short_hold_never_makes_a_negative_one_and_every_user_starts_before_the_stop():
    plan = {
        "target": TARGET,
        "pacer": {"kind": "users", "users": 5, "ramp_up_s": 10.0, "hold_s": 1.0},
    }
    for p in split(plan, 2):
        users = p["pacer"]
        assert users["hold_s"] >= 0
        assert users["ramp_up_s"] + users["hold_s"] == pytest.approx(11.0)
        last = users["offset_s"] + (users["users"] - 1) * users["ramp_up_s"] / users["users"]
        assert last < 11.0


def test_a_timed_syslog_flood_numbers_each_generator_from_its_own_range():
    plan = {
        "target": "tcp://{host}:{syslog_port}",
        "duration_s": 5,
        "connections": 4,
        "behaviour": {"kind": "syslog"},
        "pacer": {"kind": "closed"},
    }
    starts = [p["behaviour"]["seq_start"] for p in split(plan, 2)]
    assert starts[0] == 1 and starts[1] - starts[0] >= 10**9


def test_options_the_engine_prints_as_null_count_as_not_given():
    plan = {"target": "http://127.0.0.1:1/", "connections": 4, "requests": None, "seed": None}
    parts = split(plan, 2)
    assert [p["connections"] for p in parts] == [2, 2]
    assert all("requests" not in p for p in parts)


GROUPED = {
    "target": TARGET,
    "duration_s": 10.0,
    "connections": 7,
    "pacer": {"kind": "closed"},
    "behaviour": {"kind": "keepalive"},
    "groups": [
        {
            "name": "probe",
            "pacer": {"kind": "open", "rate": 100.0},
            "connections": 3,
            "paths": [{"path": "/perf", "weight": 1.0}],
        },
        {"name": "slow", "behaviour": {"kind": "slowloris"}, "start_s": 2.0, "stop_s": 8.0},
    ],
}


def test_each_group_is_split_as_its_own_plan_and_every_generator_runs_every_group():
    parts = split(GROUPED, 2)
    assert [[g["name"] for g in p["groups"]] for p in parts] == [["probe", "slow"]] * 2
    probes = [p["groups"][0] for p in parts]
    # The probe's arrivals interleave into its own rate, its pool shared out.
    assert [(g["pacer"]["rate"], g["pacer"]["offset_s"]) for g in probes] == [
        (50.0, 0.0),
        (50.0, 0.01),
    ]
    assert [g["connections"] for g in probes] == [2, 1]
    assert all(g["paths"] == [{"path": "/perf", "weight": 1.0}] for g in probes)
    # A group that names no clients takes the plan's, shared out like the plan's own.
    slows = [p["groups"][1] for p in parts]
    assert [g["connections"] for g in slows] == [4, 3] == [p["connections"] for p in parts]
    assert all((g["start_s"], g["stop_s"]) == (2.0, 8.0) for g in slows)
    assert all(g["behaviour"] == {"kind": "slowloris"} for g in slows)


def test_a_grouped_plan_runs_on_as_many_generators_as_its_smallest_group_keeps_busy():
    plan = {**GROUPED, "groups": [*GROUPED["groups"], {"name": "one", "connections": 1}]}
    parts = split(plan, 3)
    assert parts[1:] == [None, None]
    assert [g["connections"] for g in parts[0]["groups"]] == [3, 7, 1]
