"""The report of a fixed database, byte for byte: `serverlab report --json` and the
`--summary` table of tests/data/golden-report/lab.sql.gz (a real 12-test run of suite.toml
beside it: node-http and go-nethttp, fast requests and comet, three repeats, recorded on a
busy 2-core machine, so every repeat carries its machine-busy flag) must equal the committed
goldens. A refactor that changes no behaviour changes neither file.

The database is committed as its SQL text (gzip'd: the binary file would be larger and no
more readable), with its schema version; a newer serverlab migrates it on opening as it
would any older results database. Nothing in either output is normalised: the report's
only run-dependent text, the path of the HTML it wrote, is made fixed by writing it to
`report.html` in the test's own folder.
"""

import gzip
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "golden-report"
SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]
# SERVERLAB_UPDATE_GOLDEN=1 rewrites the goldens from today's report (then read the diff).
UPDATE = os.environ.get("SERVERLAB_UPDATE_GOLDEN") == "1"


@pytest.fixture
def golden_db(tmp_path: Path) -> Path:
    path = tmp_path / "lab.db"
    db = sqlite3.connect(path)
    db.executescript(gzip.decompress((DATA / "lab.sql.gz").read_bytes()).decode())
    db.close()
    return path


def report_output(db: Path, *options: str) -> bytes:
    # A fixed width: rich lays the summary out for the terminal it believes it has.
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "TZ": "UTC"}
    done = subprocess.run(
        [*SERVERLAB, "report", "all", "--db", str(db), *options],
        cwd=db.parent,
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def assert_golden(output: bytes, name: str) -> None:
    golden = DATA / name
    if UPDATE:
        golden.write_bytes(output)
    assert output == golden.read_bytes()


def test_the_report_json_of_the_fixed_database_is_its_golden_file(golden_db):
    assert_golden(report_output(golden_db, "--json"), "report.json")


def test_the_summary_of_the_fixed_database_is_its_golden_file(golden_db):
    assert_golden(report_output(golden_db, "--summary", "-o", "report.html"), "summary.txt")
