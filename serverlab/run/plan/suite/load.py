"""Suite stage: loading. `load_suite` reads a suite file, checks its own keys and tables and
every profile, expands its scenarios (counted first: a matrix past MAX_TESTS is refused
before it is made), keeps the tests the chosen profile and `--contestants` select, and
checks each kept push test's window of emit cycles. Errors name the file, the line and the
reason, so a suite is fixed in one go rather than by trial.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from serverlab.run.plan.suite.file import Lines, Suite, SuiteError, check_keys, read, value_of
from serverlab.run.plan.suite.matrix import ScenarioMatrix
from serverlab.run.plan.suite.permutation import Permutation, emit_window_s
from serverlab.run.plan.suite.profiles import check_only_dimensions, chosen_profile, profiles_of
from serverlab.run.plan.suite.tables import fileset_table, link_table, named_tables, needs_table

if TYPE_CHECKING:
    from serverlab.contestant.manifest import Manifest

SUITE_KEYS = {
    "name",
    "description",
    "repeats",
    "contestants",
    "scenario",
    "seed",
    "needs",
    "links",
    "filesets",
    "profiles",
}
SEEDS = ("000", "001", "002", "003", "004")
# A suite whose lists multiply past this many tests is refused before it is expanded.
MAX_TESTS = 100_000
# A push test's figures come from the emit cycles of its window; fewer than this is no figure.
MIN_WINDOW_CYCLES = 3


def load_suite(
    path: Path | str,
    scale: float = 1.0,
    known_contestants: Mapping[str, Manifest] | None = None,
    only: list[str] | None = None,
    profile: str | None = None,
) -> Suite:
    """Parses, validates and expands a suite file. `only` narrows it to some contestants,
    `profile` applies a `[profiles.NAME]` table (its scales, then `scale` on top).
    `known_contestants` (name -> manifest) refuses unknown contestants and tunables, and
    tunable values their type does not accept."""
    path = Path(path)
    raw, doc, lines = read(path)
    if scale <= 0:
        raise SuiteError(path, None, f"--scale must be positive, got {scale}")
    check_keys(path, lines, doc, SUITE_KEYS, None, "suite")
    scenarios = doc.get("scenario")
    if not isinstance(scenarios, list) or not scenarios:
        raise SuiteError(path, None, "a suite needs at least one [[scenario]] table")
    profiles = profiles_of(path, lines, doc.get("profiles", {}))
    chosen = chosen_profile(path, profiles, profile)
    suite = _suite(path, raw, doc, lines, scale, chosen)
    default_contestants = value_of(path, lines, doc, "contestants", list, None, default=[])
    expanded = _expand(suite, scenarios, default_contestants, known_contestants)
    # Every profile, chosen or not: a typo in one is found now, not on the day it is chosen.
    for each in profiles.values():
        check_only_dimensions(path, lines, each, [perm for _, perm, _ in expanded])
    suite.permutations = _selected(suite, expanded, chosen, only)
    return suite


def _suite(path: Path, raw: bytes, doc: dict, lines: Lines, scale: float, chosen) -> Suite:
    """The suite's own keys and named tables, before any scenario is expanded."""
    repeats = chosen.repeats or value_of(path, lines, doc, "repeats", int, None, default=1)
    if repeats < 1:
        raise SuiteError(path, lines.of("repeats"), "repeats must be at least 1")
    return Suite(
        name=value_of(path, lines, doc, "name", str, None, default=path.stem),
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        scale=round(scale * chosen.duration_scale, 6),
        repeats=repeats,
        description=doc.get("description", ""),
        seed=_seed(path, lines, doc),
        profile=chosen.name,
        count_scale=chosen.count_scale,
        needs={**needs_table(path, lines, doc.get("needs", {}), "needs"), **chosen.needs},
        cycles=dict(chosen.cycles),
        budget_h=chosen.budget_h,
        links=named_tables(path, lines, doc, "links", link_table),
        filesets=named_tables(path, lines, doc, "filesets", fileset_table),
        lines=lines,
    )


