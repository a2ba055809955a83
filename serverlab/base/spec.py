"""What the orchestrator needs to know of the spec, read from the spec itself (spec/SPEC.md
and spec/cases), so that no copy of it can drift: its version and the /perf body."""

from __future__ import annotations

import functools
import re
import tomllib

from serverlab.base.engine_facts import FACTS, push_behaviours
from serverlab.base.paths import spec_cases_dir, spec_file

PERF_CASE = "perf.get"

# The behaviours whose clients hold a connection for events the server pushes (the spec's
# `push`, `sse` and `websocket` parts), as the engine says: the suite, the planner and the
# report all ask it.
PUSH_BEHAVIOURS = push_behaviours(FACTS)
# The push behaviours whose request a thread-per-request server serves on one request thread
# for the whole hold, by the words people use for them.
HELD_REQUESTS = {"longpoll": "long polls", "comet": "comet streams"}


class SpecError(RuntimeError):
    pass


@functools.cache
def spec_version() -> str:
    """`MAJOR.MINOR`, as the `spec_version = "..."` line of spec/SPEC.md says."""
    path = spec_file()
    found = re.search(r'^spec_version = "(\d+\.\d+)"', path.read_text(), re.M)
    if not found:
        raise SpecError(f"{path} states no spec_version")
    return found.group(1)


def spec_major() -> int:
    return int(spec_version().split(".")[0])


def same_major(version: str) -> bool:
    """True if `version` (as a server reports it) has the spec's MAJOR (spec §9)."""
    return str(version).split(".")[0] == str(spec_major())


@functools.cache
def perf_body() -> str:
    """The exact body every `GET /perf` answers (the expectation of case perf.get)."""
    path = spec_cases_dir() / "perf.toml"
    for case in tomllib.loads(path.read_text())["case"]:
        if case["id"] == PERF_CASE:
            return case["expect"]["body"]
    raise SpecError(f"{path} has no case {PERF_CASE}")
