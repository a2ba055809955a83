"""The facts serverlab reads of the engine (engine/schema/facts.json) are the built engine's
own (`serverlab-load --print-facts`), and the suite's and planner's tables, for behaviours and
pacers alike, are made of them."""

from __future__ import annotations

import json
import subprocess

from serverlab.base import engine_facts
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.run.execution.engine import check_plans, engine_binary
from serverlab.run.execution.testplan import CLIENTS_LEVEL, RATE_LEVEL
from serverlab.run.plan import planner
from serverlab.run.plan.suite import matrix
from serverlab.run.plan.suite.permutation import search_facts


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


def test_the_pacer_tables_python_uses_are_made_of_the_engines_printed_facts():
    printed = printed_facts()
    assert engine_facts.pacer_settings(printed) == planner.PACER_SETTINGS
    assert engine_facts.search_settings(printed) == planner.SEARCH_SETTINGS
    searches = engine_facts.search_pacers(printed)
    assert set(searches) == {RATE_LEVEL, CLIENTS_LEVEL}, "the levels a capacity plan names"
    assert (searches[RATE_LEVEL], searches[CLIENTS_LEVEL]) == (
        matrix.REQUEST_SEARCH_PACER,
        matrix.PUSH_SEARCH_PACER,
    )
    bare = engine_facts.bare_request_behaviours(printed)
    assert bare == planner.BARE_REQUESTS
    searchable = engine_facts.rate_searchable_behaviours(printed)
    assert searchable == matrix.CAPACITY_BEHAVIOURS == planner.OWN_WARMUPS
    keys = engine_facts.pacer_suite_keys(printed)
    assert {k: matrix.SCENARIO_FIELDS[k] for k in keys} == {k: (t, True) for k, t in keys.items()}
    assert planner.PLAN_FIELD_TO_SUITE_KEYS["pacer"] == (*keys, "pacer")


def test_the_planner_shapes_exactly_the_pacer_settings_the_engine_marks_derived():
    derived = {
        key.plan
        for keys in engine_facts.pacer_settings(printed_facts()).values()
        for key in keys
        if key.derived
    }
    assert derived == set(planner.SHAPED_PACER_SETTINGS)


def test_each_pacers_suite_keys_reach_its_plan_under_the_engines_names():
    for pacer, keys in planner.PACER_SETTINGS.items():
        for key in keys:
            if key.derived:
                continue
            params = {"behaviour": "keepalive", "pacer": pacer, key.suite: 7}
            assert planner.engine_plan(params, False, None)["pacer"][key.plan] == 7, key


def test_a_setting_of_a_pacer_the_test_does_not_run_is_refused_by_the_engine_at_its_key():
    params = {"behaviour": "keepalive", "clients": 2, "duration_s": 1, "rate_end": 300}
    plan = planner.engine_plan(params, False, None)
    assert plan["pacer"] == {"kind": "closed", "ramp_to_rate": 300}
    [verdict] = check_plans([plan])
    assert not verdict["ok"], verdict
    assert planner.suite_key_for(verdict.get("field"), params, verdict["error"]) == "rate_end"


def test_a_capacity_searchs_first_step_is_its_pacers_stepped_setting_at_the_start():
    request = {"behaviour": "keepalive", "kind": "capacity", "start_rate": 2000, "max_rate": 8000}
    first = planner.engine_plan(request, False, search_facts({**request, "p99_bound_ms": 10}))
    assert first["pacer"] == {"kind": matrix.REQUEST_SEARCH_PACER, "rate": 2000}
    push = {"behaviour": "sse", "kind": "capacity", "pacer": matrix.PUSH_SEARCH_PACER}
    push.update(start_clients=100, max_clients=800, duration_s=5, clients=3)
    pacer = planner.engine_plan(push, False, search_facts(push))["pacer"]
    assert pacer == {"kind": "users", "ramp_up_s": 0.0, "hold_s": 5.0, "users": 100}


def test_a_refused_pacer_points_at_its_own_suite_keys_before_another_pacers():
    # A users pacer with nothing to ramp or hold: its own keys, not `rate` of another pacer.
    params = {"behaviour": "keepalive", "pacer": "users", "clients": 2, "rate": 5}
    assert planner.suite_key_for("pacer", params, "users pacer: ramp_up_s = 0") == "clients"
    params["duration_s"] = 0
    assert planner.suite_key_for("pacer", params, "users pacer: ramp_up_s = 0") == "duration_s"
    open_loop = {"behaviour": "keepalive", "pacer": "open", "rate": 5, "duration_s": 1}
    assert planner.suite_key_for("pacer", open_loop, "rate must be positive") == "rate"
