"""Client groups in suites (issue 35): `[[scenario.groups]]` tables planned into the engine's
`groups`, judged by the real engine (`serverlab-load --check`), refused by file, scenario,
group and line."""

import pytest

from serverlab.commands import check_engine_plans
from serverlab.contestant.manifest import find
from serverlab.run.execution.testplan import bind, with_paths
from serverlab.run.plan import descriptors, protocols
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


# Two probes, one in clear and one over TLS, beside a handshake flood over TLS without
# resumption, an idle attack and a WebSocket one in clear; the last two only as shipped.
TRANSPORTS = """\
name = "transports"
contestants = ["go-nethttp", "nginx"]

[[scenario]]
name = "both"
behaviour = "keepalive"
clients = 10
duration_s = 20
warmup_s = 1
warmup_max_s = 4
tunables.go-nethttp = [{}, { read_header_timeout_s = 2 }]

[[scenario.groups]]
name = "probe"
pacer = "open"
rate = 50

[[scenario.groups]]
name = "probe-tls"
transport = "tls"
pacer = "open"
rate = 50

[[scenario.groups]]
name = "flood"
behaviour = "handshake-flood"
transport = "tls"
tls_resume = "off"
pacer = "open"
rate = 10
start_s = 2
stop_s = 4

[[scenario.groups]]
name = "idle"
behaviour = "idle"
start_s = 5
stop_s = 7
tuned = false

[[scenario.groups]]
name = "ws"
behaviour = "ws-ping-flood"
ws_pings_per_s = 10
start_s = 8
stop_s = 10
tuned = false
"""


def test_a_group_over_a_transport_of_its_own_connects_to_that_port_with_its_tls(tmp_path):
    suite, plans = planned(tmp_path, TRANSPORTS)
    check_engine_plans(suite, plans)  # the engine takes each group's own target
    go = next(p for p in plans if p.contestant == "go-nethttp" and not p.tunables)
    groups = {g["name"]: g for g in go.measured["groups"]}
    assert go.measured["target"] == "http://{host}:{port}/perf" and "tls" not in go.measured
    assert "target" not in groups["probe"] and "target" not in groups["idle"]
    assert groups["probe-tls"]["target"].startswith("https://{host}:{tls_port}/")
    assert groups["probe-tls"]["tls"]["resume"] is True
    assert groups["flood"]["tls"]["resume"] is False
    # The server is given TLS, and each probe's transport is warmed, the clients shared.
    assert go.tls_key is not None
    warm = {g["name"]: g for g in go.warmup["groups"]}
    assert set(warm) == {"warm-clear", "warm-tls"}
    assert warm["warm-tls"]["target"].startswith("https://") and warm["warm-tls"]["tls"]
    assert warm["warm-clear"]["connections"] == warm["warm-tls"]["connections"] == 5
    bound = bind(go.measured, host="127.0.0.1", port=1, tls_port=2, tls_ca="/ca.pem")
    assert bound["groups"][1]["target"] == "https://127.0.0.1:2/perf"
    assert bound["groups"][1]["tls"]["ca_file"] == "/ca.pem"


def test_a_tuned_test_runs_without_its_untuned_groups_and_ends_where_they_would_start(
    tmp_path,
):
    _, plans = planned(tmp_path, TRANSPORTS)
    tuned = next(p for p in plans if p.tunables)
    assert [g["name"] for g in tuned.measured["groups"]] == ["probe", "probe-tls", "flood"]
    assert tuned.measured["duration_s"] == 5.0  # the idle attack's start
    assert tuned.measured["groups"][0]["stop_s"] == 5.0
    assert tuned.estimate_s < next(p for p in plans if not p.tunables).estimate_s
    # The permutation's parameters stay whole: shipped and tuned share the report's section.
    assert tuned.params["groups"] == plans[0].params["groups"]


def test_a_group_the_contestant_cannot_receive_is_left_out_and_listed(tmp_path):
    _, plans = planned(tmp_path, TRANSPORTS)
    nginx = next(p for p in plans if p.contestant == "nginx")
    assert "ws" not in {g["name"] for g in nginx.measured["groups"]}
    kept, refused = protocols.refuse(plans, find, engine_h2=True)
    assert kept == plans
    (one,) = refused
    assert (one.plan.contestant, one.groups, one.key.endswith("|without ws")) == (
        "nginx",
        ("ws",),
        True,
    )
    assert "nginx does not claim the spec part `websocket`" in one.why
    # A test none of whose groups the contestant can receive is refused whole.
    only_ws = TRANSPORTS.split("[[scenario.groups]]")[0] + (
        '[[scenario.groups]]\nname = "ws"\nbehaviour = "ws-ping-flood"\nws_pings_per_s = 10\n'
    )
    _, plans = planned(tmp_path, only_ws)
    kept, refused = protocols.refuse(plans, find, engine_h2=True)
    assert {p.contestant for p in kept} == {"go-nethttp"}
    assert [(r.plan.contestant, r.groups) for r in refused] == [("nginx", ())]


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("transport", '"quic"', "transport must be one of clear, tls, h2, h2c, not 'quic'"),
        ("tls_resume", '"maybe"', "tls_resume must be one of on, off, not 'maybe'"),
        ("tuned", '"no"', "tuned must be bool, got 'no'"),
    ],
)
def test_a_groups_transport_and_tuned_keys_are_checked_at_their_line(tmp_path, key, value, reason):
    text = TRANSPORTS.replace('name = "probe"\n', f'name = "probe"\n{key} = {value}\n')
    with pytest.raises(SuiteError, match="group 'probe'") as refused:
        planned(tmp_path, text)
    assert reason in refused.value.reason
    assert refused.value.line == text.splitlines().index(f"{key} = {value}") + 1
