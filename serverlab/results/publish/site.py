"""``serverlab publish [SELECTION] OUT/``: the selected runs as a static site.

- ``index.html``: the suites and their runs, each linking its report, its data and its
  suite's history;
- ``runs/run-N.html``: run N's report (the same HTML as ``serverlab report run:N``);
- ``history/SUITE.html``: a suite's trend charts over its runs, change points marked;
- ``data/index.json``, ``data/run-N.json``, ``data/history-SUITE.json``: the same as data,
  every document under ``results.schema.json`` (copied beside them), its version in
  ``schema_version`` (docs/results-schema.md has its changelog);
- ``plotly.min.js``: the charts' library, once for every page.

Every link is relative and no page fetches a file (file:// forbids it): the site opens from
a folder as from any static server. The same database gives the same bytes (no time of
publishing, keys sorted, runs by id, series in a fixed order), so that a results repository
can commit the site and read its diffs. Files of an earlier publish that this one no longer
makes (a run deleted) are left alone: publish into an empty folder to mirror a database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import plotly.offline

from serverlab.results.history import series_json
from serverlab.results.records import RecordedTest, Run, StoredSuite
from serverlab.results.report.builder import (
    cells_data,
    environment,
    render_report,
    write_atomically,
)
from serverlab.results.report.cells.scenarios import paired_arm
from serverlab.results.report.charts.chart import shared_template
from serverlab.results.report.charts.series import build_series
from serverlab.results.report.sections.history import history_section
from serverlab.results.report.sections.not_run import not_run
from serverlab.results.report.selection import Selection, load_selected, parse_selection
from serverlab.results.report.summary import architectures, rerun_note
from serverlab.results.store import StoreError

SCHEMA_VERSION = "2.0.0"
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")
PLOTLY = "plotly.min.js"


@dataclass
class PublishedSite:
    out: Path
    runs: int
    files: list[str]


def publish(
    db_path: str | Path, selection: Iterable[str] | None, out: str | Path, progress=None
) -> PublishedSite:
    """Write the site of the selected runs (default: all) into ``out``. ``progress``, if
    given, is told of each run as it is written (``serverlab.base.progress.Tally``)."""
    parsed = parse_selection(list(selection or []) or ["all"])
    found = load_selected(db_path, parsed, progress)
    db_name = Path(db_path).name
    runs = sorted(found.runs, key=lambda r: r.id)
    suites = _suite_slugs(runs, found.suites)
    files: dict[str, str] = {PLOTLY: plotly.offline.get_plotlyjs()}
    files["results.schema.json"] = SCHEMA_PATH.read_text(encoding="utf-8")
    if progress:
        progress.begin(len(runs) + len(suites), "publishing")
    for run in runs:
        tests = [t for t in found.tests if t.run_id == run.id]
        superseded = [t for t in found.superseded if t.run_id == run.id]
        scope = Selection(run_ids={run.id}, contestants=parsed.contestants)
        files[f"runs/run-{run.id}.html"] = render_report(
            tests,
            [run],
            found.suites,
            scope.describe(),
            db_name,
            architectures([run]),
            rerun_note(superseded),
            not_run([run], tests, parsed.contestants),
            plotly_src=f"../{PLOTLY}",
        )
        files[f"data/run-{run.id}.json"] = _json(_run_document(run, tests, found.suites, scope))
        _advance(progress, f"run {run.id}")
    histories = {}
    for name, slug in suites.items():
        of_suite = [r for r in runs if found.suites[r.suite_id].name == name]
        page = _history_files(name, slug, found.tests, of_suite, found.suites)
        files.update(page)
        histories[name] = f"history/{slug}.html" if f"history/{slug}.html" in page else None
        _advance(progress, f"history of {name}")
    index = _index_document(runs, found.tests, found.suites, histories)
    files["data/index.json"] = _json(index)
    files["index.html"] = _page("publish_index.html.j2", index=index, db=db_name)
    out = Path(out)
    for relative, text in sorted(files.items()):
        try:
            write_atomically(out / relative, text)
        except OSError as error:
            raise StoreError(f"cannot write {out / relative}: {error.strerror}") from None
    if progress:
        progress.end()
    return PublishedSite(out, len(runs), sorted(files))


def _advance(progress, label: str) -> None:
    if progress:
        progress.advance(label)


def _json(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _page(template: str, **context) -> str:
    return environment().get_template(template).render(**context)


def _suite_slugs(runs: list[Run], suites: dict[int, StoredSuite]) -> dict[str, str]:
    """Each suite name of the runs, with a file name for it: the name's letters, digits,
    dots, dashes and underscores (anything else a dash), made unique by a number."""
    slugs: dict[str, str] = {}
    for name in sorted({suites[r.suite_id].name for r in runs}):
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "suite"
        while slug in slugs.values():
            slug += "-"
        slugs[name] = slug
    return slugs


def _run_meta(run: Run, suites: dict[int, StoredSuite]) -> dict:
    suite = suites[run.suite_id]
    return {
        "id": run.id,
        "suite": {"name": suite.name, "sha256": suite.sha256, "scale": suite.scale},
        "status": run.status,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "fingerprint_id": run.fingerprint_id,
        "fingerprint": run.fingerprint,
        "versions": run.versions,
    }


def _run_document(
    run: Run, tests: list[RecordedTest], suites: dict[int, StoredSuite], scope: Selection
) -> dict:
    data = cells_data(tests, architectures([run]), not_run([run], tests, scope.contestants))
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "run",
        "selection": scope.describe(),
        "run": _run_meta(run, suites),
        "tests": len(tests),
        **data,
    }


def _history_files(
    name: str,
    slug: str,
    tests: list[RecordedTest],
    runs: list[Run],
    suites: dict[int, StoredSuite],
) -> dict[str, str]:
    """A suite's history as data and, once it has two runs or more, as a page of charts.
    Paired runs stay out: their arms are two configurations, judged by their own gate."""
    run_ids = {r.id for r in runs}
    ordinary = [t for t in tests if t.run_id in run_ids and not paired_arm(t)]
    series = build_series(ordinary, runs, suites)
    document = {
        "schema_version": SCHEMA_VERSION,
        "kind": "history",
        "suite": name,
        "series": [series_json(s) for s in series],
    }
    files = {f"data/history-{slug}.json": _json(document)}
    section = history_section(ordinary, runs, suites)
    if section is not None:
        files[f"history/{slug}.html"] = _page(
            "publish_history.html.j2",
            suite=name,
            history=section,
            data=f"../data/history-{slug}.json",
            figures={c.key: c.figure for c in section.charts if c.figure is not None},
            plot_template=shared_template(),
            plotly_src=f"../{PLOTLY}",
        )
    return files


def _index_document(
    runs: list[Run],
    tests: list[RecordedTest],
    suites: dict[int, StoredSuite],
    histories: dict[str, str | None],
) -> dict:
    counts: dict[int, int] = {}
    for test in tests:
        counts[test.run_id] = counts.get(test.run_id, 0) + 1
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "index",
        "suites": [
            {
                "name": name,
                "runs": [r.id for r in runs if suites[r.suite_id].name == name],
                "history": histories[name],
            }
            for name in sorted(histories)
        ],
        "runs": [
            {
                **_run_meta(run, suites),
                "tests": counts.get(run.id, 0),
                "paired": any(paired_arm(t) for t in tests if t.run_id == run.id),
                "report": f"runs/run-{run.id}.html",
                "data": f"data/run-{run.id}.json",
            }
            for run in runs
        ],
    }
