"""Which machines the two sides of a comparison ran on (their runs' fingerprints: hardware
and kernel, DESIGN.md §11). A comparison across machines measures the machines as much as
what changed, so ``serverlab compare`` and its gate judge only runs of one fingerprint,
unless asked (``--mix-machines``), and then say so beside the verdict; ``history`` keeps
machines apart the same way (``serverlab.results.report.charts.series``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from serverlab.results.records import Run
from serverlab.results.report.selection import parse_selection, select_tests
from serverlab.results.store import Store

UNKNOWN = "unknown"  # a run recorded before fingerprints were


@dataclass(frozen=True)
class Machines:
    """Each side's machines: fingerprint id -> what it says, in the order first seen."""

    a: dict[str, str]
    b: dict[str, str]

    @property
    def mixed(self) -> bool:
        return len(set(self.a) | set(self.b)) > 1

    def describe(self) -> str:
        """'A on 1a2b… (2 CPUs …), B on 3c4d… (64 CPUs …)'."""
        return f"A on {_named(self.a)}, B on {_named(self.b)}"

    def refusal(self) -> str:
        return (
            f"inconclusive: A and B ran on different machines ({self.describe()}): a "
            "comparison across machines measures the machines; compare runs of one "
            "machine, or give --mix-machines to compare them anyway"
        )

    def mixed_note(self) -> str:
        return f"machines mixed (--mix-machines): {self.describe()}"

    def as_dict(self) -> dict:
        return {"mixed": self.mixed, "a": self.a, "b": self.b}


def _named(prints: dict[str, str]) -> str:
    return " and ".join(f"{name} ({said})" if said else name for name, said in prints.items())


def machines_of(db_path: str | Path, side_a, side_b) -> Machines:
    """The machines of the runs each selection's tests belong to."""
    with Store(db_path, create=False) as store:
        runs = {run.id: run for run in store.runs()}
        sides = [
            {t.run_id for t in select_tests(store, parse_selection(side), details=False)}
            for side in (side_a, side_b)
        ]
    return Machines(*(_prints(runs[run_id] for run_id in sorted(ids)) for ids in sides))


def _prints(runs: Iterable[Run]) -> dict[str, str]:
    found: dict[str, str] = {}
    for run in runs:
        found.setdefault(run.fingerprint_id or UNKNOWN, describe(run.fingerprint))
    return found


def describe(fingerprint: dict) -> str:
    """'2 CPUs AMD EPYC 7B13, kernel 6.1.0-18-amd64, 8 GiB' ('' when none was recorded)."""
    if not fingerprint:
        return ""
    parts = [
        f"{fingerprint.get('cpus', '?')} CPUs {fingerprint.get('cpu_model') or ''}".strip(),
        f"kernel {fingerprint.get('kernel', '?')}",
        f"{fingerprint.get('memory_gib', '?')} GiB",
    ]
    return ", ".join(parts)
