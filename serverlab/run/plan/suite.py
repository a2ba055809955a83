"""Suites: scenarios as data (`suites/*.toml`), expanded into permutations.

Any scalar field of a scenario may be given as a list; each list is a matrix dimension and
the scenario expands into the cartesian product. Tunables are matrix dimensions too. Errors
name the file, the line and the reason, so a suite is fixed in one go rather than by trial.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serverlab.base import capacity, tomltext
from serverlab.base.engine_facts import (
    FACTS,
    behaviour_paths,
    behaviour_suite_keys,
    own_h2_frame_behaviours,
)
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.base.tlskeys import DEFAULT_KEY_TYPE, KEY_TYPES
from serverlab.contestant.manifest import SYSLOG_MODES
from serverlab.contestant.tunables import TunableValueError

if TYPE_CHECKING:
    from serverlab.contestant.manifest import Manifest

# Behaviour -> the path its requests go to when a scenario names none, as the engine says.
BEHAVIOURS = behaviour_paths(FACTS)
# Attacks that write HTTP/2 frames of their own: on the server's HTTP/2 port (transport h2
# or h2c), with no HTTP/2 setting in the engine's plan.
OWN_H2_FRAMES = own_h2_frame_behaviours(FACTS)

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
# [needs] key -> what it asks of the machine (serverlab/run/host/tune.py checks and sets them).
NEEDS_KEYS = ("nofile", "somaxconn", "local_ports", "max_map_count", "tcp_tw_reuse")
LINK_KEYS = {"rate_mbit": True, "delay_ms": False, "loss_pct": False}  # key -> required
# key -> (least, most): beyond 100 Gbit/s tbf shapes nothing, beyond 5 s of delay (the
# virtual lab's --delay-ms limit too) a test's connections spend it in their handshakes,
# past 100 % there is no packet.
LINK_RANGES = {"rate_mbit": (0.001, 100_000), "delay_ms": (0, 5_000), "loss_pct": (0, 100)}
FILESET_DEFAULTS: dict[str, Any] = {
    "seed": 1,
    "count": 100,
    "min_bytes": 1024,
    "max_bytes": 1_000_000,
    "size_distribution": "lognormal",
    "popularity": "zipf",
    "zipf_s": 1.0,
}
SIZE_DISTRIBUTIONS = ("lognormal", "uniform")
POPULARITIES = ("zipf", "uniform")
# A profile's own `needs` replace the suite's key by key: a quick run of 5,000 clients
# does not need what the full 20,000 do.
# `cycles` (interval in ms -> cycles) lengthens each push test to hold that many emit cycles
# (or, for long polls without an emitter, poll timeouts) after its ramp; `budget_h` caps the
# profile's planned machine time (checked once the tests a machine cannot hold are refused).
PROFILE_KEYS = {"duration_scale", "count_scale", "only", "needs", "repeats", "cycles", "budget_h"}
FULL_PROFILE = "full"
COUNT_FIELDS = ("requests", "syslog_messages")
# key -> (accepted python types, may be a matrix list); the behaviours' own keys are the
# engine's (added below), each of them a matrix dimension.
SCENARIO_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": ((str,), False),
    "description": ((str,), False),
    "behaviour": ((str,), True),
    "pacer": ((str,), True),
    "path": ((str,), True),
    "clients": ((int,), True),
    "requests": ((int,), True),
    "rate": ((int, float), True),
    "rate_end": ((int, float), True),
    "calls_per_connection": ((int,), True),
    "ramp_up_s": ((int, float), True),
    "duration_s": ((int, float), True),
    "timeout_s": ((int, float), True),
    "warmup_s": ((int, float), False),
    "warmup_max_s": ((int, float), False),
    "emit_interval_ms": ((int,), True),
    "server_cpus": ((int,), True),
    "syslog_messages": ((int,), True),
    "syslog_mode": ((str,), True),
    "transport": ((str,), True),
    "tls_key": ((str,), True),
    "tls_resume": ((str,), True),
    "tls_group": ((str,), True),
    "streams": ((int,), True),
    "files": ((str,), True),
    "link": ((str,), True),
    "priming_runs": ((int,), False),
    "kind": ((str,), False),
    "start_rate": ((int, float), False),
    "max_rate": ((int, float), False),
    "start_clients": ((int,), False),
    "max_clients": ((int,), False),
    "step_s": ((int, float), False),
    "p99_bound_ms": ((int, float), False),
    "repeats": ((int,), False),
    "contestants": ((list,), False),
    "tunables": ((dict,), False),
}
SCENARIO_FIELDS.update({key: (types, True) for key, types in behaviour_suite_keys(FACTS).items()})
DURATION_FIELDS = ("duration_s", "ramp_up_s", "warmup_s", "step_s")
# A scenario's kind: one measured load (a test), or a capacity search (issue 32), doubled
# then bisected (serverlab.base.capacity): for requests, steps of the open-loop pacer from
# `start_rate`, for the highest rate sustained with p99 <= `p99_bound_ms`; for push, steps
# of `start_clients` ... `max_clients` subscribers ramped and held (the users pacer), for the
# most held with delivery delay p99 <= `p99_bound_ms`.
TEST_KIND = "test"
CAPACITY = "capacity"
KINDS = (TEST_KIND, CAPACITY)
CAPACITY_KEYS = ("start_rate", "max_rate", "step_s", "start_clients", "max_clients", "p99_bound_ms")
CAPACITY_BEHAVIOURS = ("keepalive", "new-connection")
# Per use of the search: the keys it needs, and those its steps set themselves (the suite
# cannot give them).
CAPACITY_REQUIRED = ("start_rate", "max_rate", "p99_bound_ms")
CAPACITY_SETS = ("rate", "rate_end", "requests", "duration_s", "ramp_up_s", "priming_runs")
PUSH_CAPACITY_REQUIRED = ("start_clients", "max_clients", "p99_bound_ms", "emit_interval_ms")
PUSH_CAPACITY_SETS = ("clients", "priming_runs")
# Keys of one use of the search only.
REQUEST_SEARCH_KEYS = ("start_rate", "max_rate", "step_s")
PUSH_SEARCH_KEYS = ("start_clients", "max_clients")
DEFAULT_STEP_S = 2.0
# A capacity step's own cost besides its load (the server let settle 1 s, an engine
# started): only for the estimate.
STEP_OVERHEAD_S = 1.5
# How a test's HTTP requests travel (issue 22): cleartext, HTTPS/WSS, or HTTP/2 over TLS or
# with prior knowledge. A syslog flood says its own with `syslog_transport` (tls: RFC 5425).
CLEAR = "clear"
TRANSPORTS = (CLEAR, "tls", "h2", "h2c")
TLS_TRANSPORTS = ("tls", "h2")
HTTP2_TRANSPORTS = ("h2", "h2c")
SYSLOG_TLS = "tls"
# The TLS settings of a test and their defaults, written into every TLS test's parameters
# so that the report groups by them whether the suite named them or not.
TLS_DEFAULTS = {"tls_key": DEFAULT_KEY_TYPE, "tls_resume": "on", "tls_group": "x25519"}
TLS_CHOICES = {"tls_key": KEY_TYPES, "tls_resume": ("on", "off"), "tls_group": ("x25519", "p256")}
# A warm-up's cap (`warmup_max_s`) where the suite gives none. Sized by measuring the JVM
# contestants here (see DEFAULT_WARMUP_MAX_S's commit): the warm-up stops earlier, once
# the rate is steady (serverlab.run.execution.warmup); the estimate counts the cap.
DEFAULT_WARMUP_MAX_S = 30.0
# Fixed per-test cost of starting, verifying and stopping a server: only for the estimate.
SETUP_ESTIMATE_S = 6.0
# A suite whose lists multiply past this many tests is refused before it is expanded.
MAX_TESTS = 100_000
# The last second of a push test runs with the emitters stopped, so that the last cycle of
# the window reaches clients that are still there (a cycle after the stop is reported apart).
QUIET_END_S = 1.0
# A push test's figures come from the emit cycles of its window; fewer than this is no figure.
MIN_WINDOW_CYCLES = 3
# A test held for N cycles holds this much longer, so that a timer's jitter cannot cost one.
CYCLE_SLACK_S = 1.0


class SuiteError(ValueError):
    """A suite file that cannot be run, with the place and the reason."""

    def __init__(self, path: Path, line: int | None, reason: str):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {reason}")
        self.path, self.line, self.reason = path, line, reason


@dataclass(frozen=True)
class Permutation:
    """One point of a scenario's matrix for one contestant: what one test runs."""

    scenario: str
    contestant: str
    params: dict[str, Any]
    tunables: dict[str, str]

    @property
    def key(self) -> str:
        """Stable identity across runs, so `--resume` can tell what is already done."""
        dims = ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))
        tun = ",".join(f"{k}={self.tunables[k]}" for k in sorted(self.tunables))
        return f"{self.scenario}|{self.contestant}|{dims}|{tun}"

    def estimated_seconds(self) -> float:
        p = self.params
        if p.get("kind") == CAPACITY:
            steps = capacity_search(p).worst_case_steps()
            step = capacity_step_s(p) + STEP_OVERHEAD_S
            return SETUP_ESTIMATE_S + float(p.get("warmup_s", 0)) + steps * step
        load = float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0))
        runs = 1 + int(p.get("priming_runs", 0))
        return SETUP_ESTIMATE_S + warmup_cap_s(p) + runs * load


