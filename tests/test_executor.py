"""The executor reads nothing but a test plan: a plan that went through JSON runs against
a real server (the reference server, the real engine), and what the executor bound on this
host is stored beside the test, not in what identifies it."""

from pathlib import Path

from serverlab.contestant.manifest import find
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.testplan import TestPlan
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.load import load_suite

SUITE = """name = "t"
repeats = 1
contestants = ["reference"]

[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 3
duration_s = 1
warmup_s = 0.5
priming_runs = 1
"""


def test_a_plan_read_back_from_json_runs_against_a_real_server(contestants_dir, tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    (plan,) = plan_tests(load_suite(path), find)
    shipped = TestPlan.from_json(plan.to_json())
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(shipped, env)
    assert test.status == "ok", test.validity
    assert test.summary["requests"] > 50
    assert (test.permutation_key, test.repeat_index) == (plan.key, 0)
    assert test.params == plan.params and test.plan == plan.as_dict()
    bound = test.run_info
    assert bound["ports"]["http"] > 0 and bound["server_pid"] > 0
    assert bound["engine_plan"]["target"] == f"http://127.0.0.1:{bound['ports']['http']}/perf"
    assert bound["priming"][0]["requests"] > 0
    assert (bound["cpus"]["server"], bound["cpus"]["engine"]) == (
        env.pinning.server,
        env.pinning.engine,
    )
    assert "priming" not in test.params and "engine_plan" not in test.params
    assert not list(Path(env.workdir).rglob("test-*")), "a finished test leaves no folder"


def test_a_server_given_two_cpus_runs_on_both_and_the_test_says_it_shared_them(
    contestants_dir, tmp_path
):
    path = tmp_path / "suite.toml"
    path.write_text(SUITE.replace("priming_runs = 1", "server_cpus = 2"))
    (plan,) = plan_tests(load_suite(path), find)
    env = Environment(manifest_of=find, pinning=Pinning("1", "0"), workdir=tmp_path / "work")
    test = execute(plan, env)
    assert test.run_info["cpus"]["server"] == "1,0"
    assert test.validity["shared_cpus"] == "server 1,0, engine 0"
