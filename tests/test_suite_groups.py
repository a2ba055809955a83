"""Client groups in suites (issue 35): `[[scenario.groups]]` tables planned into the engine's
`groups`, judged by the real engine (`serverlab-load --check`), refused by file, scenario,
group and line."""

import pytest

from serverlab.commands import check_engine_plans
from serverlab.contestant.manifest import find
from serverlab.run.execution.testplan import with_paths
from serverlab.run.plan import descriptors
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.file import SuiteError
from serverlab.run.plan.suite.load import load_suite

GROUPED = """\
name = "grouped"
contestants = ["reference"]

[[scenario]]
name = "comet-and-probe"
behaviour = "comet"
clients = 20
duration_s = 10
emit_interval_ms = 1000

[[scenario.groups]]
name = "subscribers"

[[scenario.groups]]
name = "probe"
behaviour = "keepalive"
pacer = "open"
rate = 200
clients = 4
path = "/perf"
start_s = 2
stop_s = 8

[profiles.quick]
duration_scale = 0.5
"""


def planned(tmp_path, text: str, profile: str | None = None):
    path = tmp_path / "suite.toml"
    path.write_text(text)
    suite = load_suite(path, profile=profile)
    return suite, plan_tests(suite, find)


def test_each_group_reaches_the_engine_plan_with_its_window_and_its_own_clients(
    contestants_dir, tmp_path
):
    suite, plans = planned(tmp_path, GROUPED)
    subscribers, probe = plans[0].measured["groups"]
    # What a group leaves out is the scenario's; its window is the whole load unless it says.
    assert subscribers == {
        "name": "subscribers",
        "start_s": 0.0,
        "stop_s": 10.0,
        "behaviour": {"kind": "comet", "events": ["e1"]},
        "pacer": {"kind": "closed"},
        "connections": 20,
        "method": "POST",
    }
    # A group naming its own behaviour takes none of the scenario's, nor its method.
    assert probe == {
        "name": "probe",
        "start_s": 2.0,
        "stop_s": 8.0,
        "behaviour": {"kind": "keepalive"},
        "pacer": {"kind": "open", "rate": 200},
        "connections": 4,
        "method": "GET",
        "paths": [{"path": "/perf", "weight": 1.0}],
    }
    check_engine_plans(suite, plans)  # the engine accepts it, or this raises
    # Both groups' connections may be open at once: the descriptor check counts them all.
    assert descriptors.planned_clients(plans[0]) == 24
    # A line naming the test (a refusal, the progress, the dry run) names its groups.
    assert "groups=subscribers,probe" in descriptors.Refused(plans[0], "why").line()


def test_a_profile_scales_each_groups_window_as_it_scales_the_test(contestants_dir, tmp_path):
    _, plans = planned(tmp_path, GROUPED, profile="quick")
    windows = [(g["start_s"], g["stop_s"]) for g in plans[0].measured["groups"]]
    assert plans[0].measured["duration_s"] == 5.0
    assert windows == [(0.0, 5.0), (1.0, 4.0)]


def test_a_group_the_engine_refuses_is_named_with_its_file_scenario_and_line(
    contestants_dir, tmp_path
):
    suite, plans = planned(tmp_path, GROUPED.replace("rate = 200", "rate = 0"))
    with pytest.raises(SuiteError) as refused:
        check_engine_plans(suite, plans)
    assert refused.value.path == tmp_path / "suite.toml"
    assert refused.value.line == GROUPED.splitlines().index("rate = 200") + 1
    assert refused.value.reason == (
        "scenario 'comet-and-probe', group 'probe': rate = 0: the engine refuses it: "
        "rate must be positive"
    )


def test_a_group_past_the_tests_end_is_refused_by_the_engine_at_that_group(
    contestants_dir, tmp_path
):
    suite, plans = planned(tmp_path, GROUPED.replace("stop_s = 8", "stop_s = 12"))
    with pytest.raises(
        SuiteError, match="group 'probe': stop_s = 12.0: the engine refuses it: stop_s = 12 is past"
    ):
        check_engine_plans(suite, plans)


@pytest.mark.parametrize(
    ("old", "new", "line_of", "reason"),
    [
        (
            "rate = 200",
            "rates = 200",
            "rates = 200",
            "group 'probe': unknown group key 'rates'",
        ),
        (
            "clients = 4",
            "clients = [4, 8]",
            "clients = [4, 8]",
            "group 'probe': clients in a group is one value",
        ),
        (
            'name = "probe"',
            'name = "subscribers"',
            'name = "subscribers"',
            "two groups are named 'subscribers'",
        ),
        ('name = "probe"', 'name = "Probe!"', "[[scenario.groups]]", "a group needs a name"),
        ("start_s = 2", 'start_s = "2"', 'start_s = "2"', "start_s must be int or float"),
        (
            "emit_interval_ms = 1000\n",
            'emit_interval_ms = 1000\nkind = "capacity"\n',
            'kind = "capacity"',
            "a capacity search steps one load, no groups",
        ),
    ],
)
def test_a_malformed_group_is_refused_at_its_line_naming_scenario_and_group(
    contestants_dir, tmp_path, old, new, line_of, reason
):
    text = GROUPED.replace(old, new, 1)
    with pytest.raises(SuiteError, match="scenario 'comet-and-probe'") as refused:
        planned(tmp_path, text)
    assert reason in refused.value.reason
    assert refused.value.line == text.splitlines().index(line_of) + 1


def test_a_grouped_plan_is_duration_bound_and_its_own_pacer_the_engines_default(
    contestants_dir, tmp_path
):
    """A users pacer's plan lasts its ramp and hold, and the engine refuses it a duration;
    a grouped plan needs one, and each group writes its own pacer anyway."""
    text = GROUPED.replace("clients = 20\n", 'clients = 20\npacer = "users"\nramp_up_s = 2\n')
    text = text.replace('name = "subscribers"\n', 'name = "subscribers"\npacer = "closed"\n')
    suite, plans = planned(tmp_path, text)
    measured = plans[0].measured
    assert measured["pacer"] == {"kind": "closed"} and measured["duration_s"] == 12.0
    assert measured["groups"][0]["stop_s"] == 12.0
    check_engine_plans(suite, plans)
    # A group cannot ramp users over its window: the engine says so, naming the group.
    suite, plans = planned(tmp_path, text.replace('pacer = "closed"\n', ""))
    with pytest.raises(SuiteError, match="group 'subscribers': the engine refuses it: users"):
        check_engine_plans(suite, plans)


def test_a_file_sets_paths_go_to_the_groups_of_plain_requests_that_name_no_path():
    files = [{"path": "/files/f0000.bin", "weight": 1.0}]
    plan = {
        "behaviour": {"kind": "keepalive"},
        "groups": [
            {"name": "probe", "paths": [{"path": "/perf", "weight": 1.0}]},
            {"name": "readers", "behaviour": {"kind": "slow-reader"}},
            {"name": "loris", "behaviour": {"kind": "slowloris"}},
            {"name": "plain"},
        ],
    }
    groups = with_paths(plan, files)["groups"]
    assert [g.get("paths") for g in groups] == [
        [{"path": "/perf", "weight": 1.0}],  # its own path stays
        files,
        None,  # the engine refuses paths to an attack
        files,  # the plan's behaviour: plain requests
    ]
    assert "paths" not in with_paths(plan, files)
    assert with_paths({"behaviour": {"kind": "keepalive"}}, files)["paths"] == files