@dataclass
class Suite:
    name: str
    path: Path
    sha256: str
    scale: float
    repeats: int
    description: str = ""
    seed: str | None = None
    profile: str = FULL_PROFILE
    count_scale: float = 1.0
    needs: dict[str, int] = field(default_factory=dict)
    cycles: dict[int, int] = field(default_factory=dict)  # the profile's: interval ms -> cycles
    budget_h: float | None = None
    links: dict[str, dict[str, float]] = field(default_factory=dict)
    filesets: dict[str, dict[str, Any]] = field(default_factory=dict)
    permutations: list[Permutation] = field(default_factory=list)
    # Tests the matrix names but a contestant cannot run, each with the reason (a parsed
    # syslog flood for a server without `syslog-parse`); the dry run lists them.
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (scenario, why)
    # Where each scenario stands in the file, for errors found after loading.
    lines: _Lines | None = field(default=None, repr=False)
    scenario_index: dict[str, int] = field(default_factory=dict, repr=False)

    def error(self, scenario: str, key: str, reason: str) -> SuiteError:
        """A SuiteError at the line of `key` in the named scenario."""
        index = self.scenario_index.get(scenario)
        line = self.lines.of(key, index) if self.lines and index is not None else None
        return SuiteError(self.path, line, f"scenario {scenario!r}: {reason}")

    def tests(self) -> list[tuple[Permutation, int]]:
        """Every (permutation, repeat index) in run order: repeats interleaved, so that a
        slow drift of the machine spreads over all contestants rather than one."""
        return [(p, r) for r in range(self.repeats) for p in self.permutations]

    def estimated_seconds(self) -> float:
        return sum(p.estimated_seconds() for p, _ in self.tests())


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


