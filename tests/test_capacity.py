"""A capacity search against a real server: the reference server with a planted knee (GET
/perf answers 300 ms late past a token bucket of 150 a second; or a push cycle to more than 50
subscribers written 300 ms late; or, on its gRPC face, Perf calls answered late past the same
bucket) is found within the search's tolerance, one server for the whole search,
every step stored with the test."""

import pytest
from conftest import write_manifest
from reference_server import KNEE_RATE, KNEE_SUBSCRIBERS
from test_grpc import GRPC_MANIFEST

from serverlab.base.capacity import TOLERANCE
from serverlab.contestant.manifest import find
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.testplan import TestPlan
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.load import load_suite

SUITE = """name = "knee"
contestants = ["reference"]

[[scenario]]
name = "capacity"
kind = "capacity"
behaviour = "keepalive"
clients = 10
warmup_s = 0.5
# The warm-up ends by 2 s at the latest, so that a server dying at 4 s dies mid-search.
warmup_max_s = 2
start_rate = 40
max_rate = 1000
# 4.5 s: a step at 160 a second spends the bucket's 30 tokens in 3 s, and is then late.
step_s = 4.5
p99_bound_ms = 150
tunables.reference = { fault = "slow_above_rate" }
"""


def said(steps: list[dict]) -> list[tuple]:
    """Each step's level, verdict, reason and the engine's own pace, for a knee found off."""
    keys = ("level", "sustained", "reason", "lag_p99_ms", "achieved_rate")
    return [tuple(step.get(key) for key in keys) for step in steps]


