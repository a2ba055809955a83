"""Suite stage: the matrix. A scenario's keys and their types (`SCENARIO_FIELDS`, the
behaviours' and pacers' own from the engine's facts); its lists and tunables expanded into
permutations, one per point of their cartesian product; and the combination rules only
the suite knows (transport and TLS settings, capacity searches, named links and file
sets), each refused at its line.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from serverlab.base.engine_facts import (
    FACTS,
    behaviour_paths,
    behaviour_suite_keys,
    own_h2_frame_behaviours,
    pacer_suite_keys,
    rate_searchable_behaviours,
    search_pacers,
)
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.base.tlskeys import KEY_TYPES
from serverlab.contestant.manifest import SYSLOG_MODES
from serverlab.contestant.tunables import TunableValueError
from serverlab.run.execution.testplan import CLIENTS_LEVEL, RATE_LEVEL
from serverlab.run.plan.suite.file import Lines, Suite, SuiteError, check_keys
from serverlab.run.plan.suite.groups import GROUP_KEY, GroupTables, scaled_groups
from serverlab.run.plan.suite.permutation import (
    CAPACITY,
    CLEAR,
    HTTP2_TRANSPORTS,
    KINDS,
    TEST_KIND,
    TRANSPORTS,
    Permutation,
    speaks_tls,
    with_tls_defaults,
)
from serverlab.run.plan.suite.profiles import held_for_cycles, scaled, tunable_text

# Behaviour -> the path its requests go to when a scenario names none, as the engine says.
BEHAVIOURS = behaviour_paths(FACTS)
# Attacks that write HTTP/2 frames of their own: on the server's HTTP/2 port (transport h2
# or h2c), with no HTTP/2 setting in the engine's plan.
OWN_H2_FRAMES = own_h2_frame_behaviours(FACTS)
# key -> (accepted python types, may be a matrix list); the behaviours' and pacers' own keys
# are the engine's (added below), each of them a matrix dimension.
SCENARIO_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": ((str,), False),
    "description": ((str,), False),
    "behaviour": ((str,), True),
    "pacer": ((str,), True),
    "path": ((str,), True),
    "clients": ((int,), True),
    "requests": ((int,), True),
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
    GROUP_KEY: ((list,), False),
}
SCENARIO_FIELDS.update({key: (types, True) for key, types in behaviour_suite_keys(FACTS).items()})
SCENARIO_FIELDS.update({key: (types, True) for key, types in pacer_suite_keys(FACTS).items()})
CAPACITY_KEYS = ("start_rate", "max_rate", "step_s", "start_clients", "max_clients", "p99_bound_ms")
# A request search offers one request (or gRPC unary call) and its answer per arrival, as
# the engine says.
CAPACITY_BEHAVIOURS = rate_searchable_behaviours(FACTS)
# The pacer each search steps, as the engine says: an offered rate (requests), or clients
# ramped and held (push).
REQUEST_SEARCH_PACER = search_pacers(FACTS)[RATE_LEVEL]
PUSH_SEARCH_PACER = search_pacers(FACTS)[CLIENTS_LEVEL]
# Per use of the search: the keys it needs, and those its steps set themselves (the suite
# cannot give them).
CAPACITY_REQUIRED = ("start_rate", "max_rate", "p99_bound_ms")
CAPACITY_SETS = ("rate", "rate_end", "requests", "duration_s", "ramp_up_s", "priming_runs")
PUSH_CAPACITY_REQUIRED = ("start_clients", "max_clients", "p99_bound_ms", "emit_interval_ms")
PUSH_CAPACITY_SETS = ("clients", "priming_runs")
# Keys of one use of the search only.
REQUEST_SEARCH_KEYS = ("start_rate", "max_rate", "step_s")
PUSH_SEARCH_KEYS = ("start_clients", "max_clients")
# A scenario's keys that are not matrix dimensions.
NOT_DIMENSIONS = ("name", "description", "contestants", "tunables", "repeats", GROUP_KEY)
TLS_CHOICES = {"tls_key": KEY_TYPES, "tls_resume": ("on", "off"), "tls_group": ("x25519", "p256")}


class ScenarioMatrix:
    """The n-th [[scenario]] of a suite: its keys and values checked, its lists and tunables
    expanded, each point scaled by the profile and held to the combination rules."""

    def __init__(self, path: Path, lines: Lines, index: int, known: set[str] | None, suite: Suite):
        self.path, self.lines, self.index, self.known = path, lines, index, known
        self.suite = suite

    def fail(self, key: str, reason: str) -> SuiteError:
        return SuiteError(self.path, self.lines.of(key, self.index), reason)

    def expand(self, scenario: dict, default_contestants: list):
        """Yields (permutation, its parameters as written, before any scaling)."""
        check_keys(self.path, self.lines, scenario, SCENARIO_FIELDS, self.index, "scenario")
        if "name" not in scenario:
            raise self.fail("[[scenario]]", "a scenario needs a name")
        if "behaviour" not in scenario:
            raise self.fail("name", f"scenario {scenario['name']!r} needs a behaviour")
        groups = self._groups(scenario)
        dims: dict[str, list] = {}
        for key, value in scenario.items():
            if key in NOT_DIMENSIONS:
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
                params = scaled(written, self.suite.scale, self.suite.count_scale)
                params = held_for_cycles(params, self.suite.cycles)
                if groups:
                    params[GROUP_KEY] = scaled_groups(groups, self.suite.scale)
                self._check_combination(params)
                params = with_tls_defaults(params)
                if self._cannot_run(scenario["name"], contestant, params):
                    continue
                for tuned in self._tuned(tunables, contestant):
                    yield Permutation(scenario["name"], contestant, params, tuned), written

    def count(self, scenario: Any, default_contestants: list) -> int:
        """How many permutations `expand` would make, without making them."""
        if not isinstance(scenario, dict):
            return 1
        dims = [
            len(v) if isinstance(v, list) else 1
            for k, v in scenario.items()
            if k not in NOT_DIMENSIONS
        ]
        contestants = scenario.get("contestants", default_contestants)
        tunables = scenario.get("tunables", {})
        total = 0
        for contestant in contestants if isinstance(contestants, list) else []:
            star = tunables.get("*", {}) if isinstance(tunables, dict) else {}
            own = tunables.get(contestant, {}) if isinstance(tunables, dict) else {}
            for table in _sets(own):
                if not isinstance(table, dict):
                    continue  # expand refuses it, with its line
                merged = {**(star if isinstance(star, dict) else {}), **table}
                sizes = [len(v) if isinstance(v, list) else 1 for v in merged.values()]
                total += math.prod(dims) * math.prod(sizes)
        return total

    def _groups(self, scenario: dict) -> list[dict[str, Any]]:
        """The scenario's client groups, checked; none for a scenario of one group."""
        if GROUP_KEY not in scenario:
            return []
        tables = GroupTables(self.path, self.lines, self.index, scenario["name"])
        groups = tables.checked(scenario[GROUP_KEY])
        if scenario.get("kind", TEST_KIND) != TEST_KIND:
            raise self.fail(
                "kind",
                f"scenario {scenario['name']!r}: a capacity search steps one load, no groups",
            )
        return groups

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

    def _tuned(self, tunables: Any, contestant: str):
        """The contestant's tunable points: the product of its table's lists, or, when its
        scope is a list of tables (`[{}, { header_timeout_s = 5 }]`: as shipped, hardened),
        each table one set of its own, every set's lists a product of their own."""
        if not isinstance(tunables, dict):
            raise self.fail("tunables", "tunables must be a table of contestant tables")
        star, own = tunables.get("*", {}), tunables.get(contestant, {})
        if not isinstance(star, dict):
            raise self.fail("tunables", 'tunables."*" must be a table')
        if not _sets(own) or not all(isinstance(table, dict) for table in _sets(own)):
            raise self.fail(
                "tunables", f"tunables.{contestant} must be a table or a list of tables"
            )
        for table in _sets(own):
            yield from _product(self._tunable_dims({**star, **table}, contestant))

    def _tunable_dims(self, merged: dict[str, Any], contestant: str) -> dict[str, list]:
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
        if p.get("pacer", REQUEST_SEARCH_PACER) != REQUEST_SEARCH_PACER:
            pacer = REQUEST_SEARCH_PACER
            raise self.fail(
                "pacer", f'a capacity search steps the {pacer} pacer: pacer = "{pacer}"'
            )
        self._only_in_the_other_search(p, PUSH_SEARCH_KEYS, "a push capacity search")
        self._check_search_keys(p, CAPACITY_REQUIRED, CAPACITY_SETS)
        if not p.get("warmup_s"):
            raise self.fail("kind", "a capacity search measures a warmed server: give warmup_s")
        if p["max_rate"] < p["start_rate"]:
            raise self.fail("max_rate", f"max_rate {p['max_rate']:g} is below start_rate")

    def _check_push_capacity(self, p: dict) -> None:
        """A push search: steps of the users pacer, each ramping and holding its subscribers
        (ramp_up_s, duration_s) while the emitters run."""
        if p.get("pacer") != PUSH_SEARCH_PACER:
            pacer = PUSH_SEARCH_PACER
            raise self.fail(
                "pacer" if "pacer" in p else "behaviour",
                f'a push capacity search ramps and holds its clients: pacer = "{pacer}"',
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


def _sets(scope: Any) -> list:
    """A contestant's tunables scope as its sets: a list of tables is one set per table."""
    return scope if isinstance(scope, list) else [scope]


def _product(dims: dict[str, list]):
    keys = list(dims)
    for combo in itertools.product(*(dims[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))
