"""Which tests a report or a comparison covers, written as a few words on the command line.

Terms (any number, separated by spaces or given as separate arguments):

- ``latest`` (the default scope): every run of the suite version the newest run belongs to,
  so a suite continued with ``--resume`` is reported whole;
- ``all``: every run;
- ``run:N`` or ``run:N,M``: those runs;
- ``suite:NAME``: every run of every version of that suite;
- ``contestant:NAME[,NAME]`` or a bare ``NAME``: only those contestants.

Scope terms add up; contestant terms narrow what the scope holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.results.records import RecordedTest, Run, StoredSuite
from serverlab.results.report.sections.not_run import NotRun, not_run
from serverlab.results.store import Store, StoreError

# Piped, loading a selection's tests says nothing before this long: most databases load in
# well under it, and a report's or a history's output stays as it was.
LOADING_QUIET_S = 2.0


class SelectionError(ValueError):
    """A selection that cannot be parsed or matches nothing; the message says which."""


@dataclass
class Selection:
    latest: bool = False
    everything: bool = False
    run_ids: set[int] = field(default_factory=set)
    suite_names: set[str] = field(default_factory=set)
    contestants: set[str] = field(default_factory=set)

    @property
    def has_scope(self) -> bool:
        return self.latest or self.everything or bool(self.run_ids or self.suite_names)

    def describe(self) -> str:
        words = (
            (["latest"] if self.latest or not self.has_scope else [])
            + (["all"] if self.everything else [])
            + [f"run:{i}" for i in sorted(self.run_ids)]
            + [f"suite:{n}" for n in sorted(self.suite_names)]
            + [f"contestant:{c}" for c in sorted(self.contestants)]
        )
        return " ".join(words)


def parse_selection(terms: Iterable[str] | str | None) -> Selection:
    if terms is None:
        terms = []
    if isinstance(terms, str):
        terms = [terms]
    selection = Selection()
    for word in (w for term in terms for w in term.split()):
        _add_term(selection, word)
    return selection


def _add_term(selection: Selection, word: str) -> None:
    kind, _, value = word.partition(":")
    if word == "latest":
        selection.latest = True
    elif word == "all":
        selection.everything = True
    elif kind == "run" and value:
        try:
            selection.run_ids.update(int(v) for v in value.split(","))
        except ValueError:
            raise SelectionError(f"run:{value}: run ids are numbers, e.g. run:3,4") from None
    elif kind == "suite" and value:
        selection.suite_names.add(value)
    elif kind == "contestant" and value:
        selection.contestants.update(v for v in value.split(",") if v)
    elif ":" in word:
        raise SelectionError(
            f"unknown selection term {word!r}: use latest, all, run:N, suite:NAME, "
            "contestant:NAME or a contestant name"
        )
    else:
        selection.contestants.add(word)


def selected_run_ids(store: Store, selection: Selection) -> set[int]:
    runs = store.runs()
    if not runs:
        raise SelectionError(f"{store.path} holds no runs yet: run a suite first")
    chosen: set[int] = set()
    if selection.everything:
        chosen.update(r.id for r in runs)
    if selection.latest or not selection.has_scope:
        newest_suite = runs[-1].suite_id
        chosen.update(r.id for r in runs if r.suite_id == newest_suite)
    known_runs = {r.id for r in runs}
    missing = selection.run_ids - known_runs
    if missing:
        raise SelectionError(f"no run {', '.join(map(str, sorted(missing)))} in {store.path}")
    chosen.update(selection.run_ids)
    if selection.suite_names:
        suite_ids = {s.id for s in store.suites() if s.name in selection.suite_names}
        if not suite_ids:
            raise SelectionError(f"no suite named {', '.join(sorted(selection.suite_names))}")
        chosen.update(r.id for r in runs if r.suite_id in suite_ids)
    return chosen


def select_tests(
    store: Store, selection: Selection, details: bool = True, progress=None
) -> list[RecordedTest]:
    """The selected tests, with their measurements loaded when ``details`` is true, a step
    of ``progress`` (``serverlab.base.progress.Tally``) each."""
    try:
        run_ids = selected_run_ids(store, selection)
    except StoreError as error:
        raise SelectionError(str(error)) from error
    tests = [
        t
        for t in store.tests(run_ids)
        if not selection.contestants or t.contestant in selection.contestants
    ]
    if not tests:
        raise SelectionError(f"no tests match the selection {selection.describe()!r}")
    if details:
        if progress:
            progress.begin(len(tests), "loading tests", quiet_for_s=LOADING_QUIET_S)
        for test in tests:
            store.load_details(test)
            if progress:
                progress.advance(f"run {test.run_id}")
        if progress:
            progress.end()
    return tests


@dataclass
class Selected:
    """What a selection picked out of a database: its tests, the runs they belong to, and
    every suite (by id)."""

    tests: list[RecordedTest]
    runs: list[Run]
    suites: dict[int, StoredSuite]
    # Repeats a re-run replaced in the figures (`serverlab run --rerun-busy`).
    superseded: list[RecordedTest] = field(default_factory=list)
    # What the runs were asked for and refused before it ran.
    not_run: NotRun = field(default_factory=NotRun)


def load_selected(db_path: str | Path, selection: Selection, progress=None) -> Selected:
    with Store(db_path, create=False) as store:
        tests = select_tests(store, selection, progress=progress)
        run_ids = {t.run_id for t in tests}
        runs = [r for r in store.runs() if r.id in run_ids]
        suites = {s.id: s for s in store.suites()}
        keys = {t.key for t in tests}
        superseded = [t for t in store.tests(run_ids, superseded=True) if t.key in keys]
    refused = not_run(runs, tests, selection.contestants)
    return Selected(tests, runs, suites, superseded, refused)