# Latency at a bound is judged: other tests beside it would make their own knee.
@pytest.mark.alone
def test_a_capacity_search_finds_the_knee_planted_in_the_reference_server(
    contestants_dir, tmp_path
):
    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    (plan,) = plan_tests(load_suite(path), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(TestPlan.from_json(plan.to_json()), env)
    assert test.status == "ok", test.validity
    found = test.run_info["capacity"]
    steps = found["steps"]
    assert [s["level"] for s in steps[:3]] == [40, 80, 160], steps
    assert [s["sustained"] for s in steps[:3]] == [True, True, False], steps[:3]
    assert found["stop"] == "bisected"
    assert abs(found["knee"] - KNEE_RATE) <= TOLERANCE * KNEE_RATE, said(steps)
    assert "p99" in steps[2]["reason"]
    for step in steps:
        assert step["answered"] > 0 and step["p99_ms"] is not None
        assert step["cpu_us_per_request"] > 0
    # The test's own figures are the knee's step: its engine plan ran at the knee's rate.
    assert test.summary["intended_rate"] == found["knee"]
    assert test.run_info["engine_plan"]["pacer"]["rate"] == 40, "the stored plan: the first step"


def test_a_server_that_dies_mid_search_ends_it_as_a_crash_with_its_steps_kept(
    contestants_dir, tmp_path
):
    path = tmp_path / "suite.toml"
    path.write_text(SUITE.replace('fault = "slow_above_rate"', "die_after = 4"))
    (plan,) = plan_tests(load_suite(path), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(plan, env)
    assert test.status == "crashed" and test.crash is not None
    found = test.run_info["capacity"]
    assert found["stop"] == "crashed" and found["steps"], found
    assert found["steps"][-1]["reason"] == "server crashed"
    assert len(found["steps"]) < 5, "no step after the crash"


PUSH_SUITE = """name = "push-knee"
contestants = ["reference"]

[[scenario]]
name = "capacity-sse"
kind = "capacity"
behaviour = "sse"
pacer = "users"
start_clients = 15
max_clients = 120
emit_interval_ms = 200
# Each step: 0.5 s of ramp, then held; its window (0.5 s to 2 s) holds 7 cycles.
ramp_up_s = 0.5
duration_s = 2.5
p99_bound_ms = 150
tunables.reference = { fault = "slow_above_subscribers" }
"""


# Delivery delay at a bound is judged: other tests beside it would make their own knee.
@pytest.mark.alone
def test_a_search_over_subscribers_finds_the_push_knee_planted_in_the_reference_server(
    contestants_dir, tmp_path
):
    path = tmp_path / "suite.toml"
    path.write_text(PUSH_SUITE)
    (plan,) = plan_tests(load_suite(path), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(TestPlan.from_json(plan.to_json()), env)
    assert test.status == "ok", test.validity
    found = test.run_info["capacity"]
    steps = found["steps"]
    assert found["level"] == "clients"
    assert [s["level"] for s in steps[:3]] == [15, 30, 60], steps
    assert [s["sustained"] for s in steps[:3]] == [True, True, False], steps[:3]
    # 60 subscribers: every one admitted and reached, but each cycle 300 ms late.
    assert "delay p99" in steps[2]["reason"] and "admitted" not in steps[2]["reason"]
    assert found["stop"] == "bisected"
    assert abs(found["knee"] - KNEE_SUBSCRIBERS) <= TOLERANCE * KNEE_SUBSCRIBERS, steps
    for step in steps:
        assert step["admitted"] == step["clients"] == step["level"], step
        assert step["cycles"] >= 3 and step["completeness"] >= 0.99, step
        assert step["p99_ms"] is not None and step["p50_ms"] <= step["p99_ms"]
    held = [s for s in steps if s["sustained"]]
    assert (
        max(s["p99_ms"] for s in held)
        <= 150
        < min(s["p99_ms"] for s in steps if not s["sustained"])
    )
    # The test's own figures are the knee's step: its subscribers, its window, its clear.
    assert test.run_info["engine_plan"]["pacer"]["users"] == 15, "the stored plan: the first step"
    assert max(c.received for c in test.cycles) == found["knee"]
    clears = [c for c in test.run_info["control_calls"] if c["path"] == "/event/clear"]
    assert len([c for c in clears if c["phase"] == "during"]) == 1


GRPC_SUITE = """name = "grpc-knee"
contestants = ["reference-grpc"]

[[scenario]]
name = "capacity-grpc"
kind = "capacity"
behaviour = "grpc-unary"
transport = "h2c"
clients = 4
streams = 4
warmup_s = 0.5
warmup_max_s = 2
start_rate = 40
max_rate = 1000
# 4.5 s: a step at 160 a second spends the bucket's 30 tokens in 3 s, and is then late.
step_s = 4.5
p99_bound_ms = 150
tunables.reference-grpc = { fault = "slow_above_rate" }
"""


# Latency at a bound is judged: other tests beside it would make their own knee.
@pytest.mark.alone
def test_a_capacity_search_of_grpc_unary_calls_finds_the_knee_planted_in_the_grpc_server(
    contestants_dir, tmp_path
):
    write_manifest(contestants_dir, "reference-grpc", GRPC_MANIFEST)
    path = tmp_path / "suite.toml"
    path.write_text(GRPC_SUITE)
    (plan,) = plan_tests(load_suite(path), find)
    assert plan.warmup["behaviour"]["kind"] == "grpc-unary", (
        "warmed by its own calls, not GET /perf"
    )
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(TestPlan.from_json(plan.to_json()), env)
    assert test.status == "ok", test.validity
    found = test.run_info["capacity"]
    steps = found["steps"]
    assert [s["level"] for s in steps[:3]] == [40, 80, 160], steps
    assert [s["sustained"] for s in steps[:3]] == [True, True, False], steps[:3]
    assert "p99" in steps[2]["reason"]
    assert found["stop"] == "bisected"
    assert abs(found["knee"] - KNEE_RATE) <= TOLERANCE * KNEE_RATE, said(steps)
    for step in steps:
        assert step["answered"] > 0 and step["cpu_us_per_request"] > 0, step
    assert test.summary["intended_rate"] == found["knee"]
