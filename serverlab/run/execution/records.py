"""What one engine load produced, put on a test as the store keeps it: the engine's summary,
its interval lines, its latency histogram and its emit cycles (one row per sampled place,
and the clients' per-cycle record). The executor fills the recorded test with it; a push
capacity search reads each step through the same shape (serverlab.run.execution.capacity).
"""

from __future__ import annotations

from serverlab.results.records import (
    DEFAULT_HISTOGRAM,
    EmitRecord,
    EngineInterval,
    RecordedTest,
    emit_cycle,
)
from serverlab.run.execution.traffic import LoadResult


def put_load(test: RecordedTest, result: LoadResult) -> None:
    """The load's summary, interval lines, histogram and emit cycles on the test."""
    test.summary = result.summary
    test.intervals = [
        EngineInterval(seq=i, t=float(r.get("elapsed_s", i)), data=r)
        for i, r in enumerate(result.intervals)
    ]
    if result.summary and result.summary.get("histogram"):
        test.histograms[DEFAULT_HISTOGRAM] = result.summary["histogram"]
    test.emits = [row for cycle in result.emits for row in _emit_rows(cycle)]
    test.cycles = [emit_cycle(cycle) for cycle in result.emits if "delay_histogram" in cycle]


def _emit_rows(cycle: dict) -> list[EmitRecord]:
    """The engine's record of one emit cycle as rows: one per sampled place."""
    return [
        EmitRecord(
            event=cycle["event"],
            seq=cycle["seq"],
            place=int(place),
            total=cycle["total"],
            duration_ms=float(duration),
            created_ms=cycle.get("created_ms"),
            received=cycle.get("received"),
        )
        for place, duration in cycle.get("places", [])
    ]
