"""Suite stage: profiles. How a `[profiles.NAME]` shrinks a suite: its scales of durations
and counts (`scaled`), the emit cycles each push test must hold (`held_for_cycles`), the
part of the matrix it keeps (`only`), and its own needs, repeats and budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serverlab.run.plan.suite.file import FULL_PROFILE, Lines, SuiteError, number, unknown_keys
from serverlab.run.plan.suite.permutation import QUIET_END_S, Permutation
from serverlab.run.plan.suite.tables import needs_table

# A profile's own `needs` replace the suite's key by key: a quick run of 5,000 clients
# does not need what the full 20,000 do.
# `cycles` (interval in ms -> cycles) lengthens each push test to hold that many emit cycles
# (or, for long polls without an emitter, poll timeouts) after its ramp; `budget_h` caps the
# profile's planned machine time (checked once the tests a machine cannot hold are refused).
PROFILE_KEYS = {"duration_scale", "count_scale", "only", "needs", "repeats", "cycles", "budget_h"}
COUNT_FIELDS = ("requests", "syslog_messages")
DURATION_FIELDS = ("duration_s", "ramp_up_s", "warmup_s", "step_s")
# A test held for N cycles holds this much longer, so that a timer's jitter cannot cost one.
CYCLE_SLACK_S = 1.0


@dataclass(frozen=True)
class Profile:
    """How a named profile shrinks the suite: durations, counts, and the matrix."""

    name: str = FULL_PROFILE
    duration_scale: float = 1.0
    count_scale: float = 1.0
    only: dict[str, list] = field(default_factory=dict)
    needs: dict[str, int] = field(default_factory=dict)
    repeats: int | None = None
    cycles: dict[int, int] = field(default_factory=dict)
    budget_h: float | None = None

    def admits(self, perm: Permutation, written: dict[str, Any]) -> bool:
        """Whether a test lies inside `only`; values compare as written in the file."""
        for dim, allowed in self.only.items():
            if dim == "contestants":
                value, choices = perm.contestant, allowed
            elif dim == "scenarios":
                value, choices = perm.scenario, allowed
            elif dim in written:
                value, choices = written[dim], allowed
            elif dim in perm.tunables:
                value, choices = perm.tunables[dim], [tunable_text(v) for v in allowed]
            else:
                continue
            if value not in choices:
                return False
        return True


def tunable_text(value: Any) -> str:
    """A tunable as the start command receives it: TOML's true/false as the words."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def profiles_of(path: Path, lines: Lines, profiles: Any) -> dict[str, Profile]:
    """Every [profiles.NAME] of the suite, each checked whether it is chosen or not."""
    if not isinstance(profiles, dict):
        raise SuiteError(path, lines.of("profiles"), "profiles must be [profiles.NAME] tables")
    return {name: _profile(path, lines, name, table) for name, table in profiles.items()}


def chosen_profile(path: Path, profiles: dict[str, Profile], name: str | None) -> Profile:
    if name is None or (name == FULL_PROFILE and name not in profiles):
        return Profile()
    if name not in profiles:
        known = ", ".join(sorted({FULL_PROFILE, *profiles}))
        raise SuiteError(path, None, f"no profile {name!r} in this suite ({known})")
    return profiles[name]


def _profile(path: Path, lines: Lines, name: str, table: Any) -> Profile:
    header = f"profiles.{name}"
    if not isinstance(table, dict):
        raise SuiteError(path, lines.in_table("profiles", name), f"{header} must be a table")
    unknown_keys(path, lines, header, table, PROFILE_KEYS)
    scales = {
        key: number(path, lines, header, table, key, 1e-6)
        for key in ("duration_scale", "count_scale")
        if key in table
    }
    only = table.get("only", {})
    if not isinstance(only, dict):
        raise SuiteError(path, lines.in_table(header, "only"), f"{header}.only must be a table")
    for dim, values in only.items():
        if not isinstance(values, list) or not values:
            where = lines.in_table(f"{header}.only", dim)
            raise SuiteError(path, where, f"{header}.only.{dim} must be a non-empty list")
    needs = needs_table(path, lines, table.get("needs", {}), f"{header}.needs")
    repeats = table.get("repeats")
    if repeats is not None and (type(repeats) is not int or repeats < 1):
        where = lines.in_table(header, "repeats")
        raise SuiteError(path, where, f"{header}.repeats must be an integer of at least 1")
    budget = number(path, lines, header, table, "budget_h", 1e-6) if "budget_h" in table else None
    return Profile(
        name=name,
        only=dict(only),
        needs=needs,
        repeats=repeats,
        cycles=_cycles(path, lines, header, table.get("cycles", {})),
        budget_h=budget,
        **scales,
    )


def _cycles(path: Path, lines: Lines, header: str, table: Any) -> dict[int, int]:
    """`[profiles.NAME.cycles]`: an interval in ms (a bare key of digits) -> cycles, >= 2."""
    header = f"{header}.cycles"
    if not isinstance(table, dict):
        raise SuiteError(path, lines.in_table(header), f"{header} must be a table")
    cycles = {}
    for key, value in table.items():
        where = lines.in_table(header, key)
        if not key.isdigit() or int(key) < 1:
            raise SuiteError(path, where, f"{header}: {key!r} is not an interval in ms")
        if type(value) is not int or value < 2:
            raise SuiteError(path, where, f"{header}.{key} must be an integer of at least 2")
        cycles[int(key)] = value
    return cycles


def held_for_cycles(params: dict[str, Any], cycles: dict[int, int]) -> dict[str, Any]:
    """The test lengthened (never shortened) to hold the profile's cycles after its ramp:
    of its emitter, or of its poll timeouts when a long poll has no emitter."""
    interval = params.get("emit_interval_ms")
    if interval is None and params.get("behaviour") == "longpoll":
        interval = params.get("longpoll_duration_ms")
    if interval not in cycles or "duration_s" not in params:
        return params
    held = cycles[interval] * interval / 1000 + QUIET_END_S + CYCLE_SLACK_S
    return {**params, "duration_s": max(float(params["duration_s"]), held)}


def check_only_dimensions(path: Path, lines: Lines, profile: Profile, perms) -> None:
    """A dimension of `only` that no test has is a typo, not a filter that passes all."""
    present = {"contestants", "scenarios"}
    for perm in perms:
        present.update(perm.params, perm.tunables)
    for dim in profile.only:
        if dim not in present:
            where = lines.in_table(f"profiles.{profile.name}.only", dim)
            raise SuiteError(path, where, f"profile {profile.name!r}: no test has {dim!r}")
    unknown = sorted(set(profile.only.get("scenarios", ())) - {p.scenario for p in perms})
    if unknown:
        where = lines.in_table(f"profiles.{profile.name}.only", "scenarios")
        raise SuiteError(path, where, f"profile {profile.name!r}: no scenario {unknown[0]!r}")


def scaled(params: dict, scale: float, count_scale: float = 1.0) -> dict:
    out = dict(params)
    for key in DURATION_FIELDS:
        if key in out:
            out[key] = round(out[key] * scale, 3)
    for key in COUNT_FIELDS:
        if key in out:
            out[key] = max(1, round(out[key] * count_scale))
    return out
