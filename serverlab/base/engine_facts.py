"""What the load engine says of its behaviours and pacers, so that no Python table restates it.

The engine prints its facts (`serverlab-load --print-facts`): for each behaviour its name, the
path it goes to by default, the method it always sends, whether it is a push subscription,
sends datagrams, may go over TLS and HTTP/2 (with several streams), and its suite keys with
the plan key each sets, its type and its default, and whether its requests are bare (a request
and its answer, nothing paced or held); for each pacer its name, flag, plan keys (each with the
suite key that sets it) and what a capacity search steps under it.
They are read from the copy committed beside the engine's output schema
(engine/schema/facts.json), which the engine's tests keep equal to what it prints: serverlab
then plans and checks suites with no engine built (a fresh clone, a lint run), at import, with
no subprocess and no cache to go stale; tests/test_engine_facts.py checks the tables below
against the built engine's own output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from serverlab.base.paths import REPO_ROOT

FACTS_FILE = REPO_ROOT / "engine" / "schema" / "facts.json"
# A JSON schema type -> the Python types a suite may write it as (an integer is a number).
PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
}


class SuiteKey(NamedTuple):
    """A suite key and the plan key it sets: as is, or shaped by the planner (`derived`)."""

    suite: str
    plan: str
    derived: bool


def read_facts(path: Path = FACTS_FILE) -> dict[str, Any]:
    return json.loads(path.read_text())


FACTS = read_facts()


def behaviour_paths(facts: dict[str, Any]) -> dict[str, str | None]:
    """Behaviour -> the path its requests go to when the suite names none."""
    return {b["name"]: b["path"] for b in facts["behaviours"]}


def push_behaviours(facts: dict[str, Any]) -> tuple[str, ...]:
    """The behaviours whose clients hold a connection for events the server pushes."""
    return tuple(b["name"] for b in facts["behaviours"] if b["push"])


def own_h2_frame_behaviours(facts: dict[str, Any]) -> tuple[str, ...]:
    """The behaviours that write HTTP/2 frames of their own (attacks), with no HTTP/2 setting."""
    return tuple(b["name"] for b in facts["behaviours"] if b["own_h2_frames"])


def own_methods(facts: dict[str, Any]) -> dict[str, str]:
    """Behaviour -> the method it always sends, for those that have one."""
    return {b["name"]: b["method"] for b in facts["behaviours"] if b["method"]}


def behaviour_suite_keys(facts: dict[str, Any]) -> dict[str, tuple[type, ...]]:
    """Every suite key that sets a behaviour's setting -> the Python types it may take, in
    the engine's order of behaviours."""
    keys: dict[str, tuple[type, ...]] = {}
    for behaviour in facts["behaviours"]:
        for key in behaviour["keys"]:
            keys.setdefault(key["suite"], PYTHON_TYPES[key["type"]])
    return keys


def passed_behaviour_keys(facts: dict[str, Any]) -> dict[str, str]:
    """Suite key -> the plan key it sets as is (not `derived`, which the planner shapes)."""
    return {
        key["suite"]: key["plan"]
        for behaviour in facts["behaviours"]
        for key in behaviour["keys"]
        if not key["derived"]
    }


def bare_request_behaviours(facts: dict[str, Any]) -> tuple[str, ...]:
    """The behaviours whose requests are bare: a request and its answer, nothing paced or held
    (what a request capacity search offers, and what warms a server as the test's own load)."""
    return tuple(b["name"] for b in facts["behaviours"] if b["bare"])


def rate_searchable_behaviours(facts: dict[str, Any]) -> tuple[str, ...]:
    """The behaviours of one request and its answer per arrival, timed from the arrival (bare
    requests and gRPC unary calls): what a request capacity search offers at a stepped rate,
    and what warms a server for it."""
    return tuple(b["name"] for b in facts["behaviours"] if b["searchable"])


def pacer_settings(facts: dict[str, Any]) -> dict[str, tuple[SuiteKey, ...]]:
    """Pacer -> the suite keys that set its settings, the one a refusal most likely means
    first (the cluster's own settings, set by no suite key, left out)."""
    return {
        pacer["name"]: tuple(
            SuiteKey(key["suite"], key["plan"], key["derived"])
            for key in pacer["keys"]
            if key["suite"] is not None
        )
        for pacer in facts["pacers"]
    }


def pacer_suite_keys(facts: dict[str, Any]) -> dict[str, tuple[type, ...]]:
    """Every suite key that sets a pacer's setting -> the Python types it may take, in the
    engine's order of pacers (a key first, the one a refusal most likely means)."""
    keys: dict[str, tuple[type, ...]] = {}
    for pacer in facts["pacers"]:
        for key in pacer["keys"]:
            if key["suite"] is not None:
                keys.setdefault(key["suite"], PYTHON_TYPES[key["type"]])
    return keys


def search_pacers(facts: dict[str, Any]) -> dict[str, str]:
    """What a capacity search's levels count (`rate`, `clients`) -> the pacer it steps."""
    return {p["search"]["counts"]: p["name"] for p in facts["pacers"] if p["search"]}


def search_settings(facts: dict[str, Any]) -> dict[str, str]:
    """Pacer -> the setting each step of a capacity search sets to its level."""
    return {p["name"]: p["search"]["sets"] for p in facts["pacers"] if p["search"]}