def _expand(suite: Suite, scenarios: list, default_contestants: list, known) -> list[tuple]:
    """(scenario index, permutation, its parameters as written) for every scenario, counted
    before it is made."""
    contexts = [
        ScenarioMatrix(suite.path, suite.lines, index, known, suite)
        for index in range(len(scenarios))
    ]
    _refuse_too_many(suite.path, suite, contexts, scenarios, default_contestants)
    expanded = []
    for index, (ctx, scenario) in enumerate(zip(contexts, scenarios, strict=True)):
        suite.scenario_index.setdefault(scenario.get("name", ""), index)
        expanded += [(index, *t) for t in ctx.expand(scenario, default_contestants)]
    return expanded


def _selected(suite: Suite, expanded: list[tuple], chosen, only) -> list[Permutation]:
    """The permutations the profile and `only` keep, each once."""
    path, lines = suite.path, suite.lines
    seen: set[str] = set()
    kept = []
    for index, perm, written in expanded:
        if (only and perm.contestant not in only) or not chosen.admits(perm, written):
            continue
        if perm.key in seen:
            raise SuiteError(path, lines.of("name", index), f"duplicate test {perm.key}")
        seen.add(perm.key)
        _check_emit_window(suite, index, perm)
        kept.append(perm)
    if only:
        unknown = sorted(set(only) - {p.contestant for p in kept})
        if unknown:
            raise SuiteError(path, None, f"--contestants names no test of this suite: {unknown}")
    if not kept:
        raise SuiteError(path, None, f"profile {chosen.name!r} leaves no test to run")
    return kept


def _check_emit_window(suite: Suite, index: int, perm: Permutation) -> None:
    """A push test's figures come from the cycles emitted between the end of its ramp and
    the emitters' intended stop: a test that leaves fewer than three has none. Checked on
    the tests a profile keeps, so that a profile may leave out the ones that would fail."""
    p = perm.params
    window = emit_window_s(p)
    cycles = 0 if window is None else int((window[1] - window[0]) * 1000 // p["emit_interval_ms"])
    # A profile may settle for fewer at its slowest interval (2 of 30 s), to fit its budget.
    least = min(
        MIN_WINDOW_CYCLES, suite.cycles.get(p.get("emit_interval_ms", 0), MIN_WINDOW_CYCLES)
    )
    if not p.get("emit_interval_ms") or cycles >= least:
        return
    stop = f"the emitters' stop ({window[1]:g} s)" if window else "the end (no quiet end fits)"
    raise SuiteError(
        suite.path,
        suite.lines.of("duration_s", index) or suite.lines.of("name", index),
        f"scenario {perm.scenario!r}: leaves {cycles} emit cycle(s) of "
        f"{p['emit_interval_ms']} ms between the end of the ramp "
        f"({float(p.get('ramp_up_s', 0)):g} s) and {stop}; push figures need at least "
        f"{least}: lengthen duration_s",
    )


def _refuse_too_many(path, suite, contexts, scenarios, default_contestants) -> None:
    """Counts the tests before making them: a few short lists can multiply into millions."""
    total = sum(
        ctx.count(scenario, default_contestants)
        for ctx, scenario in zip(contexts, scenarios, strict=True)
    )
    if total * suite.repeats > MAX_TESTS:
        raise SuiteError(
            path,
            None,
            f"the suite would make {total * suite.repeats:,} tests ({total:,} permutations x "
            f"{suite.repeats} repeats); at most {MAX_TESTS:,} are allowed: shorten its lists",
        )


def _seed(path: Path, lines: Lines, doc: dict) -> str | None:
    seed = value_of(path, lines, doc, "seed", str, None)
    if seed is not None and seed not in SEEDS:
        raise SuiteError(path, lines.of("seed"), f"seed must be one of {', '.join(SEEDS)}")
    return seed
