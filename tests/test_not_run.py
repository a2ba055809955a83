"""Tests refused before anything runs (a descriptor cap, a protocol the contestant does not
claim) are stored with the run and shown by the report, its JSON and the terminal summary:
a real `serverlab run` under a real RLIMIT_NOFILE, a real SQLite file, the real report."""

import json
import sqlite3

from rich.console import Console
from test_descriptor_cap import capped_run
from test_report import fill_realistic_db

from serverlab.results.report import build_report, print_summary
from serverlab.results.report.builder import report_data
from serverlab.run.plan import descriptors

CAP = 2048
MANY = CAP - descriptors.RESERVED + 1  # one connection too many for one process

# Per repeat: one test that runs, one the cap refuses, one the reference server (which
# claims no `tls`) is refused for its protocol.
SUITE = f"""name = "t"
contestants = ["reference"]
[[scenario]]
name = "held"
behaviour = "keepalive"
clients = [{MANY}, 4]
duration_s = 1
[[scenario]]
name = "secure"
behaviour = "keepalive"
transport = "tls"
clients = 4
duration_s = 1
"""


def stored_not_run(db) -> list[dict]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT machine_json FROM runs ORDER BY id").fetchall()
    return [json.loads(machine).get("not_run") for (machine,) in rows]


def summary_text(db) -> str:
    console = Console(record=True, width=120)
    print_summary(db, None, console=console)
    return console.export_text()


def test_a_refused_tests_reason_reaches_the_stored_run_and_the_report_once_per_point(
    contestants_dir, tmp_path
):
    suite, db = tmp_path / "suite.toml", tmp_path / "lab.db"
    suite.write_text(SUITE)
    for sitting in (["--repeats", "1"], ["--repeats", "2", "--resume"]):
        # The second sitting runs only the new repeat, and says again what it refused.
        done = capped_run(CAP, str(suite), "--db", str(db), "--skip-verify", *sitting)
        assert done.returncode == 0, done.stderr
    runs = stored_not_run(db)
    assert len(runs) == 2 and all(runs), "each sitting stores what it refused"
    secure, held = runs[1]["tests"]
    assert (held["scenario"], held["contestant"], held["point"]) == (
        "held",
        "reference",
        f"clients={MANY}",
    )
    assert held["repeats"] == 2, "one entry per matrix point, its repeats counted"
    assert f"would need {CAP + 1:,} descriptors" in held["why"]
    assert secure["why"] == "reference does not claim the spec part `tls`"
    assert runs[1]["contestants"] == []

    listed = report_data(db)["not_run"]["tests"]
    assert [(e["scenario"], e["repeats"]) for e in listed] == [("secure", 2), ("held", 2)]
    html = build_report(db, None, tmp_path / "report.html").read_text(encoding="utf-8")
    section = html.split('<section id="not-run">')[1].split("</section>")[0]
    assert f"clients={MANY}" in section and f"cap of {CAP:,}" in section
    assert "does not claim the spec part `tls`" in section
    assert '<a href="#not-run">not run</a>' in html
    said = "Not run: 4 tests (2 matrix points) refused before they ran."
    assert said in html
    assert said in summary_text(db).splitlines()


def test_a_run_with_nothing_refused_shows_no_not_run_section(tmp_path):
    db = fill_realistic_db(tmp_path / "lab.db")
    html = build_report(db, None, tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="not-run"' not in html and "#not-run" not in html
    assert "Not run" not in html
    assert report_data(db)["not_run"] == {"tests": [], "contestants": []}
    assert "Not run" not in summary_text(db)
