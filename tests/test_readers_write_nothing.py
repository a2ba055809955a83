"""The commands that read a results database (history, report, compare, export --csv) write
nothing into a file that is not one: an empty file and another program's SQLite file are
refused in one line, and stay byte for byte as they were, with no journal beside them."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SERVERLAB = [str(Path(sys.executable).parent / "serverlab")]
READERS = {
    "history": ["history"],
    "report": ["report", "-o", "{out}/r.html"],
    "compare": ["compare", "a", "b"],
    "export": ["export", "--csv", "{out}/csv"],
}


def read_with(command: str, db: Path, out: Path) -> subprocess.CompletedProcess:
    argv = [word.format(out=out) for word in READERS[command]]
    return subprocess.run(
        [*SERVERLAB, *argv, "--db", str(db)], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", list(READERS))
def test_an_empty_file_is_refused_as_no_database_and_stays_empty(tmp_path, command):
    db = tmp_path / "lab.db"
    db.touch()
    done = read_with(command, db, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert "is an empty file, not a serverlab results database" in done.stderr
    assert db.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.db"]


def test_another_programs_sqlite_file_is_refused_and_left_as_it_was(tmp_path):
    db = tmp_path / "notes.db"
    with sqlite3.connect(db) as notes:
        notes.execute("CREATE TABLE notes (text TEXT)")
        notes.execute("INSERT INTO notes VALUES ('mine')")
    notes.close()
    before = db.read_bytes()
    done = read_with("history", db, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not a serverlab results database" in done.stderr
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_an_sqlite_file_without_tables_is_refused_as_holding_no_results_yet(tmp_path):
    # An SQLite header and no table: what a reader meets while a run makes its schema.
    db = tmp_path / "lab.db"
    with sqlite3.connect(db) as made:
        made.execute("CREATE TABLE t (x)")
        made.execute("DROP TABLE t")
    made.close()
    before = db.read_bytes()
    assert before, "SQLite wrote its header"
    done = read_with("report", db, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds no results yet (no tables)" in done.stderr
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.db"]