class _Lines:
    """Finds the line of a key inside the n-th [[scenario]] table, for error messages."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.starts = [i for i, ln in enumerate(self.lines) if ln.strip() == "[[scenario]]"]

    def of(self, key: str, scenario_index: int | None = None) -> int | None:
        lo, hi = 0, len(self.lines)
        if scenario_index is not None and scenario_index < len(self.starts):
            lo = self.starts[scenario_index]
            nxt = self.starts[scenario_index + 1 :]
            hi = nxt[0] if nxt else hi
        # A key at the start of a line first, then one inside an inline table.
        for pattern in (
            re.compile(rf"^\s*(\[[^\]]*\b)?{re.escape(key)}\b"),
            re.compile(rf"[{{,]\s*{re.escape(key)}\s*="),
        ):
            for i in range(lo, hi):
                if pattern.search(self.lines[i]):
                    return i + 1
        return lo + 1 if scenario_index is not None else None

    def in_table(self, header: str, key: str | None = None) -> int | None:
        """The line of `key` inside the `[header]` table (or of the header itself)."""
        heading = re.compile(rf"^\s*\[\s*{re.escape(header)}\s*\]")
        start = next((i for i, ln in enumerate(self.lines) if heading.search(ln)), None)
        if start is None:
            return self.of(header.split(".")[0])
        if key is None:
            return start + 1
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i in range(start + 1, len(self.lines)):
            if self.lines[i].lstrip().startswith("["):
                break
            if pattern.search(self.lines[i]):
                return i + 1
        return start + 1


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
    raw, doc, lines = _read(path)
    if scale <= 0:
        raise SuiteError(path, None, f"--scale must be positive, got {scale}")
    _check_keys(path, lines, doc, SUITE_KEYS, None, "suite")
    scenarios = doc.get("scenario")
    if not isinstance(scenarios, list) or not scenarios:
        raise SuiteError(path, None, "a suite needs at least one [[scenario]] table")
    profiles = _profiles(path, lines, doc.get("profiles", {}))
    chosen = _chosen(path, profiles, profile)
    suite = _suite(path, raw, doc, lines, scale, chosen)
    default_contestants = _get(path, lines, doc, "contestants", list, None, default=[])
    expanded = _expand(suite, scenarios, default_contestants, known_contestants)
    # Every profile, chosen or not: a typo in one is found now, not on the day it is chosen.
    for each in profiles.values():
        _check_only_dimensions(path, lines, each, [perm for _, perm, _ in expanded])
    suite.permutations = _selected(suite, expanded, chosen, only)
    return suite


def _read(path: Path) -> tuple[bytes, dict, _Lines]:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SuiteError(path, None, f"cannot read: {err.strerror}") from err
    text = raw.decode("utf-8", errors="replace")
    try:
        doc = tomltext.loads(text)  # nesting refused past tomltext.MAX_DEPTH, at its line
    except tomllib.TOMLDecodeError as err:
        line = getattr(err, "lineno", None) or _toml_error_line(str(err))
        raise SuiteError(path, line, f"not valid TOML: {err}") from err
    return raw, doc, _Lines(text)


def _suite(path: Path, raw: bytes, doc: dict, lines: _Lines, scale: float, chosen) -> Suite:
    """The suite's own keys and named tables, before any scenario is expanded."""
    repeats = chosen.repeats or _get(path, lines, doc, "repeats", int, None, default=1)
    if repeats < 1:
        raise SuiteError(path, lines.of("repeats"), "repeats must be at least 1")
    return Suite(
        name=_get(path, lines, doc, "name", str, None, default=path.stem),
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        scale=round(scale * chosen.duration_scale, 6),
        repeats=repeats,
        description=doc.get("description", ""),
        seed=_seed(path, lines, doc),
        profile=chosen.name,
        count_scale=chosen.count_scale,
        needs={**_needs(path, lines, doc.get("needs", {}), "needs"), **chosen.needs},
        cycles=dict(chosen.cycles),
        budget_h=chosen.budget_h,
        links=_named_tables(path, lines, doc, "links", _link),
        filesets=_named_tables(path, lines, doc, "filesets", _fileset),
        lines=lines,
    )


