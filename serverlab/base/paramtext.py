"""A test's parameter as one line names it (progress, dry run, refusals, report labels):
its value as written, except its client groups (`[[scenario.groups]]`), named by their names;
their settings are the plan's and the report's client-groups table's."""

from __future__ import annotations

from typing import Any

# The parameter holding a test's client groups (serverlab.run.plan.suite.file.GROUP_KEY).
GROUPS_PARAM = "groups"


def param_text(key: str, value: Any) -> str:
    if key == GROUPS_PARAM and isinstance(value, list):
        return ",".join(str(group.get("name")) for group in value if isinstance(group, dict))
    return str(value)


def params_text(params: dict[str, Any], leave_out: tuple[str, ...] = ()) -> str:
    """`key=value` for each parameter but those left out, space-separated."""
    return " ".join(f"{k}={param_text(k, v)}" for k, v in params.items() if k not in leave_out)
