"""Suites: scenarios as data (`suites/*.toml`), expanded into permutations.

Any scalar field of a scenario may be given as a list; each list is a matrix dimension and
the scenario expands into the cartesian product. Tunables are matrix dimensions too. Errors
name the file, the line and the reason, so a suite is fixed in one go rather than by trial.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BEHAVIOURS = {
    "keepalive": "/perf",
    "new-connection": "/perf",
    "longpoll": "/push",
    "comet": "/push",
    "slow-upload": "/upload",
    "slow-reader": "/files",
    "syslog": None,
}
PACERS = ("closed", "sequential", "open", "users")
PUSH_BEHAVIOURS = ("longpoll", "comet")

SUITE_KEYS = {"name", "description", "repeats", "contestants", "scenario", "needs"}
# key -> (accepted python types, may be a matrix list)
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
    "emit_interval_ms": ((int,), True),
    "longpoll_duration_ms": ((int,), True),
    "comet_duration_ms": ((int,), True),
    "upload_bytes": ((int,), True),
    "upload_rate_bps": ((int,), True),
    "read_rate_bps": ((int,), True),
    "syslog_messages": ((int,), True),
    "syslog_transport": ((str,), True),
    "syslog_framing": ((str,), True),
    "files": ((str,), True),
    "repeats": ((int,), False),
    "contestants": ((list,), False),
    "tunables": ((dict,), False),
}
DURATION_FIELDS = ("duration_s", "ramp_up_s", "warmup_s")
# Fixed per-test cost of starting, verifying and stopping a server: only for the estimate.
SETUP_ESTIMATE_S = 6.0


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
        spans = ("warmup_s", "ramp_up_s", "duration_s")
        return SETUP_ESTIMATE_S + sum(float(p.get(k, 0)) for k in spans)


@dataclass
class Suite:
    name: str
    path: Path
    sha256: str
    scale: float
    repeats: int
    description: str = ""
    needs: dict[str, Any] = field(default_factory=dict)
    permutations: list[Permutation] = field(default_factory=list)

    def tests(self) -> list[tuple[Permutation, int]]:
        """Every (permutation, repeat index) in run order: repeats interleaved, so that a
        slow drift of the machine spreads over all contestants rather than one."""
        return [(p, r) for r in range(self.repeats) for p in self.permutations]

    def estimated_seconds(self) -> float:
        return sum(p.estimated_seconds() for p, _ in self.tests())


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
        pattern = re.compile(rf"^\s*(\[[^\]]*\b)?{re.escape(key)}\b")
        for i in range(lo, hi):
            if pattern.search(self.lines[i]):
                return i + 1
        return lo + 1 if scenario_index is not None else None


def load_suite(
    path: Path | str,
    scale: float = 1.0,
    known_contestants: set[str] | None = None,
    only: list[str] | None = None,
) -> Suite:
    """Parses, validates and expands a suite file. `only` narrows it to some contestants."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SuiteError(path, None, f"cannot read: {err.strerror}") from err
    text = raw.decode("utf-8", errors="replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        line = getattr(err, "lineno", None) or _toml_error_line(str(err))
        raise SuiteError(path, line, f"not valid TOML: {err}") from err
    if scale <= 0:
        raise SuiteError(path, None, f"--scale must be positive, got {scale}")
    lines = _Lines(text)
    _check_keys(path, lines, doc, SUITE_KEYS, None, "suite")
    name = _get(path, lines, doc, "name", str, None, default=path.stem)
    repeats = _get(path, lines, doc, "repeats", int, None, default=1)
    if repeats < 1:
        raise SuiteError(path, lines.of("repeats"), "repeats must be at least 1")
    default_contestants = _get(path, lines, doc, "contestants", list, None, default=[])
    scenarios = doc.get("scenario")
    if not isinstance(scenarios, list) or not scenarios:
        raise SuiteError(path, None, "a suite needs at least one [[scenario]] table")
    suite = Suite(
        name=name,
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        scale=scale,
        repeats=repeats,
        description=doc.get("description", ""),
        needs=doc.get("needs", {}),
    )
    seen: set[str] = set()
    for index, scenario in enumerate(scenarios):
        ctx = _ScenarioContext(path, lines, index, known_contestants)
        for perm in ctx.expand(scenario, default_contestants, scale):
            if only and perm.contestant not in only:
                continue
            if perm.key in seen:
                raise SuiteError(path, lines.of("name", index), f"duplicate test {perm.key}")
            seen.add(perm.key)
            suite.permutations.append(perm)
    if only:
        unknown = sorted(set(only) - {p.contestant for p in suite.permutations})
        if unknown:
            raise SuiteError(path, None, f"--contestants names no test of this suite: {unknown}")
    return suite


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
    def __init__(self, path: Path, lines: _Lines, index: int, known: set[str] | None):
        self.path, self.lines, self.index, self.known = path, lines, index, known

    def fail(self, key: str, reason: str) -> SuiteError:
        return SuiteError(self.path, self.lines.of(key, self.index), reason)

    def expand(self, scenario: dict, default_contestants: list, scale: float):
        _check_keys(self.path, self.lines, scenario, SCENARIO_FIELDS, self.index, "scenario")
        if "name" not in scenario:
            raise self.fail("[[scenario]]", "a scenario needs a name")
        if "behaviour" not in scenario:
            raise self.fail("name", f"scenario {scenario['name']!r} needs a behaviour")
        dims: dict[str, list] = {}
        for key, value in scenario.items():
            if key in ("name", "description", "contestants", "tunables", "repeats"):
                continue
            dims[key] = self._dimension(key, value)
        contestants = scenario.get("contestants", default_contestants)
        if not contestants or not all(isinstance(c, str) for c in contestants):
            raise self.fail("contestants", "a scenario needs a list of contestant names")
        for contestant in contestants:
            if self.known is not None and contestant not in self.known:
                known = ", ".join(sorted(self.known))
                raise self.fail("contestants", f"unknown contestant {contestant!r} ({known})")
        tunables = scenario.get("tunables", {})
        for contestant in contestants:
            for params in _product(dims):
                params = _scaled(params, scale)
                self._check_combination(params)
                for tuned in _product(self._tunable_dims(tunables, contestant)):
                    yield Permutation(scenario["name"], contestant, params, tuned)

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
        return values

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
            dims[key] = [str(v).lower() if isinstance(v, bool) else str(v) for v in values]
        return dims

    def _check_combination(self, p: dict) -> None:
        behaviour, pacer = p["behaviour"], p.get("pacer", "closed")
        if behaviour not in BEHAVIOURS:
            raise self.fail(
                "behaviour", f"unknown behaviour {behaviour!r} ({', '.join(BEHAVIOURS)})"
            )
        if pacer not in PACERS:
            raise self.fail("pacer", f"unknown pacer {pacer!r} ({', '.join(PACERS)})")
        if "duration_s" not in p and "requests" not in p and behaviour != "syslog":
            raise self.fail("name", "a scenario needs duration_s or requests")
        if pacer == "open" and "rate" not in p:
            raise self.fail("pacer", "the open pacer needs a rate")
        if pacer != "open" and ("rate" in p or "rate_end" in p):
            raise self.fail("rate", f"rate only applies to the open pacer, not {pacer!r}")
        if pacer == "sequential" and p.get("clients", 1) != 1:
            raise self.fail("clients", "the sequential pacer runs one connection at a time")
        if behaviour == "longpoll" and "longpoll_duration_ms" not in p:
            raise self.fail("behaviour", "a longpoll scenario needs longpoll_duration_ms")
        if behaviour not in PUSH_BEHAVIOURS:
            for key in ("emit_interval_ms", "longpoll_duration_ms", "comet_duration_ms"):
                if key in p:
                    raise self.fail(key, f"{key} only applies to longpoll and comet")
        if behaviour == "slow-upload" and "upload_bytes" not in p:
            raise self.fail("behaviour", "a slow-upload scenario needs upload_bytes")
        if behaviour == "syslog" and "syslog_messages" not in p and "duration_s" not in p:
            raise self.fail("behaviour", "a syslog scenario needs syslog_messages or duration_s")
        for key in ("clients", "requests", "rate", "duration_s", "emit_interval_ms"):
            if key in p and p[key] < 0:
                raise self.fail(key, f"{key} cannot be negative")


def _product(dims: dict[str, list]):
    keys = list(dims)
    for combo in itertools.product(*(dims[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def _scaled(params: dict, scale: float) -> dict:
    out = dict(params)
    for key in DURATION_FIELDS:
        if key in out:
            out[key] = round(out[key] * scale, 3)
    return out
