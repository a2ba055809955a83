"""Paired runs (``serverlab compare --paired SUITE A B``): two configurations measured in one
sitting on one machine, interleaved A, B, A', A, B, A', …, so that a drift of the machine
touches both alike; A' is A again, the third arm whose difference from A is the noise floor.

A configuration is a few ``name=value`` words: a contestant's tunables (``chunk_size=1024``),
``engine=PATH`` (another build of the load engine) or ``contestants=DIR`` (a folder holding
other builds or versions of the contestants). Every test stays an ordinary recorded test; the
arm it belongs to is kept in its run info (``paired``), beside it, never in what identifies
its scenario, so that A and B line up scenario by scenario. A is repeats 0, 2, 4, … of its
permutation and A' repeats 1, 3, 5, …, so the two halves of A alternate in time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base.paths import CONTESTANTS_ENV
from serverlab.contestant.manifest import Manifest, ManifestError, UnknownContestantError, find
from serverlab.contestant.tunables import TunableValueError
from serverlab.results.records import RecordedTest
from serverlab.run.execution.engine import foreign_engine
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.testplan import TestPlan

ENGINE_ENV = "SERVERLAB_ENGINE"
ARMS = ("A", "B", "A'")
DEFAULT_ROUNDS = 4


class PairedError(ValueError):
    """A configuration that cannot be run; the message says which word and why."""


@dataclass(frozen=True)
class Config:
    """One side of a paired comparison, as written on the command line."""

    text: str
    tunables: dict[str, str] = field(default_factory=dict)
    engine: str | None = None
    contestants: str | None = None


def parse_config(text: str) -> Config:
    """'chunk_size=1024,read=whole' or 'engine=/path/serverlab-load' or 'contestants=DIR';
    '-' (or nothing) is the suite as written."""
    tunables: dict[str, str] = {}
    paths: dict[str, str] = {}
    given: dict[str, str] = {}
    for word in (w for w in text.replace(",", " ").split() if w != "-"):
        name, sep, value = word.partition("=")
        if not sep or not name or not value:
            raise PairedError(f"{word!r}: a configuration is name=value words, e.g. read=whole")
        if name in given:
            raise PairedError(
                f"{given[name]} and {word}: {name} given twice in {text!r}; give it once"
            )
        given[name] = word
        if name in ("engine", "contestants"):
            if not Path(value).exists():
                raise PairedError(f"{word}: {value} does not exist")
            paths[name] = str(Path(value).resolve())
        else:
            tunables[name] = value
    return Config(text or "-", tunables, paths.get("engine"), paths.get("contestants"))


def check_arm(config: Config, names: list[str]) -> None:
    """Everything an arm needs, before any test runs: its engine is a serverlab-load of
    this version, its contestants folder holds every contestant of the suite, and each of
    its tunables is known, with a value its contestant accepts."""
    if config.engine is not None:
        why = foreign_engine(Path(config.engine))
        if why:
            raise PairedError(
                f"engine={config.engine}: not a serverlab-load of this version: {why}"
            )
    check_config(config, arm_manifests(config, names))


def arm_manifests(config: Config, names: list[str]) -> dict[str, Manifest]:
    """The manifests an arm runs: its contestants folder's, or the one in force."""
    root = Path(config.contestants) if config.contestants else None
    manifests = {}
    for name in names:
        try:
            manifests[name] = find(name, root)
        except (UnknownContestantError, ManifestError) as error:
            where = f"contestants={config.contestants}" if root else "the contestants folder"
            raise PairedError(f"{where}: {error}") from None
    return manifests


def check_config(config: Config, manifests: dict[str, Manifest]) -> None:
    """Every tunable must be one the suite's contestants know, with a value it accepts."""
    for name, value in config.tunables.items():
        owners = [m for m in manifests.values() if name in m.tunables]
        if not owners:
            raise PairedError(
                f"{name}={value}: no contestant of the suite has a tunable {name!r} "
                f"({', '.join(sorted(manifests))})"
            )
        for manifest in owners:
            try:
                manifest.tunables[name].render(value)
            except TunableValueError as error:
                raise PairedError(f"{manifest.name}: {error}") from None


def interleave(
    plans: list[TestPlan], a: Config, b: Config, rounds: int, manifests: dict[str, Manifest]
) -> list[TestPlan]:
    """A, B, A' for every permutation, round after round. The suite's own repeats are
    replaced by the rounds: the plans given are taken once per permutation. A tunable
    applies to the contestants that have it."""
    if rounds < 2:
        raise PairedError("--rounds must be at least 2: the floor needs two A' at least")
    firsts = [p for p in plans if p.repeat == 0]
    ordered = []
    for round_ in range(rounds):
        for plan in firsts:
            known = set(manifests[plan.contestant].tunables)
            ordered.append(_armed(plan, a, "A", 2 * round_, known))
            ordered.append(_armed(plan, b, "B", round_, known))
            ordered.append(_armed(plan, a, "A'", 2 * round_ + 1, known))
    return ordered


def _armed(plan: TestPlan, config: Config, arm: str, repeat: int, known: set[str]) -> TestPlan:
    # The permutation key keeps the side (A and A' are one configuration), so that --resume
    # and the test's identity stay distinct for A and B.
    side = "B" if arm == "B" else "A"
    return dataclasses.replace(
        plan,
        key=f"{plan.key}|paired={side}",
        repeat=repeat,
        tunables={**plan.tunables, **{k: v for k, v in config.tunables.items() if k in known}},
    )


def arm_of(plan: TestPlan) -> str:
    if plan.key.endswith("|paired=B"):
        return "B"
    return "A" if plan.repeat % 2 == 0 else "A'"


def paired_execute(
    a: Config, b: Config, inner: Callable[[TestPlan, Environment], RecordedTest] = execute
) -> Callable[[TestPlan, Environment], RecordedTest]:
    """The executor with each arm's engine and contestants in force while its test runs;
    the arm and its configuration go into the recorded test's run info."""

    def run_one(plan: TestPlan, env: Environment) -> RecordedTest:
        arm = arm_of(plan)
        config = b if arm == "B" else a
        with environment(config):
            recorded = inner(plan, env)
        recorded.run_info = {**recorded.run_info, "paired": {"arm": arm, "config": config.text}}
        return recorded

    return run_one


@contextmanager
def environment(config: Config) -> Iterator[None]:
    """The arm's engine and contestants folder in force (the process's environment, which
    the executor and the engine's checks read) while the block runs."""
    changes = {ENGINE_ENV: config.engine, CONTESTANTS_ENV: config.contestants}
    saved = {name: os.environ.get(name) for name in changes}
    try:
        for name, value in changes.items():
            if value is not None:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