def _expand(suite: Suite, scenarios: list, default_contestants: list, known) -> list[tuple]:
    """(scenario index, permutation, its parameters as written) for every scenario, counted
    before it is made."""
    contexts = [
        _ScenarioContext(suite.path, suite.lines, index, known, suite)
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


def _seed(path: Path, lines: _Lines, doc: dict) -> str | None:
    seed = _get(path, lines, doc, "seed", str, None)
    if seed is not None and seed not in SEEDS:
        raise SuiteError(path, lines.of("seed"), f"seed must be one of {', '.join(SEEDS)}")
    return seed


def _needs(path: Path, lines: _Lines, needs: Any, header: str) -> dict[str, int]:
    if not isinstance(needs, dict):
        raise SuiteError(path, lines.in_table(header), f"{header} must be a table")
    for key, value in needs.items():
        where = lines.in_table(header, key)
        if key not in NEEDS_KEYS:
            raise SuiteError(path, where, f"unknown needs key {key!r} ({', '.join(NEEDS_KEYS)})")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SuiteError(path, where, f"{header}.{key} must be a non-negative int")
    return dict(needs)


def _named_tables(path: Path, lines: _Lines, doc: dict, key: str, check) -> dict[str, dict]:
    tables = doc.get(key, {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise SuiteError(path, lines.of(key), f"{key} must be [{key}.NAME] tables")
    return {name: check(path, lines, f"{key}.{name}", table) for name, table in tables.items()}


def _number(path, lines, header, table, key, minimum: float, kind=(int, float), maximum=None):
    """`table[key]`, a finite number in [minimum, maximum] (TOML spells nan and inf, and
    reads 1e400 as inf): anything else is refused at its line."""
    value = table[key]
    number = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)
    if not number or value < minimum or (maximum is not None and value > maximum):
        what = "an int" if kind == (int,) else "a number"
        most = f" and <= {maximum}" if maximum is not None else ""
        raise SuiteError(
            path,
            lines.in_table(header, key),
            f"{header}.{key} must be {what} >= {minimum}{most}, not {value!r}",
        )
    return value


def _unknown_keys(path, lines, header, table, allowed) -> None:
    for key in table:
        if key not in allowed:
            hint = ", ".join(sorted(allowed))
            raise SuiteError(path, lines.in_table(header, key), f"unknown key {key!r} ({hint})")


def _link(path: Path, lines: _Lines, header: str, table: dict) -> dict[str, float]:
    _unknown_keys(path, lines, header, table, LINK_KEYS)
    if "rate_mbit" not in table:
        raise SuiteError(path, lines.in_table(header), f"{header} needs rate_mbit")
    return {
        key: _number(path, lines, header, table, key, least, maximum=most)
        for key, (least, most) in LINK_RANGES.items()
        if key in table
    }


def _fileset(path: Path, lines: _Lines, header: str, table: dict) -> dict[str, Any]:
    _unknown_keys(path, lines, header, table, FILESET_DEFAULTS)
    spec = {**FILESET_DEFAULTS, **table}
    for key in ("seed", "count", "min_bytes", "max_bytes"):
        if key in table:
            _number(path, lines, header, table, key, 0 if key == "seed" else 1, (int,))
    if "zipf_s" in table:
        _number(path, lines, header, table, "zipf_s", 0)
    if spec["max_bytes"] < spec["min_bytes"]:
        raise SuiteError(path, lines.in_table(header, "max_bytes"), "max_bytes < min_bytes")
    for key, allowed in (("size_distribution", SIZE_DISTRIBUTIONS), ("popularity", POPULARITIES)):
        if spec[key] not in allowed:
            where = lines.in_table(header, key)
            raise SuiteError(path, where, f"{header}.{key} must be one of {', '.join(allowed)}")
    return spec


def _profiles(path: Path, lines: _Lines, profiles: Any) -> dict[str, Profile]:
    """Every [profiles.NAME] of the suite, each checked whether it is chosen or not."""
    if not isinstance(profiles, dict):
        raise SuiteError(path, lines.of("profiles"), "profiles must be [profiles.NAME] tables")
    return {name: _profile(path, lines, name, table) for name, table in profiles.items()}


def _chosen(path: Path, profiles: dict[str, Profile], name: str | None) -> Profile:
    if name is None or (name == FULL_PROFILE and name not in profiles):
        return Profile()
    if name not in profiles:
        known = ", ".join(sorted({FULL_PROFILE, *profiles}))
        raise SuiteError(path, None, f"no profile {name!r} in this suite ({known})")
    return profiles[name]


def _profile(path: Path, lines: _Lines, name: str, table: Any) -> Profile:
    header = f"profiles.{name}"
    if not isinstance(table, dict):
        raise SuiteError(path, lines.in_table("profiles", name), f"{header} must be a table")
    _unknown_keys(path, lines, header, table, PROFILE_KEYS)
    scales = {
        key: _number(path, lines, header, table, key, 1e-6)
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
    needs = _needs(path, lines, table.get("needs", {}), f"{header}.needs")
    repeats = table.get("repeats")
    if repeats is not None and (type(repeats) is not int or repeats < 1):
        where = lines.in_table(header, "repeats")
        raise SuiteError(path, where, f"{header}.repeats must be an integer of at least 1")
    budget = _number(path, lines, header, table, "budget_h", 1e-6) if "budget_h" in table else None
    return Profile(
        name=name,
        only=dict(only),
        needs=needs,
        repeats=repeats,
        cycles=_cycles(path, lines, header, table.get("cycles", {})),
        budget_h=budget,
        **scales,
    )


def _cycles(path: Path, lines: _Lines, header: str, table: Any) -> dict[int, int]:
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


def _check_only_dimensions(path: Path, lines: _Lines, profile: Profile, perms) -> None:
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


def _toml_error_line(message: str) -> int | None:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else None


def _check_keys(path, lines, table, allowed, index, what):
    for key in table:
        if key not in allowed:
            hint = ", ".join(sorted(allowed))
            raise SuiteError(path, lines.of(key, index), f"unknown {what} key {key!r} ({hint})")


def _get(path, lines, table, key, typ, index, default=None):
    if key not in table:
        return default
    value = table[key]
    if not isinstance(value, typ) or isinstance(value, bool):
        raise SuiteError(path, lines.of(key, index), f"{key} must be {typ.__name__}")
    return value


class _ScenarioContext:
    def __init__(self, path: Path, lines: _Lines, index: int, known: set[str] | None, suite: Suite):
        self.path, self.lines, self.index, self.known = path, lines, index, known
        self.suite = suite

    def fail(self, key: str, reason: str) -> SuiteError:
        return SuiteError(self.path, self.lines.of(key, self.index), reason)

    def expand(self, scenario: dict, default_contestants: list):
        """Yields (permutation, its parameters as written, before any scaling)."""
        _check_keys(self.path, self.lines, scenario, SCENARIO_FIELDS, self.index, "scenario")
        if "name" not in scenario:
            raise self.fail("[[scenario]]", "a scenario needs a name")
        if "behaviour" not in scenario:
            raise self.fail("name", f"scenario {scenario['name']!r} needs a behaviour")
        dims: dict[str, list] = {}
        for key, value in scenario.items():
            if key in ("name", "description", "contestants", "tunables", "repeats"):
                continue
            if key == "priming_runs":
                self._priming_runs(value)
            dims[key] = self._dimension(key, value)
        contestants = scenario.get("contestants", default_contestants)
        if not contestants or not all(isinstance(c, str) for c in contestants):
            raise self.fail("contestants", "a scenario needs a list of contestant names")
        for contestant in contestants:
            if self.known is not None and contestant not in self.known:
                known = ", ".join(sorted(self.known))
                raise self.fail("contestants", f"unknown contestant {contestant!r} ({known})")
        tunables = scenario.get("tunables", {})
        self._check_tunable_scopes(tunables, contestants)
        for contestant in contestants:
            for written in _product(dims):
                params = _scaled(written, self.suite.scale, self.suite.count_scale)
                params = held_for_cycles(params, self.suite.cycles)
                self._check_combination(params)
                params = with_tls_defaults(params)
                if self._cannot_run(scenario["name"], contestant, params):
                    continue
                for tuned in _product(self._tunable_dims(tunables, contestant)):
                    yield Permutation(scenario["name"], contestant, params, tuned), written

    def count(self, scenario: Any, default_contestants: list) -> int:
        """How many permutations `expand` would make, without making them."""
        if not isinstance(scenario, dict):
            return 1
        dims = [
            len(v) if isinstance(v, list) else 1
            for k, v in scenario.items()
            if k not in ("name", "description", "contestants", "tunables", "repeats")
        ]
        contestants = scenario.get("contestants", default_contestants)
        tunables = scenario.get("tunables", {})
        total = 0
        for contestant in contestants if isinstance(contestants, list) else []:
            merged = {}
            for scope in ("*", contestant):
                table = tunables.get(scope, {}) if isinstance(tunables, dict) else {}
                merged.update(table if isinstance(table, dict) else {})
            sizes = [len(v) if isinstance(v, list) else 1 for v in merged.values()]
            total += math.prod(dims) * math.prod(sizes)
        return total

    def _priming_runs(self, value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail("priming_runs", "priming_runs must be a non-negative int")

    def _dimension(self, key: str, value: Any) -> list:
        types, matrix_ok = SCENARIO_FIELDS[key]
        values = value if isinstance(value, list) and list not in types else [value]
        if isinstance(value, list) and not matrix_ok:
            raise self.fail(key, f"{key} cannot be a list")
        if not values:
            raise self.fail(key, f"{key} is an empty list")
        for v in values:
            if not isinstance(v, types) or isinstance(v, bool):
                names = " or ".join(t.__name__ for t in types)
                raise self.fail(key, f"{key} must be {names}, got {v!r}")
            if isinstance(v, float) and not math.isfinite(v):
                raise self.fail(key, f"{key} must be a finite number, got {v!r}")
        return values

    def _check_tunable_scopes(self, tunables: Any, contestants: list[str]) -> None:
        """`tunables = { workers = 2 }` would otherwise tune a contestant named "workers",
        that is nothing, silently."""
        for scope in tunables if isinstance(tunables, dict) else ():
            if scope != "*" and scope not in contestants:
                names = ", ".join(contestants)
                raise self.fail(
                    "tunables",
                    f"tunables.{scope} names no contestant of this scenario ({names}): "
                    f'write tunables.CONTESTANT = {{ ... }} or tunables."*" = {{ ... }}',
                )

    def _tunable_dims(self, tunables: dict, contestant: str) -> dict[str, list]:
        if not isinstance(tunables, dict):
            raise self.fail("tunables", "tunables must be a table of contestant tables")
        merged: dict[str, Any] = {}
        for scope in ("*", contestant):
            table = tunables.get(scope, {})
            if not isinstance(table, dict):
                raise self.fail("tunables", f"tunables.{scope} must be a table")
            merged.update(table)
        dims = {}
        for key, value in merged.items():
            values = value if isinstance(value, list) else [value]
            if not values:
                raise self.fail("tunables", f"tunable {key} is an empty list")
            dims[key] = [tunable_text(v) for v in values]
            self._check_tunable(contestant, key, dims[key])
        return dims

    def _check_tunable(self, contestant: str, key: str, values: list[str]) -> None:
        """Refuses a tunable the contestant lacks, or a value its type does not accept."""
        manifest = (self.known or {}).get(contestant)
        if manifest is None:
            return
        if key not in manifest.tunables:
            known = ", ".join(sorted(manifest.tunables)) or "none"
            raise self.fail(key, f"{contestant} has no tunable {key!r} (known: {known})")
        for value in values:
            try:
                manifest.tunables[key].render(value)
            except TunableValueError as error:
                raise self.fail(key, f"{contestant}: {error}") from None

    def _check_combination(self, p: dict) -> None:
        """What only the suite knows. Which load settings go together is the engine's to
        judge (`serverlab-load --check`, in the dry run), so no copy of its rules lives here."""
        if "emit_interval_ms" in p and p["behaviour"] not in PUSH_BEHAVIOURS:
            raise self.fail("emit_interval_ms", "emit_interval_ms only applies to push behaviours")
        if p.get("warmup_max_s", math.inf) < p.get("warmup_s", 0):
            raise self.fail("warmup_max_s", "warmup_max_s must be at least warmup_s")
        if p.get("server_cpus", 1) < 1:
            raise self.fail("server_cpus", "server_cpus must be at least 1")
        for key in ("syslog_messages", "syslog_mode"):
            if key in p and p["behaviour"] != "syslog":
                raise self.fail(key, f"{key} only applies to the syslog behaviour")
        if p.get("syslog_mode", "count") not in SYSLOG_MODES:
            raise self.fail("syslog_mode", 'syslog_mode is "count" or "parse" (spec §7.1)')
        self._check_named(p, "link", self.suite.links)
        self._check_named(p, "files", self.suite.filesets)
        self._check_transport(p)
        self._check_capacity(p)

    def _check_capacity(self, p: dict) -> None:
        """A capacity search's keys: only on a capacity scenario, all it needs, positive,
        and none of the keys its steps set themselves."""
        kind = p.get("kind", TEST_KIND)
        if kind not in KINDS:
            raise self.fail("kind", f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if kind != CAPACITY:
            for key in CAPACITY_KEYS:
                if key in p:
                    raise self.fail(key, f'{key} applies to kind = "capacity" scenarios only')
            return
        if p["behaviour"] in PUSH_BEHAVIOURS:
            self._check_push_capacity(p)
            return
        if p["behaviour"] not in CAPACITY_BEHAVIOURS:
            raise self.fail(
                "behaviour",
                f"a capacity search runs {' or '.join(CAPACITY_BEHAVIOURS)} or a push "
                f"behaviour, not {p['behaviour']!r}",
            )
        if p.get("pacer", "open") != "open":
            raise self.fail("pacer", 'a capacity search steps the open-loop pacer: pacer = "open"')
        self._only_in_the_other_search(p, PUSH_SEARCH_KEYS, "a push capacity search")
        self._check_search_keys(p, CAPACITY_REQUIRED, CAPACITY_SETS)
        if not p.get("warmup_s"):
            raise self.fail("kind", "a capacity search measures a warmed server: give warmup_s")
        if p["max_rate"] < p["start_rate"]:
            raise self.fail("max_rate", f"max_rate {p['max_rate']:g} is below start_rate")

    def _check_push_capacity(self, p: dict) -> None:
        """A push search: steps of the users pacer, each ramping and holding its subscribers
        (ramp_up_s, duration_s) while the emitters run."""
        if p.get("pacer") != "users":
            raise self.fail(
                "pacer" if "pacer" in p else "behaviour",
                'a push capacity search ramps and holds its clients: pacer = "users"',
            )
        self._only_in_the_other_search(p, REQUEST_SEARCH_KEYS, "a request capacity search")
        self._check_search_keys(p, PUSH_CAPACITY_REQUIRED, PUSH_CAPACITY_SETS)
        if "duration_s" not in p:
            raise self.fail(
                "kind", "a push capacity search holds each step's clients: give duration_s"
            )
        if p["max_clients"] < p["start_clients"]:
            raise self.fail("max_clients", f"max_clients {p['max_clients']} is below start_clients")

    def _only_in_the_other_search(self, p: dict, keys: tuple, other: str) -> None:
        for key in keys:
            if key in p:
                raise self.fail(key, f"{key} applies to {other} only")

    def _check_search_keys(self, p: dict, required: tuple, sets: tuple) -> None:
        """All the keys a search needs, positive, and none of those its steps set."""
        for key in sets:
            if key in p:
                raise self.fail(key, f"{key} is set by the capacity search's steps, not the suite")
        for key in required:
            if key not in p:
                raise self.fail("kind", f'a kind = "capacity" scenario needs {key}')
        for key in CAPACITY_KEYS:
            if key in p and not p[key] > 0:
                raise self.fail(key, f"{key} must be positive, got {p[key]!r}")

    def _check_transport(self, p: dict) -> None:
        """The transport and its TLS settings: known values, and TLS settings only where
        the test speaks TLS."""
        transport = p.get("transport", CLEAR)
        if transport not in TRANSPORTS:
            raise self.fail("transport", f"transport must be one of {', '.join(TRANSPORTS)}")
        if "transport" in p and p["behaviour"] == "syslog":
            raise self.fail("transport", 'a syslog flood says syslog_transport = "tls" instead')
        for key, allowed in TLS_CHOICES.items():
            if key in p and p[key] not in allowed:
                raise self.fail(key, f"{key} must be one of {', '.join(allowed)}")
            if key in p and not speaks_tls(p):
                raise self.fail(key, f"{key} applies to TLS tests only (transport tls or h2)")
        if p["behaviour"] in OWN_H2_FRAMES and transport not in HTTP2_TRANSPORTS:
            raise self.fail(
                "transport", f"{p['behaviour']} writes HTTP/2 frames: transport h2 or h2c"
            )
        if "streams" in p and transport not in HTTP2_TRANSPORTS:
            raise self.fail("streams", "streams applies to HTTP/2 tests only (transport h2 or h2c)")
        if p.get("streams", 1) < 1:
            raise self.fail("streams", "streams must be at least 1")

    def _cannot_run(self, scenario: str, contestant: str, p: dict) -> bool:
        """A parsed flood for a contestant without `syslog-parse` is left out, and said."""
        manifest = (self.known or {}).get(contestant)
        if p.get("syslog_mode") != "parse" or manifest is None:
            return False
        if "syslog-parse" in manifest.implements:
            return False
        why = (
            f"{scenario} x {contestant}: syslog_mode=parse, and it does not implement syslog-parse"
        )
        if (scenario, why) not in self.suite.left_out:
            self.suite.left_out.append((scenario, why))
        return True

    def _check_named(self, p: dict, key: str, tables: dict) -> None:
        if key in p and p[key] not in tables:
            known = ", ".join(sorted(tables)) or "none"
            table = "links" if key == "link" else "filesets"
            raise self.fail(key, f"{key} {p[key]!r} is not a [{table}.NAME] table ({known})")


def is_push_search(p: dict[str, Any]) -> bool:
    """A capacity search over subscribers held (push), not over an offered rate."""
    return p.get("kind") == CAPACITY and p.get("behaviour") in PUSH_BEHAVIOURS


def capacity_search(p: dict[str, Any]) -> capacity.Search:
    """A capacity scenario's search, from its (checked) parameters: over whole clients for
    push, over the offered rate for requests."""
    if is_push_search(p):
        return capacity.Search(float(p["start_clients"]), float(p["max_clients"]), whole=True)
    return capacity.Search(float(p["start_rate"]), float(p["max_rate"]))


def capacity_step_s(p: dict[str, Any]) -> float:
    """One step's load: a push step ramps and holds its clients, a request step runs
    `step_s` at its rate."""
    if is_push_search(p):
        return float(p.get("ramp_up_s", 0)) + float(p["duration_s"])
    return float(p.get("step_s", DEFAULT_STEP_S))


def speaks_tls(p: dict[str, Any]) -> bool:
    """Whether the test's connections are TLS: HTTPS/WSS, HTTP/2 over TLS, RFC 5425."""
    if p.get("behaviour") == "syslog":
        return p.get("syslog_transport") == SYSLOG_TLS
    return p.get("transport", CLEAR) in TLS_TRANSPORTS


def with_tls_defaults(p: dict[str, Any]) -> dict[str, Any]:
    """A TLS test's parameters with every TLS setting written out."""
    return {**TLS_DEFAULTS, **p} if speaks_tls(p) else p


def warmup_cap_s(p: dict[str, Any]) -> float:
    """The longest a test's warm-up may run: its `warmup_max_s`, else the default cap, never
    below its `warmup_s`; 0 for a test without a warm-up."""
    floor = float(p.get("warmup_s", 0))
    if not floor and "warmup_max_s" not in p:
        return 0.0
    return max(floor, float(p.get("warmup_max_s", DEFAULT_WARMUP_MAX_S)))


def emit_window_s(p: dict[str, Any]) -> tuple[float, float] | None:
    """(end of the ramp, the emitters' intended stop), in seconds from the load's start, of a
    push test whose emitters the runner stops before the clients leave; None otherwise."""
    if not p.get("emit_interval_ms"):
        return None
    held = float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0))
    if held <= 2 * QUIET_END_S:
        return None
    return float(p.get("ramp_up_s", 0)), held - QUIET_END_S


def _product(dims: dict[str, list]):
    keys = list(dims)
    for combo in itertools.product(*(dims[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def _scaled(params: dict, scale: float, count_scale: float = 1.0) -> dict:
    out = dict(params)
    for key in DURATION_FIELDS:
        if key in out:
            out[key] = round(out[key] * scale, 3)
    for key in COUNT_FIELDS:
        if key in out:
            out[key] = max(1, round(out[key] * count_scale))
    return out
