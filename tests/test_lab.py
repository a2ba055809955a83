"""`serverlab run` as a user meets it when things go wrong: kill -9, Ctrl-C in every phase,
a closed terminal or pipe, a second run on the same database, a broken database, hostile
suites. Real servers, real engines, real signals; what must never happen is an orphaned
process, a lost test or a traceback."""

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import REFERENCE_MANIFEST, faulty, write_manifest

from serverlab.base import owner
from serverlab.results.records import RecordedTest, StoredSuite
from serverlab.results.store import Store

SERVERLAB = [str(Path(sys.executable).parent / "serverlab")]
FAST = """
[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 4
duration_s = {duration}
{extra}
"""


def write_suite(tmp_path: Path, body: str, repeats: int = 1, contestant="reference") -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(f'name = "t"\nrepeats = {repeats}\ncontestants = ["{contestant}"]\n{body}')
    return path


def fast(duration: float, extra: str = "") -> str:
    return FAST.format(duration=duration, extra=extra)


@pytest.fixture
def slow_start(contestants_dir):
    """The reference server behind a 3 s pause, so that a run can be caught starting it."""
    text = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "slow"').replace(
        'start = "', 'start = "sleep 3; exec '
    )
    write_manifest(contestants_dir, "slow", text)
    return "slow"


@pytest.fixture
def gated_start(contestants_dir, tmp_path):
    """The reference server, started only once the test creates the file it returns: a run
    can be held mid-way, its database in use, for as long as the test needs (a timed test
    would have to outlast the start-up of a second serverlab, seconds on a loaded machine)."""
    gate = tmp_path / "gate"
    text = (
        REFERENCE_MANIFEST.replace('name = "reference"', 'name = "gated"')
        .replace('start = "', f'start = "while [ ! -e {gate} ]; do sleep 0.05; done; exec ')
        .replace("ready_timeout_s = 15", "ready_timeout_s = 300")
    )
    write_manifest(contestants_dir, "gated", text)
    return gate


