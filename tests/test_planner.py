"""Test plans: built from every shipped suite with no server running, compared with the
golden plans committed beside this file, and read back from their JSON unchanged."""

import json
import os
import sys
from pathlib import Path

import pytest

from serverlab.base.paths import REPO_ROOT
from serverlab.commands import check_engine_plans
from serverlab.contestant.manifest import find
from serverlab.run.execution.testplan import PlanFormatError, TestPlan, bind
from serverlab.run.plan import planner
from serverlab.run.plan.planner import plan_test, plan_tests
from serverlab.run.plan.suite.file import SuiteError
from serverlab.run.plan.suite.load import load_suite

GOLDEN = Path(__file__).parent / "golden" / "plans"
SUITES = sorted((REPO_ROOT / "suites").glob("*.toml"))
# SERVERLAB_UPDATE_GOLDEN=1 rewrites the golden files from today's planner (then read the diff).
UPDATE = os.environ.get("SERVERLAB_UPDATE_GOLDEN") == "1"


def plans_of(suite_path: Path) -> list[TestPlan]:
    suite = load_suite(suite_path)
    suite.repeats = 1  # a repeat changes only `repeat`; one of each keeps the files short
    return plan_tests(suite, find)


@pytest.mark.parametrize("suite_path", SUITES, ids=[p.stem for p in SUITES])
def test_every_shipped_suite_plans_as_its_golden_file_says(suite_path):
    lines = [plan.to_json() for plan in plans_of(suite_path)]
    golden = GOLDEN / f"{suite_path.stem}.jsonl"
    if UPDATE:
        golden.write_text("".join(line + "\n" for line in lines))
    assert golden.is_file(), f"no golden plans for {suite_path.name}"
    expected = golden.read_text().splitlines()
    assert len(lines) == len(expected)
    for line, want in zip(lines, expected, strict=True):
        assert json.loads(line) == json.loads(want)


def test_every_suite_has_a_golden_file_and_no_golden_file_is_stale():
    assert sorted(p.stem for p in GOLDEN.glob("*.jsonl")) == [p.stem for p in SUITES]


@pytest.mark.parametrize("suite_path", SUITES, ids=[p.stem for p in SUITES])
def test_a_plan_reads_back_from_its_json_as_it_was(suite_path):
    for plan in plans_of(suite_path):
        assert TestPlan.from_json(plan.to_json()) == plan


PLANNER = Path(planner.__file__).resolve()
SUITE_PACKAGE = PLANNER.parent / "suite"


def crossings(work) -> list[str]:
    """Every call between the planner and the suite package while `work` runs, either way,
    as 'caller -> callee' (traced with sys.setprofile)."""
    seen = []

    def side(code) -> str | None:
        path = Path(code.co_filename).resolve()
        return "planner" if path == PLANNER else "suite" if SUITE_PACKAGE in path.parents else None

    def profile(frame, event, _arg):
        if event == "call" and frame.f_back is not None:
            callee, caller = side(frame.f_code), side(frame.f_back.f_code)
            if callee and caller and callee != caller:
                seen.append(f"{frame.f_back.f_code.co_qualname} -> {frame.f_code.co_qualname}")

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("suite_path", SUITES, ids=[p.stem for p in SUITES])
def test_planning_a_test_asks_its_permutation_once_and_nothing_else_of_the_suite(suite_path):
    suite = load_suite(suite_path)
    for perm in suite.permutations:
        manifest = find(perm.contestant)
        asked = crossings(lambda perm=perm, manifest=manifest: plan_test(perm, 0, manifest, suite))
        assert asked == ["plan_test -> Permutation.facts"], perm.key


def test_a_plan_holds_no_port_and_binds_where_it_runs():
    (plan, *_) = plans_of(REPO_ROOT / "suites" / "quick.toml")
    assert plan.measured["target"] == "http://{host}:{port}/perf"
    bound = bind(plan.measured, host="127.0.0.1", port=4321, syslog_port=1)
    assert bound["target"] == "http://127.0.0.1:4321/perf"
    assert plan.measured["target"].startswith("http://{host}"), "binding copies the plan"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not a test plan"),
        ('{"version": 99}', "version 99"),
        ('{"version": 1, "key": "k"}', "not a test plan"),
    ],
)
def test_a_plan_this_serverlab_cannot_read_is_refused(text, message):
    with pytest.raises(PlanFormatError, match=message):
        TestPlan.from_json(text)


