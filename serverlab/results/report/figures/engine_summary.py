"""Reading the engine's summary line of a test, written once: a number by its path of keys
(`summary_number(test, "latency_us", "p99")`), None where the engine wrote none (an older
engine, a crashed test) or wrote something other than a number. A bool is no number."""

from __future__ import annotations

from typing import Any

from serverlab.results.records import RecordedTest


def number_at(document: Any, *path: str) -> float | None:
    """The number at `path` in a JSON document (the engine's summary, or a generator's)."""
    value = document
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def summary_number(test: RecordedTest, *path: str) -> float | None:
    """The number at `path` in the test's engine summary."""
    return number_at(test.summary, *path)
