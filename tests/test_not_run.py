"""Tests refused before anything runs (a descriptor cap, a protocol the contestant does not
claim) are stored with the run and shown by the report, its JSON and the terminal summary:
a real `serverlab run` under a real RLIMIT_NOFILE, a real SQLite file, the real report."""

import json
import random
import re
import sqlite3

from conftest import REFERENCE_MANIFEST, write_manifest
from rich.console import Console
from test_descriptor_cap import capped_run
from test_report import recorded

from serverlab.results.records import StoredSuite
from serverlab.results.report import build_report, print_summary
from serverlab.results.report.builder import report_data
from serverlab.results.store import Store
from serverlab.run.plan import descriptors

CAP = 2048
MANY = CAP - descriptors.RESERVED + 1  # one connection too many for one process

# Per repeat: for each contestant, one test the cap refuses and one that runs; for `lite`
# (which claims no `tls`) a test refused for its protocol.
SUITE = f"""name = "t"
contestants = ["lite", "unbuilt"]
[[scenario]]
name = "secure"
behaviour = "keepalive"
transport = "tls"
clients = 4
duration_s = 1
contestants = ["lite"]
[[scenario]]
name = "held"
behaviour = "keepalive"
clients = [{MANY}, 4]
duration_s = 1
"""


def write_contestants(root) -> None:
    """`lite`: the reference server claiming `perf` only, so that its verify is short;
    `unbuilt`: the same, never built, which verify refuses before starting it."""
    lite = re.sub(r"^implements = .*$", 'implements = ["perf"]', REFERENCE_MANIFEST, flags=re.M)
    lite = lite.replace('name = "reference"', 'name = "lite"')
    write_manifest(root, "lite", lite)
    unbuilt = lite.replace('name = "lite"', 'name = "unbuilt"\nartifacts = ["server.bin"]')
    write_manifest(root, "unbuilt", unbuilt)


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
    write_contestants(contestants_dir)
    suite, db = tmp_path / "suite.toml", tmp_path / "lab.db"
    suite.write_text(SUITE)
    first = capped_run(CAP, str(suite), "--db", str(db), "--repeats", "1")
    assert first.returncode == 2 and "not run (failed verify): unbuilt" in first.stderr
    # A later sitting runs only the new repeat, and says again what it refused.
    again = ["--repeats", "2", "--resume", "--contestants", "lite", "--skip-verify"]
    done = capped_run(CAP, str(suite), "--db", str(db), *again)
    assert done.returncode == 0, done.stderr
    first, second = stored_not_run(db)
    (unbuilt,) = first["contestants"]
    assert unbuilt["contestant"] == "unbuilt"
    assert unbuilt["why"].startswith("failed verify: FAIL (not built (missing server.bin)")
    secure, held = second["tests"]
    assert (held["scenario"], held["contestant"], held["point"]) == (
        "held",
        "lite",
        f"clients={MANY}",
    )
    assert held["repeats"] == 2, "one entry per matrix point, its repeats counted"
    assert f"would need {CAP + 1:,} descriptors" in held["why"]
    assert secure["why"] == "lite does not claim the spec part `tls`"

    data = report_data(db)["not_run"]
    listed = [(e["scenario"], e["contestant"], e["repeats"]) for e in data["tests"]]
    # Each point once, the newest sitting's; the first sitting's unbuilt point stays.
    assert listed == [("secure", "lite", 2), ("held", "lite", 2), ("held", "unbuilt", 1)]
    assert [e["contestant"] for e in data["contestants"]] == ["unbuilt"]
    html = build_report(db, None, tmp_path / "report.html").read_text(encoding="utf-8")
    section = html.split('<section id="not-run">')[1].split("</section>")[0]
    assert f"clients={MANY}" in section and f"cap of {CAP:,}" in section
    assert "does not claim the spec part `tls`" in section
    assert "not built (missing server.bin)" in section
    assert '<a href="#not-run">not run</a>' in html
    said = (
        "Not run: 5 tests (3 matrix points) refused before they ran; 1 contestant refused "
        "by verify."
    )
    assert said in html
    assert said in summary_text(db).splitlines()


PARAMS = {"behaviour": "keepalive", "clients": 4}


def small_db(path, not_run_by_run: list[dict | None]) -> list[int]:
    """One stored run per entry of `not_run_by_run` (its stored `not_run`, or none), each
    with one test of `a` for lite and one for other; returns the runs' ids."""
    rng = random.Random(1)
    with Store(path) as store:
        suite = store.add_suite(StoredSuite("t", "suite.toml", "ab" * 32, 1.0))
        ids = []
        for stored in not_run_by_run:
            run = store.start_run(suite, {"not_run": stored} if stored else {})
            for contestant in ("lite", "other"):
                store.commit_test(recorded(run.id, "a", PARAMS, contestant, 0, rng))
            store.finish_run(run.id, "finished")
            ids.append(run.id)
    return ids


def refused_point(key: str, contestant: str, repeats: int = 1) -> dict:
    return {
        "key": key,
        "scenario": "b",
        "contestant": contestant,
        "point": "clients=20000",
        "tunables": "",
        "why": "over the cap",
        "repeats": repeats,
    }


def test_a_run_with_nothing_refused_shows_no_not_run_section(tmp_path):
    db = tmp_path / "lab.db"
    small_db(db, [None])
    html = build_report(db, None, tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="not-run"' not in html and "#not-run" not in html
    assert "Not run" not in html
    assert report_data(db)["not_run"] == {"tests": [], "contestants": []}
    assert "Not run" not in summary_text(db)


def test_a_point_a_later_sitting_ran_is_not_listed_and_a_contestant_narrows_the_list(
    tmp_path,
):
    db = tmp_path / "lab.db"
    ran_later = recorded(0, "a", PARAMS, "lite", 0, random.Random(1))
    first = {
        "tests": [refused_point(ran_later.permutation_key, "lite"), refused_point("b|x", "other")],
        "contestants": [{"contestant": "gone", "why": "failed verify: 3 failed"}],
    }
    small_db(db, [first, {"tests": [refused_point("b|x", "other", repeats=3)]}])
    data = report_data(db)["not_run"]
    assert [(e["key"], e["repeats"]) for e in data["tests"]] == [("b|x", 3)]
    assert data["contestants"] == first["contestants"]
    assert report_data(db, "lite")["not_run"] == {"tests": [], "contestants": []}