def test_a_links_delay_and_loss_reach_the_plan(contestants_dir, tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(
        'name = "l"\ncontestants = ["reference"]\n'
        "[links.lossy]\nrate_mbit = 10\ndelay_ms = 25\nloss_pct = 2.5\n"
        '[[scenario]]\nname = "s"\nbehaviour = "keepalive"\nclients = 1\nduration_s = 1\n'
        'link = "lossy"\n'
    )
    (plan,) = plan_tests(load_suite(path), find)
    assert (plan.link.rate_mbit, plan.link.delay_ms, plan.link.loss_pct) == (10, 25, 2.5)


def test_who_closes_a_connection_reaches_the_engine_plan_and_its_warmup(contestants_dir, tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(
        'name = "c"\ncontestants = ["reference"]\n'
        '[[scenario]]\nname = "s"\nbehaviour = "new-connection"\nclients = 2\nduration_s = 1\n'
        'warmup_s = 1\nclose = "client"\n'
    )
    (plan,) = plan_tests(load_suite(path), find)
    behaviour = {"kind": "new-connection", "close": "client"}
    assert plan.measured["behaviour"] == behaviour
    assert plan.warmup["behaviour"] == behaviour


ATTACKS = """name = "a"
contestants = ["reference"]
[[scenario]]
name = "loris"
behaviour = "slowloris"
clients = 20
duration_s = 2
header_interval_ms = 5000
[[scenario]]
name = "idle"
behaviour = "idle"
clients = 20
duration_s = 2
[[scenario]]
name = "reset"
behaviour = "rapid-reset"
transport = "h2c"
duration_s = 2
streams_per_s = 1000
streams_per_connection = 500
[[scenario]]
name = "flood"
behaviour = "continuation-flood"
transport = "h2"
duration_s = 2
frames_per_s = 100
frame_bytes = 1024
[[scenario]]
name = "shake"
behaviour = "handshake-flood"
transport = "tls"
tls_resume = "off"
pacer = "open"
rate = 100
duration_s = 2
handshake_abandon = "finished"
[[scenario]]
name = "bomb"
behaviour = "hpack-bomb"
transport = "h2c"
duration_s = 2
streams_per_s = 10
hpack_references = 100
[[scenario]]
name = "huge"
behaviour = "ws-oversized"
duration_s = 2
ws_announced_bytes = 1000000
ws_trickle_bytes_per_s = 10
[[scenario]]
name = "endless"
behaviour = "ws-fragments"
transport = "tls"
duration_s = 2
ws_frames_per_s = 100
ws_frame_bytes = 1000
[[scenario]]
name = "pings"
behaviour = "ws-ping-flood"
duration_s = 2
ws_pings_per_s = 500
"""


def test_each_attacks_suite_keys_make_a_plan_the_engine_accepts(contestants_dir, tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(ATTACKS)
    suite = load_suite(path)
    plans = plan_tests(suite, find)
    assert [p.measured["behaviour"] for p in plans] == [
        {"kind": "slowloris", "interval_ms": 5000},
        {"kind": "idle"},
        {"kind": "rapid-reset", "streams_per_s": 1000, "streams_per_connection": 500},
        {"kind": "continuation-flood", "frames_per_s": 100, "frame_bytes": 1024},
        {"kind": "handshake-flood", "abandon": "finished"},
        {"kind": "hpack-bomb", "streams_per_s": 10, "references": 100},
        {"kind": "ws-oversized", "announced_bytes": 1000000, "bytes_per_s": 10},
        {"kind": "ws-fragments", "frames_per_s": 100, "frame_bytes": 1000},
        {"kind": "ws-ping-flood", "pings_per_s": 500},
    ]
    # The WebSocket attacks upgrade an HTTP/1.1 connection to /ws, cleartext or TLS.
    assert [p.measured["target"] for p in plans[6:]] == [
        "http://{host}:{port}/ws",
        "https://{host}:{tls_port}/ws",
        "http://{host}:{port}/ws",
    ]
    reset, flood = plans[2].measured, plans[3].measured
    # They write their own HTTP/2 frames on the server's HTTP/2 port: no http2 setting.
    assert reset["target"] == "http://{host}:{h2c_port}/perf" and "http2" not in reset
    assert flood["target"].startswith("https://{host}:{tls_port}") and "http2" not in flood
    check_engine_plans(suite, plans)  # raises at the scenario's line if the engine refuses


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ('transport = "h2c"\n', "", "rapid-reset writes HTTP/2 frames: transport h2 or h2c"),
        ("header_interval_ms = 5000", "header_interval_ms = 0", "header_interval_ms = 0: the"),
        ('tls_resume = "off"\n', "", "tls_resume = 'on': the engine refuses it: a handshake"),
        ("ws_pings_per_s = 500", "ws_pings_per_s = 0", "ws_pings_per_s = 0: the"),
        (
            'transport = "tls"\nduration_s = 2\nws_',
            'transport = "h2"\nduration_s = 2\nws_',
            "upgrade an HTTP/1.1 connection",
        ),
    ],
)
def test_an_attack_the_engine_cannot_make_is_refused_at_its_key(
    contestants_dir, tmp_path, old, new, reason
):
    path = tmp_path / "suite.toml"
    path.write_text(ATTACKS.replace(old, new, 1))
    with pytest.raises(SuiteError, match=reason):
        suite = load_suite(path)
        check_engine_plans(suite, plan_tests(suite, find))