class Run:
    """One `serverlab run` in the background, and what it started, found by its mark."""

    def __init__(self, suite: Path, db: Path, *extra: str, env: dict | None = None):
        self.process = subprocess.Popen(
            [*SERVERLAB, "run", str(suite), "--db", str(db), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self.mark = owner.token(self.process.pid)

    def children(self) -> list[psutil.Process]:
        found = []
        for pid in owner.owned_by(self.mark):
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid))
        return found

    def wait_for_child(self, needle: str, timeout_s: float = 60) -> psutil.Process:
        """The first of its processes whose command line holds `needle`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for child in self.children():
                try:
                    if needle in " ".join(child.cmdline()):
                        return child
                except psutil.Error:
                    continue
            assert self.process.poll() is None, self.process.stdout.read()
            time.sleep(0.05)
        raise AssertionError(f"no process with {needle!r} after {timeout_s} s")

    def finish(self, timeout_s: float = 120) -> str:
        out, _ = self.process.communicate(timeout=timeout_s)
        return out

    def leftovers(self) -> list[int]:
        """Its processes still running once it has ended (zombies do not count)."""
        alive = []
        for pid in owner.owned_by(self.mark):
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.Error:
                pass
        return alive


def rows(db: Path, query: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(query).fetchall()


def stored_tests(db: Path) -> int:
    """Tests stored so far; none while the run is still creating the database (its schema
    lands in one transaction, so a reader can see the file before the tables)."""
    try:
        return rows(db, "SELECT COUNT(*) FROM tests")[0][0]
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return 0
        raise


def run_statuses(db: Path) -> list[str]:
    return [status for (status,) in rows(db, "SELECT status FROM runs ORDER BY id")]


def wait_until(predicate, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --- nothing escapes ---------------------------------------------------------------------


def test_kill_9_while_a_server_starts_then_resume_leaves_no_orphan(slow_start, tmp_path):
    suite = write_suite(tmp_path, fast(1), contestant=slow_start)
    db = tmp_path / "lab.db"
    first = Run(suite, db, "--skip-verify")
    first.wait_for_child("sleep 3")
    first.process.kill()
    first.finish()
    orphans = first.leftovers()
    assert orphans, "the half-started server outlived the run (and must be reaped next)"
    resumed = Run(suite, db, "--skip-verify", "--resume")
    out = resumed.finish()
    assert resumed.process.returncode == 0, out
    assert "removed what dead runs left behind" in out
    assert first.leftovers() == [] and resumed.leftovers() == []
    assert run_statuses(db) == ["abandoned", "finished"]
    assert rows(db, "SELECT status FROM tests") == [("ok",)]
    assert not list((tmp_path / "work").glob(f"{first.mark}*")), "its work folder is gone"


def test_kill_9_during_verify_then_resume_leaves_no_orphan(contestants_dir, tmp_path):
    suite = write_suite(tmp_path, fast(1))
    db = tmp_path / "lab.db"
    first = Run(suite, db)
    first.wait_for_child("/verify-reference-")
    first.process.kill()
    first.finish()
    assert first.leftovers(), "verify's server outlived the run (and must be reaped next)"
    resumed = Run(suite, db, "--skip-verify", "--resume")
    assert resumed.finish() and resumed.process.returncode == 0
    assert first.leftovers() == []


def test_kill_9_during_verify_leaves_its_folder_and_secret_to_the_next_command_only(
    contestants_dir, tmp_path
):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {"TMPDIR": str(temporary)}
    suite = write_suite(tmp_path, fast(1))
    db = tmp_path / "lab.db"
    first = Run(suite, db, env=env)
    first.wait_for_child("verify-reference-")
    wait_until(lambda: list(temporary.rglob("secret.txt")))
    first.process.kill()
    first.finish()
    (secret,) = temporary.rglob("secret.txt")
    assert secret.is_file(), "what a kill -9 leaves behind, until the next command"
    # Under one root, in a folder named after the dead run (its owner mark).
    assert secret.relative_to(temporary).parts[:2] == ("serverlab", first.mark)
    resumed = Run(suite, db, "--skip-verify", "--resume", env=env)
    assert resumed.finish() and resumed.process.returncode == 0
    left = sorted(str(p.relative_to(temporary)) for p in temporary.rglob("*"))
    assert left in ([], ["serverlab"]), left


def test_a_second_run_on_a_database_in_use_is_refused_and_the_first_is_untouched(
    gated_start, tmp_path
):
    suite = write_suite(tmp_path, fast(1), contestant="gated")
    db = tmp_path / "lab.db"
    first = Run(suite, db, "--skip-verify")
    starting = first.wait_for_child(str(gated_start))
    second = Run(suite, db, "--skip-verify", "--resume")
    out = second.finish(timeout_s=60)
    assert second.process.returncode == 2, out
    assert out.strip().startswith(f"serverlab: error: {db} is in use by serverlab run (pid ")
    assert len(out.strip().splitlines()) == 1
    assert starting.is_running(), "the second run stopped nothing of the first"
    gated_start.touch()
    assert first.finish() and first.process.returncode == 0
    assert rows(db, "SELECT status FROM tests") == [("ok",)]
    assert run_statuses(db) == ["finished"]


@pytest.mark.parametrize("second_name", ["hard link", "symlink"])
def test_a_second_run_through_another_name_of_the_database_is_refused(
    gated_start, tmp_path, second_name
):
    suite = write_suite(tmp_path, fast(1), contestant="gated")
    db = tmp_path / "lab.db"
    first = Run(suite, db, "--skip-verify")
    starting = first.wait_for_child(str(gated_start))
    other = tmp_path / "other.db"
    if second_name == "hard link":
        os.link(db, other)
    else:
        other.symlink_to(db)
    second = Run(suite, other, "--skip-verify", "--resume")
    out = second.finish(timeout_s=60)
    assert second.process.returncode == 2, out
    assert out.startswith("serverlab: error: ") and len(out.strip().splitlines()) == 1
    assert f"is in use by serverlab run (pid {first.process.pid}, started " in out
    assert starting.is_running(), "the second run stopped nothing of the first"
    gated_start.touch()
    assert first.finish() and first.process.returncode == 0
    assert rows(db, "SELECT status FROM tests") == [("ok",)]
    assert run_statuses(db) == ["finished"]


def test_a_database_under_a_folder_with_spaces_quotes_and_dollars_runs_and_runs_nothing_else(
    contestants_dir, tmp_path
):
    # The server's workdir and the file set's docroot live under the database's folder.
    folder = tmp_path / "my results 'x' \"y\" $(touch M) `touch N`"
    suite = write_suite(tmp_path, fast(1, "warmup_s = 0.5"))
    run = Run(suite, folder / "lab.db", "--skip-verify")
    out = run.finish()
    assert run.process.returncode == 0, out
    assert rows(folder / "lab.db", "SELECT status FROM tests") == [("ok",)]
    assert not (tmp_path / "M").exists() and not (tmp_path / "N").exists()
    assert not (contestants_dir / "reference" / "M").exists()


# --- every signal ends a run the way Ctrl-C does -----------------------------------------

PHASES = {
    # phase: (suite extra lines, the process whose appearance means the phase has begun)
    "verify": ("", "/verify-reference-"),
    # Caught while verify waits for a server to be ready (the first one of the run).
    "verify-start": ("", "sleep 3"),
    "start": ("", "sleep 3"),
    # A warm-up run apart (priming runs come between it and the measured run), and a warm-up
    # phase inside the measured engine run (docs/warmup.md).
    "warm-up": ("warmup_s = 30\npriming_runs = 1", "warmup.json"),
    "warm-up-phase": ("warmup_s = 30", "plan.json"),
    "priming": ("priming_runs = 2", "priming-0.json"),
    "engine": ("", "plan.json"),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_ctrl_c_in_each_phase_exits_130_and_leaves_nothing(slow_start, tmp_path, phase):
    extra, needle = PHASES[phase]
    contestant = slow_start if phase in ("start", "verify-start") else "reference"
    suite = write_suite(tmp_path, fast(30, extra), contestant=contestant)
    db = tmp_path / "lab.db"
    run = Run(suite, db, *([] if phase.startswith("verify") else ["--skip-verify"]))
    run.wait_for_child(needle)
    time.sleep(0.3)
    run.process.send_signal(signal.SIGINT)
    out = run.finish(timeout_s=60)
    assert run.process.returncode == 130, out
    assert "interrupted" in out and "Traceback" not in out
    assert run.leftovers() == []
    assert run_statuses(db) == ([] if phase.startswith("verify") else ["interrupted"])
    assert rows(db, "SELECT COUNT(*) FROM tests") == [(0,)]


def test_ctrl_c_while_the_commit_waits_for_a_lock_exits_130_and_stores_nothing(
    contestants_dir, tmp_path
):
    suite = write_suite(tmp_path, fast(1))
    db = tmp_path / "lab.db"
    run = Run(suite, db, "--skip-verify", env={"SERVERLAB_DB_TIMEOUT_S": "120"})
    engine = run.wait_for_child("plan.json")
    holder = subprocess.Popen(["sqlite3", str(db)], stdin=subprocess.PIPE, text=True)
    holder.stdin.write("BEGIN EXCLUSIVE;\n")
    holder.stdin.flush()
    psutil.wait_procs([engine], timeout=30)
    time.sleep(2.0)  # the server is stopped and the commit is waiting for the lock
    assert run.process.poll() is None
    run.process.send_signal(signal.SIGINT)
    holder.stdin.close()
    holder.wait(timeout=10)
    out = run.finish(timeout_s=60)
    assert run.process.returncode == 130, out
    assert run.leftovers() == []
    assert rows(db, "SELECT COUNT(*) FROM tests") == [(0,)]
    assert run_statuses(db) == ["interrupted"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_a_closed_terminal_or_sigterm_ends_the_run_like_ctrl_c(
    contestants_dir, tmp_path, signum, code
):
    db = tmp_path / "lab.db"
    run = Run(write_suite(tmp_path, fast(30)), db, "--skip-verify")
    run.wait_for_child("plan.json")
    run.process.send_signal(signum)
    out = run.finish(timeout_s=60)
    assert run.process.returncode == code, out
    assert run.leftovers() == []
    assert run_statuses(db) == ["interrupted"]


def test_a_closed_output_pipe_ends_the_run_like_ctrl_c(contestants_dir, tmp_path):
    db = tmp_path / "lab.db"
    run = Run(write_suite(tmp_path, fast(1), repeats=20), db, "--skip-verify")
    run.process.stdout.readline()
    run.process.stdout.close()  # `serverlab run ... | head -1`
    run.process.wait(timeout=120)
    assert run.process.returncode == 128 + signal.SIGPIPE
    assert run.leftovers() == []
    assert run_statuses(db) == ["interrupted"]
    stored = rows(db, "SELECT COUNT(*) FROM tests")[0][0]
    assert stored < 20


# --- a broken database is one line, and nothing starts -----------------------------------


def test_a_full_disk_mid_run_names_the_test_and_keeps_the_ones_before(contestants_dir, tmp_path):
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], check=True)
    try:
        db = mount / "lab.db"
        run = Run(write_suite(tmp_path, fast(1.5), repeats=3), db, "--skip-verify")
        wait_until(lambda: db.exists() and stored_tests(db) >= 1, 60)
        subprocess.run(["dd", "if=/dev/zero", f"of={mount}/filler", "bs=64k"], capture_output=True)
        out = run.finish()
        assert run.process.returncode == 2, out
        last = out.strip().splitlines()[-1]
        assert (
            last.startswith("serverlab: error: ") and "disk is full; could not store test" in last
        )
        assert "Traceback" not in out
        assert run.leftovers() == []
        (mount / "filler").unlink()
        assert 1 <= rows(db, "SELECT COUNT(*) FROM tests")[0][0] < 3
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_an_immutable_database_refuses_the_run_in_one_line_before_any_server(
    contestants_dir, tmp_path
):
    db = tmp_path / "lab.db"
    sqlite3.connect(db).execute("PRAGMA user_version = 0").connection.close()
    subprocess.run(["chattr", "+i", str(db)], check=True)
    try:
        run = Run(write_suite(tmp_path, fast(1)), db)
        out = run.finish()
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert run.process.returncode == 2, out
    assert out.strip().startswith("serverlab: error: ") and "cannot be written" in out
    assert len(out.strip().splitlines()) == 1
    assert "verifying" not in out


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("immutable", "cannot be written (Operation not permitted)"),
        ("read-only mount", "cannot be written (Read-only file system)"),
        ("full disk", "the disk is full"),
    ],
)
def test_a_database_with_runs_that_cannot_be_written_is_refused_before_any_verify(
    contestants_dir, tmp_path, tmpfs, fault, reason
):
    db = tmpfs / "lab.db"
    with Store(db) as store:  # a database in use: its schema is current, it holds a run
        suite = store.add_suite(StoredSuite("t", "suite.toml", "a" * 64))
        store.finish_run(store.start_run(suite, {}).id, "finished")
    if fault == "immutable":
        subprocess.run(["chattr", "+i", str(db)], check=True)
    with contextlib.nullcontext(tmpfs) if fault == "immutable" else faulty(tmpfs, fault) as where:
        db = where / "lab.db"
        run = Run(write_suite(tmp_path, fast(1)), db)
        out = run.finish()
    assert run.process.returncode == 2, out
    assert out.startswith(f"serverlab: error: {db}") and reason in out
    assert len(out.strip().splitlines()) == 1 and "verifying" not in out
    assert run_statuses(tmpfs / "lab.db") == ["finished"]


def test_a_run_on_a_damaged_database_is_refused_before_any_verify(contestants_dir, tmp_path):
    db = tmp_path / "lab.db"
    with Store(db) as store:
        run_id = store.start_run(store.add_suite(StoredSuite("t", "suite.toml", "a" * 64)), {}).id
        for i in range(20):  # a few pages of tests
            store.commit_test(
                RecordedTest(run_id, f"p{i}", "reference", 0, "ok", 0.0, 1.0, plan={"x": "y" * 900})
            )
    (page,) = rows(db, "SELECT pageno FROM dbstat WHERE name = 'tests' AND pagetype = 'leaf'")[2]
    with open(db, "r+b") as handle:
        handle.seek((page - 1) * 4096)
        handle.write(bytes(4096))
    run = Run(write_suite(tmp_path, fast(1)), db)
    out = run.finish()
    assert run.process.returncode == 2, out
    assert out.startswith(f"serverlab: error: {db} is damaged (") and "--recover" in out
    assert len(out.strip().splitlines()) == 1 and "verifying" not in out


def test_a_damaged_database_is_one_line_with_the_way_to_recover(tmp_path):
    db = tmp_path / "lab.db"
    db.write_bytes(b"SQLite format 3\0" + b"\xa5" * 8192)
    done = subprocess.run([*SERVERLAB, "report", "--db", str(db)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("serverlab: error: ")
    assert "--recover" in done.stderr and len(done.stderr.strip().splitlines()) == 1


# --- hostile and impossible suites are refused in the dry run, with file:line -------------


@pytest.mark.parametrize(
    ("extra", "line", "reason"),
    [
        ('[scenario.tunables.reference]\nfault = "$(touch M)"', 11, "fault = '\\$\\(touch M\\)'"),
        ("[scenario.tunables.reference]\nthreads = 4", 11, "reference has no tunable 'threads'"),
        ("", 8, "clients"),
    ],
)
def test_the_dry_run_refuses_what_the_run_could_not_do(
    contestants_dir, tmp_path, extra, line, reason
):
    body = fast(1, extra)
    if not extra:
        body = body.replace("clients = 4", "clients = 1000000000000")
    suite = write_suite(tmp_path, body)
    done = subprocess.run(
        [*SERVERLAB, "run", str(suite), "--dry-run"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith(f"serverlab: error: {suite}:{line}: "), done.stderr
    assert re.search(reason, done.stderr), done.stderr
    assert not (tmp_path / "M").exists()


def test_serve_refuses_a_hostile_value_before_starting(contestants_dir, tmp_path):
    done = subprocess.run(
        [*SERVERLAB, "serve", "reference", "--port", "1", "--set", "die_after=$(touch M)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "serverlab: error: reference: die_after = '$(touch M)': expected a number in 0.."
    )
    assert not (tmp_path / "M").exists()
