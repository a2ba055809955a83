"""The record model of the results stage: what a run measured, as plain data, apart from how the
store keeps it (serverlab.results.store, SQLite) and from the report that reads it.

- ``StoredSuite``: a suite file as run (name, path, SHA-256 of its bytes, duration scale).
- ``Run``: one ``serverlab run`` invocation: start, end, status, machine metadata.
- ``RecordedTest``: one permutation x repeat with everything measured during it: engine
  summary and intervals (``EngineInterval``), monitor samples (``MonitorSample``),
  histograms, ``GET /stats`` snapshots (``ServerStats``), emit records (``EmitRecord``) and
  cycles (``EmitCycle``), runtime signals (``RuntimeSignal``: GC pauses, event-loop delay:
  the side file the server wrote), validity flags and crash details (``Crash``).

The executor fills them, the store writes and reads them, the report reads them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any

from serverlab.base.engine_schema import LineField, line_fields

RUN_STATUSES = ("running", "finished", "interrupted", "failed", "abandoned")
# A test in hand when a run stops leaves no row at all; --resume runs it again.
TEST_STATUSES = ("ok", "crashed", "invalid")
# The engine's latency histogram's name in ``RecordedTest.histograms``.
DEFAULT_HISTOGRAM = "latency_us"


def make_test_key(permutation_key: str, repeat_index: int) -> str:
    """The identity of a test within a suite, as ``finished_test_keys`` returns it."""
    return f"{permutation_key}#r{repeat_index}"


@dataclass
class StoredSuite:
    """A suite file as it was run; (name, sha256, scale) identifies it for --resume."""

    name: str
    path: str
    sha256: str
    scale: float = 1.0
    id: int | None = None
    created_at: float | None = None

    @classmethod
    def from_file(
        cls, path: str | Path, scale: float = 1.0, name: str | None = None
    ) -> StoredSuite:
        path = Path(path)
        return cls(
            name=name or path.stem,
            path=str(path),
            sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            scale=scale,
        )


@dataclass
class Run:
    """One ``serverlab run``; ``machine`` is free-form JSON (kernel, CPU, versions, sysctls...)."""

    id: int
    suite_id: int
    started_at: float
    status: str
    machine: dict[str, Any]
    ended_at: float | None = None
    pid: int | None = None
    pid_start: int | None = None
    host: str | None = None
    # What makes runs comparable (hardware, kernel) and, kept apart, the software they ran.
    fingerprint: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint_id(self) -> str:
        """A short stable name of the fingerprint ('' for a run recorded before them)."""
        if not self.fingerprint:
            return ""
        text = json.dumps(self.fingerprint, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass
class Crash:
    """How a server died during a test. ``time`` is seconds since the test started."""

    time: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    oom: bool = False


@dataclass
class MonitorSample:
    """One monitor sample, field for field ``serverlab.run.execution.monitor.Sample`` (so
    ``MonitorSample(**sample.as_dict())`` converts). ``t`` is seconds since the monitor
    started; server figures cover its whole process tree; CPU percentages are 100 per busy
    core, except ``system_cpu_percent`` (100 = every core busy)."""

    t: float
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    threads: int | None = None
    fds: int | None = None
    ctx_switches: int | None = None
    processes: int | None = None
    system_cpu_percent: float | None = None
    system_mem_used_bytes: int | None = None
    engine_cpu_percent: float | None = None


@dataclass
class EngineInterval:
    """One ``{"type": "interval", ...}`` line of the engine, kept whole in ``data``."""

    seq: int
    t: float
    data: dict[str, Any]


@dataclass
class ServerStats:
    """A ``GET /stats`` answer; ``phase`` says when it was read (e.g. "start", "end")."""

    t: float
    stats: dict[str, Any]
    phase: str = "end"


@dataclass
class EmitRecord:
    """One delivery of an emit cycle as the client saw it (seed 004 §3.4.1.2)."""

    event: str
    seq: int
    place: int
    total: int
    duration_ms: float
    created_ms: int | None = None
    sent_ms: int | None = None
    # Deliveries of this cycle the client received; rows are a sample of them.
    received: int | None = None


# What of an emit line is not the cycle's record: the line's tag, its sampled places (each an
# EmitRecord row with its duration) and the span of those durations, which the rows hold.
NOT_IN_A_CYCLE = frozenset({"type", "places", "duration_ms"})


def _cycle_field(line_field: LineField) -> tuple[str, Any, Any]:
    """A field of the cycle's record as the emit line has it (a value the engine may print
    as null is None unless given)."""
    metadata = {"description": line_field.description}
    if line_field.nullable:
        return line_field.name, line_field.type | None, field(default=None, metadata=metadata)
    return line_field.name, line_field.type, field(metadata=metadata)


# One emit cycle as the clients measured it: the fields of the engine's emit line (its output
# schema's EmitLine), each with its schema type and description, made from that schema so
# that no Python copy of them goes stale. Fields are given by name. The store keeps one
# column per field (migration 0009); a field the engine adds needs a migration that adds it.
EmitCycle = make_dataclass(
    "EmitCycle",
    [_cycle_field(f) for f in line_fields("EmitLine", NOT_IN_A_CYCLE)],
    kw_only=True,
    namespace={
        "__module__": __name__,
        "__doc__": "One emit cycle as the clients measured it: the engine's emit line but "
        "for NOT_IN_A_CYCLE; a field's meaning is its `metadata['description']`, the schema's.",
    },
)


def emit_cycle(line: dict[str, Any]) -> EmitCycle:
    """The record of one engine emit line (its places go to EmitRecord rows)."""
    return EmitCycle(**{f.name: line[f.name] for f in fields(EmitCycle) if f.name in line})


@dataclass
class RuntimeSignal:
    """One line of the server runtime's side file (serverlab.run.execution.signals): ``t`` is
    seconds since the test started, ``kind`` e.g. "gc_pause" (ms), "loop_delay" (ms),
    "heap_used" (bytes); ``data`` the line's other figures."""

    t: float
    kind: str
    value: float
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RecordedTest:
    """One permutation x repeat. Times are Unix seconds; ``summary`` is the engine's summary
    line (None when it never produced one, e.g. a crash), ``histograms`` maps a name to an
    HdrHistogram V2 deflate base64 string, ``validity`` maps a flag name to its detail."""

    run_id: int
    permutation_key: str
    contestant: str
    repeat_index: int
    status: str
    started_at: float
    ended_at: float
    scenario: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    tunables: dict[str, str] = field(default_factory=dict)
    crash: Crash | None = None
    validity: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    intervals: list[EngineInterval] = field(default_factory=list)
    samples: list[MonitorSample] = field(default_factory=list)
    histograms: dict[str, str] = field(default_factory=dict)
    server_stats: list[ServerStats] = field(default_factory=list)
    emits: list[EmitRecord] = field(default_factory=list)
    # Per-cycle records (version 3 engines); older tests have none.
    cycles: list[EmitCycle] = field(default_factory=list)
    signals: list[RuntimeSignal] = field(default_factory=list)
    # The test plan it ran from (serverlab.run.execution.testplan, as JSON data), and what the
    # executor bound and saw at run time: stored beside what identifies the test.
    plan: dict[str, Any] | None = None
    run_info: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    # The re-run that replaced this test in the figures (`serverlab run --rerun-busy`).
    superseded_by: int | None = None

    @property
    def key(self) -> str:
        return make_test_key(self.permutation_key, self.repeat_index)
