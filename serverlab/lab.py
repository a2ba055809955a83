"""What the lab commands (`run`, `report`, `compare`, `export`, `load`) do, below the CLI:
the click layer parses flags and prints errors, this module does the work."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from serverlab import compare as comparing
from serverlab import tune as tuning
from serverlab.engine import engine_binary
from serverlab.export import export_csv
from serverlab.machine import Pinning
from serverlab.manifest import Manifest, discover, find
from serverlab.progress import Progress
from serverlab.report import build_report, print_summary
from serverlab.runner import RunOutcome, Session, run_suite
from serverlab.server import ServerError
from serverlab.store import Store
from serverlab.suite import Suite, load_suite
from serverlab.verify import verify_contestant

console = Console(stderr=True)


def load(
    path: str,
    scale: float,
    only: list[str] | None,
    repeats: int | None,
    profile: str | None = None,
) -> Suite:
    known = {m.name for m in discover() if isinstance(m, Manifest)}
    suite = load_suite(path, scale=scale, known_contestants=known, only=only, profile=profile)
    if repeats is not None:
        if repeats < 1:
            raise ServerError("--repeats must be at least 1")
        suite.repeats = repeats
    return suite


def print_plan(suite: Suite) -> None:
    table = Table(
        title=f"{suite.name}: {suite.path} (profile {suite.profile}, scale {suite.scale:g}, "
        f"counts x{suite.count_scale:g})"
    )
    for column in ("#", "scenario", "contestant", "parameters", "tunables"):
        table.add_column(column, overflow="fold")
    for i, perm in enumerate(suite.permutations, 1):
        params = " ".join(f"{k}={v}" for k, v in perm.params.items())
        tunables = " ".join(f"{k}={v}" for k, v in perm.tunables.items())
        table.add_row(str(i), perm.scenario, perm.contestant, params, tunables)
    out = Console(width=200)
    out.print(table)
    minutes = suite.estimated_seconds() / 60
    out.print(
        f"{len(suite.permutations)} permutations x {suite.repeats} repeats = "
        f"{len(suite.tests())} tests, about {minutes:.1f} minutes"
    )


@dataclass
class LabOutcome:
    run: RunOutcome | None
    refused: list[str] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return bool(self.run and self.run.interrupted)


def run(suite: Suite, db: str, resume: bool, verify_first: bool) -> LabOutcome:
    engine_binary()  # fails early, with the fix, when the engine is not built
    limits = prepare_limits(suite)
    refused = _verify_all(suite) if verify_first else []
    if refused:
        suite.permutations = [p for p in suite.permutations if p.contestant not in refused]
    outcome = LabOutcome(run=None, refused=refused)
    if not suite.permutations:
        return outcome
    # Absolute: the path reaches servers whose working folder is their contestant's.
    db_path = Path(db).resolve()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    estimates = {p.key: p.estimated_seconds() for p in suite.permutations}
    progress = Progress(estimates, console)
    with Store(db_path) as store:
        session = Session(
            suite=suite,
            store=store,
            pinning=Pinning.default(),
            workdir=db_path.parent / "work",
            progress=progress,
            resume=resume,
            limits=limits,
        )
        try:
            outcome.run = run_suite(session)
        finally:
            progress.end()
    r = outcome.run
    console.print(
        f"run {r.run_id}: {r.finished} tests finished ({r.crashed} crashed, {r.invalid} "
        f"invalid), {r.skipped} kept from before" + (" — interrupted" if r.interrupted else "")
    )
    return outcome


def prepare_limits(suite: Suite) -> dict:
    """Raises our descriptor limit (the servers and engine inherit it) and refuses, before
    anything starts, a suite whose [needs] this machine does not meet."""
    changed = tuning.raise_nofile(suite.needs.get("nofile"))
    short = tuning.shortfalls(suite.needs)
    if short:
        raise ServerError(tuning.refusal(str(suite.path), short))
    return {"in_force": tuning.in_force(), "rlimit_nofile_raised": changed}


def tune(suite_path: str | None, profile: str | None, apply: bool) -> list[str]:
    """Prints the limits table; with `apply` sets what is short first. Returns the changes."""
    needs = load(suite_path, 1.0, None, None, profile).needs if suite_path else {}
    changes = []
    if apply:
        if not tuning.is_root():
            raise ServerError("serverlab tune --apply must run as root (it writes /proc/sys)")
        changes = tuning.apply(needs)
    table = Table("limit", "in force", "needed", "ok", "note")
    for row in tuning.rows(needs):
        mark = "[green]ok[/green]" if row.ok else "[red]SHORT[/red]"
        needed = "-" if row.needed is None else str(row.needed)
        table.add_row(row.limit, row.in_force, needed, mark, row.note)
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    return changes


def _verify_all(suite: Suite) -> list[str]:
    """Conformance before any benchmark: contestants that fail are left out of the run."""
    refused = []
    for name in sorted({p.contestant for p in suite.permutations}):
        console.print(f"verifying {name} against the spec ...")
        report = verify_contestant(find(name))
        console.print(f"  {report.summary()}")
        if not report.ok:
            refused.append(name)
            failed = [r for r in report.results if r.status == "FAIL"][:5]
            for result in failed:
                console.print(f"  FAIL {result.case_id}: {result.reason}", highlight=False)
            if report.error:
                console.print(f"  {report.error}", highlight=False)
    return refused


def report(db: str, selection, output: str, summary: bool) -> Path:
    path = build_report(db, selection or None, output)
    if summary:
        wide = Console(width=None if sys.stdout.isatty() else 200)
        print_summary(db, selection or None, console=wide)
    return path


def compare(db: str, side_a: str, side_b: str, metrics) -> None:
    rows = comparing.compare(db, side_a, side_b, metrics)
    comparing.print_comparison(rows, side_a, side_b)


def export(db: str, csv_dir: str) -> list[Path]:
    return export_csv(db, csv_dir)


def engine_argv(args) -> tuple[str, list[str]]:
    binary = str(engine_binary())
    return binary, [binary, *args]
