"""How tests are grouped into scenarios (same scenario and parameters, any contestant, any
repeat), and a paired run's arms kept apart."""

from __future__ import annotations

import json
from typing import Any

from serverlab.base.paramtext import param_text
from serverlab.results.records import RecordedTest

RUN_SPECIFIC_PARAMS = ("engine_plan",)


def permutation_params(test: RecordedTest) -> dict[str, Any]:
    """The scenario's parameters, without what differs from run to run (the engine plan the
    runner keeps beside them holds a port number)."""
    return {k: v for k, v in test.params.items() if k not in RUN_SPECIFIC_PARAMS}


def paired_arm(test: RecordedTest) -> str:
    """The arm of a paired run (``serverlab compare --paired``) the test ran in: 'A', 'B'
    or "A'"; '' for a test of an ordinary run."""
    return str((test.run_info.get("paired") or {}).get("arm") or "")


def arm_text(test: RecordedTest) -> str:
    """Which arm a paired run's test ran in, and that arm's configuration as it was given:
    "arm B (engine=/opt/serverlab-load)"; '' for a test of an ordinary run."""
    arm = paired_arm(test)
    if not arm:
        return ""
    config = str(test.run_info["paired"].get("config") or "-")
    return f"arm {arm} ({'the suite as written' if config == '-' else config})"


def scenario_key(test: RecordedTest, with_arm: bool = True) -> str:
    """Tests with the same key ran the same scenario with the same parameters, and in a
    paired run in the same arm: a paired run's arms (A, B and A', B perhaps another engine)
    are never pooled into one figure. ``with_arm=False`` lines the arms up instead, for the
    paired verdict that sets them against each other."""
    arm = arm_text(test) if with_arm else ""
    return json.dumps(
        [test.scenario, permutation_params(test), *([arm] if arm else [])], sort_keys=True
    )


def comparison_key(test: RecordedTest, with_contestant: bool, with_arm: bool = True) -> str:
    """The scenario key, plus contestant and tunables when contestants are not the sides."""
    if not with_contestant:
        return scenario_key(test, with_arm)
    return json.dumps(
        [scenario_key(test, with_arm), test.contestant, test.tunables], sort_keys=True
    )


def scenario_labels(tests: list[RecordedTest], with_arm: bool = True) -> dict[str, str]:
    """A short label per scenario key (``scenario_key``): its name, plus the parameters
    that tell apart scenario keys sharing that name, plus a paired run's arm. A parameter a
    cell does not have (a cleartext cell's TLS key) is left out of its label rather than
    shown as "-". Labels stay distinct: where two cells differ by a parameter only one of
    them has, only that one's label names it."""
    params_by_name: dict[str, dict[str, dict]] = {}
    arms: dict[str, str] = {}
    for test in tests:
        key = scenario_key(test, with_arm)
        params_by_name.setdefault(test.scenario, {})[key] = permutation_params(test)
        arms[key] = arm_text(test) if with_arm else ""
    labels = {}
    for name, by_key in params_by_name.items():
        varying = _varying_keys(list(by_key.values()))
        for key, params in by_key.items():
            detail = ", ".join(f"{k}={param_text(k, params[k])}" for k in varying if k in params)
            label = f"{name or 'unnamed'} ({detail})" if detail else name or "unnamed"
            labels[key] = f"{label}, {arms[key]}" if arms[key] else label
    return labels


def _varying_keys(param_sets: list[dict]) -> list[str]:
    every_key = sorted({k for params in param_sets for k in params})
    return [
        k for k in every_key if len({json.dumps(p.get(k), sort_keys=True) for p in param_sets}) > 1
    ]
