"""Suite stage: client groups (`[[scenario.groups]]`, issue 35). A test may run several
groups of clients at once in one engine process, as k6's concurrent scenarios: each group a
name, a window (`start_s`, `stop_s`, seconds from the load's start) and the per-client keys
a scenario takes (behaviour and its settings, pacer and its settings, clients, path). What a
group leaves out is the scenario's. A group's keys are single values, never matrix lists:
the scenario's own keys make the matrix. Which settings go together is the engine's to judge
(`--check`); here only the table's shape, its names and its numbers are checked.
"""

from __future__ import annotations

import math
import re
from typing import Any

from serverlab.base.engine_facts import FACTS, behaviour_suite_keys, pacer_suite_keys
from serverlab.run.plan.suite.file import GROUP_KEY, Lines, SuiteError
from serverlab.run.plan.suite.permutation import TRANSPORTS

# The engine's pattern and bound for group names (engine/README.md, "groups").
NAME_PATTERN = re.compile(r"[a-z0-9_-]{1,32}")
MOST_GROUPS = 16
WINDOW_KEYS = ("start_s", "stop_s")
# The window sets each group's duration; a request count is refused (a grouped run is
# duration-bound).
PER_CLIENT_KEYS = {
    "behaviour": (str,),
    "pacer": (str,),
    "path": (str,),
    **behaviour_suite_keys(FACTS),
    **{k: t for k, t in pacer_suite_keys(FACTS).items() if k != "duration_s"},
}
# A group's own connections: the server's port for a transport (its TLS settings with it).
CONNECTION_KEYS = {"transport": TRANSPORTS, "tls_resume": ("on", "off")}
GROUP_KEYS = {
    "name": (str,),
    "start_s": (int, float),
    "stop_s": (int, float),
    "tuned": (bool,),
    **{key: (str,) for key in CONNECTION_KEYS},
    **PER_CLIENT_KEYS,
}


class GroupTables:
    """The groups of the index-th scenario, checked at their lines."""

    def __init__(self, path, lines: Lines, index: int, scenario: str):
        self.path, self.lines, self.index, self.scenario = path, lines, index, scenario

    def fail(self, name: str | None, key: str, reason: str) -> SuiteError:
        where = self.lines.of_group(self.index, name, key)
        group = f", group {name!r}" if name else ""
        return SuiteError(self.path, where, f"scenario {self.scenario!r}{group}: {reason}")

    def checked(self, groups: Any) -> list[dict[str, Any]]:
        """The groups as written, each table's keys, values and name checked."""
        if not isinstance(groups, list) or not groups:
            raise self.fail(None, GROUP_KEY, "groups must be [[scenario.groups]] tables")
        if len(groups) > MOST_GROUPS:
            raise self.fail(None, GROUP_KEY, f"at most {MOST_GROUPS} groups, not {len(groups)}")
        names: set[str] = set()
        for group in groups:
            if not isinstance(group, dict):
                raise self.fail(None, GROUP_KEY, "groups must be [[scenario.groups]] tables")
            name = self._name(group, names)
            for key, value in group.items():
                self._value(name, key, value)
        return [dict(group) for group in groups]

    def _name(self, group: dict, names: set[str]) -> str:
        name = group.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise self.fail(
                None, GROUP_KEY, f"a group needs a name of [a-z0-9_-]{{1,32}}, not {name!r}"
            )
        if name in names:
            raise self.fail(name, "name", f"two groups are named {name!r}")
        names.add(name)
        return name

    def _value(self, name: str, key: str, value: Any) -> None:
        if key not in GROUP_KEYS:
            hint = ", ".join(sorted(GROUP_KEYS))
            raise self.fail(name, key, f"unknown group key {key!r} ({hint})")
        types = GROUP_KEYS[key]
        if isinstance(value, list):
            raise self.fail(
                name, key, f"{key} in a group is one value (the scenario's make the matrix)"
            )
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join(t.__name__ for t in types)
            raise self.fail(name, key, f"{key} must be {names}, got {value!r}")
        if value not in CONNECTION_KEYS.get(key, (value,)):
            raise self.fail(
                name, key, f"{key} must be one of {', '.join(CONNECTION_KEYS[key])}, not {value!r}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(name, key, f"{key} must be a finite number, got {value!r}")


def scaled_groups(groups: list[dict[str, Any]], scale: float) -> list[dict[str, Any]]:
    """Each group's window (and ramp) scaled as the test's durations are."""
    return [
        {k: round(v * scale, 3) if k in (*WINDOW_KEYS, "ramp_up_s") else v for k, v in g.items()}
        for g in groups
    ]
