"""Suite stage: a suite file as read. Its TOML (`read`), where each key stands in it
(`Lines`), the error that names the file, the line and the reason (`SuiteError`), the
checks of one value at its line, and the `Suite` the file loads into.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serverlab.base import tomltext
from serverlab.base.paramtext import GROUPS_PARAM
from serverlab.run.plan.suite.permutation import Permutation

# The profile of a run that chooses none: the suite as written.
FULL_PROFILE = "full"
# A scenario's client groups: `[[scenario.groups]]` tables (serverlab.run.plan.suite.groups),
# kept in the test's parameters under the same key.
GROUP_KEY = GROUPS_PARAM
GROUP_HEADER = "[[scenario.groups]]"


class SuiteError(ValueError):
    """A suite file that cannot be run, with the place and the reason."""

    def __init__(self, path: Path, line: int | None, reason: str):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {reason}")
        self.path, self.line, self.reason = path, line, reason


@dataclass
class Suite:
    """A suite as loaded: its settings, its permutations, and where each scenario stands."""

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
    lines: Lines | None = field(default=None, repr=False)
    scenario_index: dict[str, int] = field(default_factory=dict, repr=False)

    def error(self, scenario: str, key: str, reason: str) -> SuiteError:
        """A SuiteError at the line of `key` in the named scenario."""
        index = self.scenario_index.get(scenario)
        line = self.lines.of(key, index) if self.lines and index is not None else None
        return SuiteError(self.path, line, f"scenario {scenario!r}: {reason}")

    def group_error(self, scenario: str, group: str | None, key: str, reason: str) -> SuiteError:
        """A SuiteError at the line of `key` in the named group of the named scenario."""
        index = self.scenario_index.get(scenario)
        line = self.lines.of_group(index, group, key) if self.lines and index is not None else None
        named = f", group {group!r}" if group else ""
        return SuiteError(self.path, line, f"scenario {scenario!r}{named}: {reason}")

    def tests(self) -> list[tuple[Permutation, int]]:
        """Every (permutation, repeat index) in run order: repeats interleaved, so that a
        slow drift of the machine spreads over all contestants rather than one."""
        return [(p, r) for r in range(self.repeats) for p in self.permutations]

    def estimated_seconds(self) -> float:
        return sum(p.estimated_seconds() for p, _ in self.tests())


class Lines:
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

    def of_group(self, index: int, name: str | None, key: str = "name") -> int | None:
        """The line of `key` in the group called `name` of the index-th scenario (its
        header when the group does not set `key`), else the scenario's `groups`."""
        lo, hi = self._span(index)
        headers = [i for i in range(lo, hi) if self.lines[i].strip() == GROUP_HEADER]
        for n, start in enumerate(headers):
            body = self.lines[start : headers[n + 1] if n + 1 < len(headers) else hi]
            if name is not None and any(_sets(line, "name", f'"{name}"') for line in body):
                found = next((start + j for j, line in enumerate(body) if _sets(line, key)), start)
                return found + 1
        return headers[0] + 1 if headers else self.of(GROUP_KEY, index)

    def _span(self, index: int) -> tuple[int, int]:
        if index >= len(self.starts):
            return 0, len(self.lines)
        nxt = self.starts[index + 1 : index + 2]
        return self.starts[index], nxt[0] if nxt else len(self.lines)

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


def _sets(line: str, key: str, value: str = "") -> bool:
    return re.match(rf"\s*{re.escape(key)}\s*=\s*{re.escape(value)}", line) is not None


def read(path: Path) -> tuple[bytes, dict, Lines]:
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
    return raw, doc, Lines(text)


def _toml_error_line(message: str) -> int | None:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else None


def check_keys(path, lines, table, allowed, index, what):
    for key in table:
        if key not in allowed:
            hint = ", ".join(sorted(allowed))
            raise SuiteError(path, lines.of(key, index), f"unknown {what} key {key!r} ({hint})")


def value_of(path, lines, table, key, typ, index, default=None):
    if key not in table:
        return default
    value = table[key]
    if not isinstance(value, typ) or isinstance(value, bool):
        raise SuiteError(path, lines.of(key, index), f"{key} must be {typ.__name__}")
    return value


def number(path, lines, header, table, key, minimum: float, kind=(int, float), maximum=None):
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


def unknown_keys(path, lines, header, table, allowed) -> None:
    for key in table:
        if key not in allowed:
            hint = ", ".join(sorted(allowed))
            raise SuiteError(path, lines.in_table(header, key), f"unknown key {key!r} ({hint})")
