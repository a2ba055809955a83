"""The facts serverlab reads of the engine (engine/schema/facts.json) are the built engine's
own (`serverlab-load --print-facts`), and the suite's and planner's tables are made of them."""

from __future__ import annotations

import json
import subprocess

from serverlab.base import engine_facts
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.run.execution.engine import engine_binary
from serverlab.run.plan import planner
from serverlab.run.plan.suite import matrix


def printed_facts() -> dict:
    out = subprocess.run(
        [str(engine_binary()), "--print-facts"], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_the_committed_facts_are_what_the_built_engine_prints():
    assert engine_facts.read_facts() == printed_facts()


def test_the_tables_python_uses_are_made_of_the_engines_printed_facts():
    printed = printed_facts()
    assert engine_facts.behaviour_paths(printed) == matrix.BEHAVIOURS
    assert engine_facts.push_behaviours(printed) == PUSH_BEHAVIOURS
    assert engine_facts.passed_behaviour_keys(printed) == planner.BEHAVIOUR_KEYS
    assert engine_facts.own_methods(printed) == planner.OWN_METHODS
    keys = engine_facts.behaviour_suite_keys(printed)
    assert {k: matrix.SCENARIO_FIELDS[k] for k in keys} == {k: (t, True) for k, t in keys.items()}
    assert planner.PLAN_FIELD_TO_SUITE_KEYS["behaviour"] == (*keys, "behaviour")


def test_every_behaviour_the_engine_prints_is_known_to_the_suite_with_its_own_keys():
    printed = printed_facts()
    names = [b["name"] for b in printed["behaviours"]]
    assert names == list(matrix.BEHAVIOURS)
    assert "keepalive" in names and "longpoll" in PUSH_BEHAVIOURS
    passed = planner.BEHAVIOUR_KEYS
    assert passed["longpoll_duration_ms"] == "duration_ms"
    assert "read_rate_bps" not in passed, "a derived key is the planner's to shape"


def test_a_behaviour_with_its_own_method_is_planned_with_it():
    permutation = {"behaviour": "slow-upload", "clients": 1, "duration_s": 1}
    assert planner.engine_plan(permutation, False, None)["method"] == "POST"
    keepalive = {**permutation, "behaviour": "keepalive"}
    assert "method" not in planner.engine_plan(keepalive, False, None)
