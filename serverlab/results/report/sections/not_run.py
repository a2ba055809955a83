"""Report stage: what a run was asked for and did not run, read from each run's stored info
(`not_run`, written by the run stage before its first test): tests refused before anything
ran (a descriptor cap, a protocol the contestant does not claim or the engine does not
speak), each with its reason and its repeats, and contestants the verify-first step
refused. Without it a refused cell reads like one nobody asked for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from serverlab.results.records import RecordedTest, Run

# The mark in a stored entry's key of a test's client groups left out (the test itself ran:
# serverlab.run.plan.descriptors.Refused.key).
LEFT_OUT_MARK = "|without "


@dataclass
class NotRun:
    # scenario, contestant, point, tunables, why, repeats, and key (the permutation's)
    tests: list[dict] = field(default_factory=list)
    contestants: list[dict] = field(default_factory=list)  # contestant, why

    def __bool__(self) -> bool:
        return bool(self.tests or self.contestants)

    @property
    def refused_tests(self) -> int:
        return sum(entry["repeats"] for entry in self._whole())

    def _whole(self) -> list[dict]:
        """The entries of tests refused whole (not a test's client groups left out)."""
        return [e for e in self.tests if LEFT_OUT_MARK not in e["key"]]

    def sentence(self) -> str:
        """ "Not run: 39 tests (39 matrix points) refused before they ran; client groups
        left out of 3 tests; 1 contestant refused by verify." ("" when nothing was
        refused)"""
        parts = []
        whole = self._whole()
        if whole:
            tests, points = self.refused_tests, len(whole)
            parts.append(
                f"{_count(tests, 'test')} ({_count(points, 'matrix point')}) refused before "
                "they ran"
            )
        if len(whole) < len(self.tests):
            partly = sum(e["repeats"] for e in self.tests if e not in whole)
            parts.append(f"client groups left out of {_count(partly, 'test')}")
        if self.contestants:
            parts.append(f"{_count(len(self.contestants), 'contestant')} refused by verify")
        return f"Not run: {'; '.join(parts)}." if parts else ""

    def as_dict(self) -> dict:
        return {"tests": self.tests, "contestants": self.contestants}


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def not_run(runs: Iterable[Run], tests: list[RecordedTest], contestants: set[str]) -> NotRun:
    """What the runs refused, once per matrix point (a resumed suite's sittings each say
    it: the newest says it last), narrowed to `contestants` when given. A point or a
    contestant that has tests among `tests` ran after all (a later sitting under a higher
    cap, a fixed server), so it is not listed."""
    points: dict[str, dict] = {}
    refused: dict[str, dict] = {}
    for run in sorted(runs, key=lambda r: r.id):
        stored = run.machine.get("not_run") or {}
        points.update((e["key"], e) for e in _chosen(stored.get("tests", []), contestants))
        refused.update(
            (e["contestant"], e) for e in _chosen(stored.get("contestants", []), contestants)
        )
    ran_points = {t.permutation_key for t in tests}
    ran_contestants = {t.contestant for t in tests}
    return NotRun(
        [entry for key, entry in points.items() if key not in ran_points],
        [entry for name, entry in refused.items() if name not in ran_contestants],
    )


def _chosen(entries: list[dict], contestants: set[str]) -> list[dict]:
    return [e for e in entries if not contestants or e["contestant"] in contestants]
