"""Runtime signals: the side file a server's runtime wrote (`{signals_file}`), read after the
test, never through `/stats` (a thread-starved server cannot answer it).

Two forms are read, line by line:

- JSON lines, one object per sample or event: `{"t": Unix seconds, "kind": word, "value":
  number, ...}`; node-http, go-nethttp and ruby-eventmachine write these;
- the JVM's unified GC log (`-Xlog:gc*:file=...:utctime,uptime,level,tags`): each pause's
  line gives its duration and the heap before, after and committed; the log's other lines
  (phases, start lines) are read and passed over.

A line that is neither counts as unreadable: the test then carries `signals_unreadable`,
a flag on the signal figures only. A side file never makes a test fail, whatever it holds:
every line is parsed under caps (its length, how many objects and arrays it nests, how
many fields it has, how long a kept value is), any error a line raises makes it unreadable,
and a test keeps at most `row_cap` of its lines, evenly spread over the file, so that a
runaway writer cannot fill memory, the database or the report.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from serverlab.results.records import RuntimeSignal

# A server writes a few lines per 100 ms; more than this is a runaway writer, not a test.
MAX_BYTES = 64 << 20
# Rows kept per test: a base for short tests, then per second of the test (a server with a
# few workers writes some tens a second), never more than the ceiling. Past the cap every
# n-th line is read, so that the rows still cover the whole test.
ROWS_BASE, ROWS_PER_S, ROWS_CEILING = 2_000, 100, 200_000
# A sample is a flat object of some figures, about 100 bytes.
MAX_LINE = 4096  # bytes; a longer line is unreadable
MAX_CONTAINERS = 8  # objects and arrays in one line: a bound on its depth before parsing
MAX_FIELDS = 16  # kept fields besides t, kind and value
MAX_VALUE = 80  # characters of a kept string value; a longer one is cut and counted
CHUNK = 1 << 20
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
    lines: int = 0  # lines in the file (its first MAX_BYTES)
    stride: int = 1  # every stride-th line was read
    row_cap: int = ROWS_BASE
    values_cut: int = 0

    def problem(self) -> str | None:
        """The `signals_unreadable` flag's text, or None when every line was read whole."""
        parts = []
        if self.unreadable:
            parts.append(f"{self.unreadable} lines unreadable, first {self.first_unreadable!r}")
        if self.truncated:
            parts.append(f"side file over {MAX_BYTES >> 20} MiB, read only that far")
        if self.stride > 1:
            parts.append(
                f"{self.lines:,} lines, over the cap of {self.row_cap:,} rows for this test: "
                f"every {self.stride}th line read"
            )
        if self.values_cut:
            parts.append(f"{self.values_cut} values over {MAX_VALUE} characters, cut")
        return "; ".join(parts) or None

    def unread(self, line: str) -> None:
        self.unreadable += 1
        self.first_unreadable = self.first_unreadable or line[:80]


def row_cap(lasted_s: float) -> int:
    """How many rows a test that lasted `lasted_s` seconds keeps at most."""
    return min(ROWS_CEILING, ROWS_BASE + int(ROWS_PER_S * max(0.0, lasted_s)))


def read_signals(path: Path, started_at: float, lasted_s: float = 0.0) -> SignalsRead:
    """The side file's signals, `t` made seconds since `started_at` (Unix seconds), at most
    `row_cap(lasted_s)` of them; an absent file is no signals (a contestant that does not
    use `{signals_file}`)."""
    read = SignalsRead(row_cap=row_cap(lasted_s))
    try:
        with open(path, "rb") as handle:
            read.lines, read.truncated = _count_lines(handle)
            read.stride = max(1, -(-read.lines // read.row_cap))
            handle.seek(0)
            for index, line in enumerate(_lines(handle)):
                if index % read.stride == 0:
                    _take(read, line, started_at)
    except OSError:
        return read
    read.signals.sort(key=lambda s: s.t)
    return read


def _count_lines(handle: BinaryIO) -> tuple[int, bool]:
    """Lines in the file's first MAX_BYTES (a last one without its newline counts), and
    whether the file goes on beyond."""
    lines, left, last = 0, MAX_BYTES, b"\n"
    while left > 0 and (chunk := handle.read(min(CHUNK, left))):
        lines += chunk.count(b"\n")
        left -= len(chunk)
        last = chunk[-1:]
    return lines + (last != b"\n"), left == 0 and handle.read(1) != b""


def _lines(handle: BinaryIO) -> Iterator[bytes]:
    """The file's lines in its first MAX_BYTES, each at most MAX_LINE + 1 bytes (the rest
    of a longer line is skipped, never held)."""
    left = MAX_BYTES
    while left > 0:
        line = handle.readline(min(MAX_LINE + 1, left))
        if not line:
            return
        left -= len(line)
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            while left > 0 and (rest := handle.readline(min(CHUNK, left))):
                left -= len(rest)
                if rest.endswith(b"\n"):
                    break
        yield line


def _take(read: SignalsRead, raw: bytes, started_at: float) -> None:
    line = raw[: MAX_LINE + 1].decode("utf-8", errors="replace").strip()
    if not line:
        return
    if len(raw) > MAX_LINE:
        read.unread(line)
        return
    try:
        signal = _parse(line, started_at)
    # Whatever a line does to the parser (a RecursionError, a date that does not exist,
    # an integer too long to convert), it is one unreadable line, never a failed test.
    except Exception:  # noqa: BLE001
        signal = None
    if signal is _IGNORED:
        return
    if signal is None:
        read.unread(line)
        return
    read.values_cut += _cut_values(signal.data)
    read.signals.append(signal)


def _cut_values(data: dict) -> int:
    """Cuts the string values longer than MAX_VALUE to that length; returns how many."""
    long = [k for k, v in data.items() if isinstance(v, str) and len(v) > MAX_VALUE]
    for key in long:
        data[key] = data[key][: MAX_VALUE - 1] + "…"
    return len(long)


_IGNORED = RuntimeSignal(0.0, "ignored", 0.0)


def _parse(line: str, started_at: float) -> RuntimeSignal | None:
    if line.startswith("{"):
        return _json_line(line, started_at)
    if JVM_PREFIX.match(line):
        return _jvm_line(line, started_at)
    return None


def _json_line(line: str, started_at: float) -> RuntimeSignal | None:
    # Every nesting level opens an object or an array: their count bounds the depth, so a
    # deep line is refused before the parser recurses into it.
    if line.count("{") + line.count("[") > MAX_CONTAINERS:
        return None
    obj = json.loads(line)
    if not isinstance(obj, dict):
        return None
    t, kind, value = obj.pop("t", None), obj.pop("kind", None), obj.pop("value", None)
    if not (_finite(t) and _finite(value) and isinstance(kind, str) and KIND.fullmatch(kind)):
        return None
    # Only flat figures are kept: a line is a sample, not a document.
    data = {k: v for k, v in obj.items() if isinstance(v, int | float | str) and len(k) <= 32}
    if len(data) > MAX_FIELDS:
        return None
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
