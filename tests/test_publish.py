"""`serverlab publish`: a static site of the selected runs, on the committed recording of
real runs (see test_history) loaded into a real SQLite file. Its JSON is valid under the
committed results.schema.json (checked with jsonschema), the same database gives the same
bytes, and every link is relative to a file the site holds."""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from history_fixture import load_compact

from serverlab.results.publish import SCHEMA_PATH, SCHEMA_VERSION

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]
COMPACT = Path(__file__).parent / "data" / "history_runs.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return load_compact(json.loads(COMPACT.read_text()), tmp_path_factory.mktemp("p") / "lab.db")


@pytest.fixture(scope="module")
def site(recorded, tmp_path_factory) -> Path:
    return publish(recorded, tmp_path_factory.mktemp("site") / "out")


def publish(recorded, out: Path, *selection) -> Path:
    done = subprocess.run(
        [*SERVERLAB, "publish", *selection, str(out), "--db", str(recorded.db)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("published ")
    return out


def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_every_published_document_is_valid_under_the_committed_schema(site, recorded):
    check = validator()
    documents = sorted((site / "data").glob("*.json"))
    kinds = set()
    for path in documents:
        document = json.loads(path.read_text())
        errors = [e.message for e in check.iter_errors(document)]
        assert errors == [], f"{path.name}: {errors}"
        assert document["schema_version"] == SCHEMA_VERSION
        kinds.add(document["kind"])
    assert kinds == {"index", "run", "history"}
    runs = len(recorded.planted_runs) + 2  # and the two paired runs
    assert len([p for p in documents if p.name.startswith("run-")]) == runs
    assert (site / "results.schema.json").read_bytes() == SCHEMA_PATH.read_bytes()


def test_the_schema_refuses_a_cell_that_lost_its_median_or_a_version_it_does_not_know(site):
    check = validator()
    document = json.loads((site / "data" / "run-1.json").read_text())
    broken = copy.deepcopy(document)
    del broken["cells"][0]["median"]
    assert not check.is_valid(broken)
    newer = {**document, "schema_version": "3.0.0"}
    assert not check.is_valid(newer)
    assert check.is_valid(document)


def test_each_cell_is_the_runs_own_figures(site, recorded):
    document = json.loads((site / "data" / "run-1.json").read_text())
    throughput = next(c for c in document["cells"] if c["metric"] == "rps")
    assert throughput["contestant"] == "rust-zhtta" and throughput["n"] == 2
    low, high = throughput["interval"]["low"], throughput["interval"]["high"]
    assert sorted(throughput["values"]) == [low, high]
    assert throughput["median"] == sum(throughput["values"]) / 2
    assert document["run"]["id"] == 1 and document["run"]["suite"]["name"] == "history-zhtta"


def test_publishing_the_same_database_twice_gives_the_same_bytes(site, recorded, tmp_path):
    again = files_of(publish(recorded, tmp_path / "again"))
    first = files_of(site)
    assert sorted(again) == sorted(first)
    changed = [name for name in first if first[name] != again[name]]
    assert changed == []


def test_the_history_marks_the_planted_regression_where_it_was_planted(site, recorded):
    index = json.loads((site / "data" / "index.json").read_text())
    [suite] = index["suites"]
    assert suite["history"] == "history/history-zhtta.html"
    history = json.loads((site / "data" / "history-history-zhtta.json").read_text())
    throughput = next(s for s in history["series"] if s["metric"] == "rps")
    first_slow = recorded.planted_runs[recorded.first_slow]
    assert [cp["run"] for cp in throughput["change_points"]] == [first_slow]
    assert throughput["change_points"][0]["percent"] < 0
    # Paired runs are configurations of one sitting, not points of the history.
    assert [p["run"] for p in throughput["points"]] == recorded.planted_runs
    page = (site / suite["history"]).read_text()
    assert f"run {first_slow - 1} → run {first_slow}" in page


LINK = re.compile(r"""(?:href|src)="([^"]*)\"""")


def test_every_link_is_relative_to_a_file_the_site_holds(site):
    pages = sorted(site.rglob("*.html"))
    assert {p.relative_to(site).parts[0] for p in pages} == {"index.html", "runs", "history"}
    for page in pages:
        text = page.read_text()
        assert "fetch(" not in text, f"{page}: file:// forbids fetching a file"
        for link in LINK.findall(text):
            if link.startswith("#"):
                continue
            assert "://" not in link and not link.startswith("/"), f"{page}: {link}"
            target = (page.parent / link.split("#")[0]).resolve()
            assert target.is_file(), f"{page}: {link} leads nowhere"
    # plotly.js once, beside the pages, not inline in each.
    assert all(p.stat().st_size < 2_000_000 for p in pages)
    assert (site / "plotly.min.js").stat().st_size > 1_000_000


def test_a_selection_narrows_the_site_to_its_runs(recorded, tmp_path):
    out = publish(recorded, tmp_path / "two", "run:1,2")
    index = json.loads((out / "data" / "index.json").read_text())
    assert [run["id"] for run in index["runs"]] == [1, 2]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["run-1.html", "run-2.html"]


@pytest.mark.parametrize("page", ["runs/run-6.html", "history/history-zhtta.html", "index.html"])
def test_each_page_opens_from_file_and_draws_its_charts_in_chromium(site, tmp_path, page):
    from test_report_browser import RENDER_TIMEOUT_S, DevTools, launched_chromium, problems_in

    with launched_chromium(tmp_path / "profile") as page_url:
        browser = DevTools(page_url)
        try:
            for domain in ("Runtime", "Log", "Page", "Network"):
                browser.call(f"{domain}.enable")
            browser.call("Page.navigate", url=(site / page).as_uri())
            browser.wait_for("document.readyState === 'complete'", RENDER_TIMEOUT_S)
            plots = browser.evaluate("document.querySelectorAll('div.plot').length")
            if plots:
                rendered = browser.wait_for(
                    "document.body.getAttribute('data-charts-rendered')"
                    " || document.body.getAttribute('data-charts-failed') && 'failed'",
                    RENDER_TIMEOUT_S,
                )
                drawn = browser.evaluate(
                    "document.querySelectorAll('div.plot svg.main-svg').length"
                )
            links = browser.evaluate("document.querySelectorAll('a[href]').length")
            browser.evaluate("0")  # one more round trip collects events still in flight
        finally:
            browser.close()
    assert problems_in(browser.events) == []
    if page == "index.html":
        assert plots == 0 and links >= 2 * 12  # a report and a JSON link per run
    else:
        assert plots > 0 and rendered == str(plots) and drawn >= plots


def test_an_out_folder_that_cannot_be_made_is_one_line_and_nothing_else(recorded, tmp_path):
    (tmp_path / "a-file").write_text("kept\n")
    done = subprocess.run(
        [*SERVERLAB, "publish", str(tmp_path / "a-file" / "site"), "--db", str(recorded.db)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()[-1:]
    assert line.startswith("serverlab: error: cannot write ") and "Not a directory" in line
    assert "Traceback" not in done.stderr
    assert (tmp_path / "a-file").read_text() == "kept\n"
