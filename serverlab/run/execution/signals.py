"""Runtime signals: the side file a server's runtime wrote (`{signals_file}`), read after the
test, never through `/stats` (a thread-starved server cannot answer it).

Two forms are read, line by line:

- JSON lines, one object per sample or event: `{"t": Unix seconds, "kind": word, "value":
  number, ...}`; node-http, go-nethttp and ruby-eventmachine write these;
- the JVM's unified GC log (`-Xlog:gc*:file=...:utctime,uptime,level,tags`): each pause's
  line gives its duration and the heap before, after and committed; the log's other lines
  (phases, start lines) are read and passed over.

A line that is neither counts as unreadable: the test then carries `signals_unreadable`,
a flag on the signal figures only. A side file never makes a test fail.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from serverlab.results.store import RuntimeSignal

# A server writes a few lines per 100 ms; more than this is a runaway writer, not a test.
MAX_BYTES = 64 << 20
KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
JVM_PREFIX = re.compile(r"^(\[[^\]]*\])+\s")
JVM_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d{4})\]")
JVM_PAUSE = re.compile(
    r"GC\((?P<gc>\d+)\) (?P<what>Pause .*?) (?P<before>\d+)(?P<bu>[KMG])->(?P<after>\d+)"
    r"(?P<au>[KMG])\((?P<total>\d+)(?P<tu>[KMG])\) (?P<ms>\d+(?:\.\d+)?)ms\s*$"
)
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass
class SignalsRead:
    signals: list[RuntimeSignal] = field(default_factory=list)
    unreadable: int = 0
    first_unreadable: str | None = None
    truncated: bool = False

    def problem(self) -> str | None:
        """The `signals_unreadable` flag's text, or None when every line was read."""
        if not self.unreadable and not self.truncated:
            return None
        parts = []
        if self.unreadable:
            parts.append(f"{self.unreadable} lines unreadable, first {self.first_unreadable!r}")
        if self.truncated:
            parts.append(f"side file over {MAX_BYTES >> 20} MiB, read only that far")
        return "; ".join(parts)


def read_signals(path: Path, started_at: float) -> SignalsRead:
    """The side file's signals, `t` made seconds since `started_at` (Unix seconds); an
    absent file is no signals (a contestant that does not use `{signals_file}`)."""
    read = SignalsRead()
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return read
    read.truncated = len(data) > MAX_BYTES
    for raw in data[:MAX_BYTES].decode("utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line:
            continue
        signal = _parse(line, started_at)
        if signal is _IGNORED:
            continue
        if signal is None:
            read.unreadable += 1
            read.first_unreadable = read.first_unreadable or line[:80]
        else:
            read.signals.append(signal)
    read.signals.sort(key=lambda s: s.t)
    return read


_IGNORED = RuntimeSignal(0.0, "ignored", 0.0)


def _parse(line: str, started_at: float) -> RuntimeSignal | None:
    if line.startswith("{"):
        return _json_line(line, started_at)
    if JVM_PREFIX.match(line):
        return _jvm_line(line, started_at)
    return None


def _json_line(line: str, started_at: float) -> RuntimeSignal | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    t, kind, value = obj.pop("t", None), obj.pop("kind", None), obj.pop("value", None)
    if not (_finite(t) and _finite(value) and isinstance(kind, str) and KIND.fullmatch(kind)):
        return None
    # Only flat figures are kept: a line is a sample, not a document.
    data = {k: v for k, v in obj.items() if isinstance(v, int | float | str) and len(k) <= 32}
    return RuntimeSignal(round(t - started_at, 4), kind, float(value), data)


def _jvm_line(line: str, started_at: float) -> RuntimeSignal:
    """A pause line as a `gc_pause` signal; any other line of the log is passed over."""
    pause, when = JVM_PAUSE.search(line), JVM_TIME.match(line)
    if not pause or not when:
        return _IGNORED
    at = datetime.strptime(when.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    data = {
        "gc": pause["what"],
        "heap_before": int(pause["before"]) * UNITS[pause["bu"]],
        "heap_after": int(pause["after"]) * UNITS[pause["au"]],
        "heap_committed": int(pause["total"]) * UNITS[pause["tu"]],
    }
    # The log stamps a pause's end; the chart wants its start.
    ms = float(pause["ms"])
    return RuntimeSignal(round(at - ms / 1000 - started_at, 4), "gc_pause", ms, data)


def _finite(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
