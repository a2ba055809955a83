import csv
import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import faulty

from serverlab.results import dblock
from serverlab.results.export import export_csv
from serverlab.results.migrations import migration_steps
from serverlab.results.records import (
    Crash,
    EmitCycle,
    EmitRecord,
    EngineInterval,
    MonitorSample,
    RecordedTest,
    RuntimeSignal,
    ServerStats,
    StoredSuite,
)
from serverlab.results.recovery import recover as export_recover
from serverlab.results.report.flags.validity import flags_for
from serverlab.results.store import Store, StoreError


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "results" / "lab.db"


def stored_suite(store, name="quick", sha="a" * 64):
    return store.add_suite(
        StoredSuite(name=name, path=f"suites/{name}.toml", sha256=sha, scale=0.2)
    )


def two_cycles() -> list[EmitCycle]:
    return [
        EmitCycle(event="e1", seq=1, created_ms=1000, received=3, total=3,
                  delay_histogram="HISTFAAAAB94nJNp", first_arrival_ms=1001.5,
                  last_arrival_ms=1003.25, drain_us=420, drain_samples=3),
        EmitCycle(event="e1", seq=2, created_ms=2000, received=2, total=3,
                  delay_histogram="HISTFAAAAB94nJNp", first_arrival_ms=2001.0,
                  last_arrival_ms=2002.0, drain_samples=0),
    ]  # fmt: skip


def full_test(run_id, key="longpoll|node-http|clients=1000|", repeat=0, status="ok"):
    return RecordedTest(
        run_id=run_id,
        permutation_key=key,
        scenario="longpoll",
        contestant="node-http",
        repeat_index=repeat,
        status=status,
        started_at=1_700_000_000.0,
        ended_at=1_700_000_012.5,
        params={"behaviour": "longpoll", "clients": 1000, "emit_interval_ms": 1000},
        tunables={"threads": "200"},
        validity={"rate_shortfall": "achieved 950/s of 1000/s"},
        summary={"type": "summary", "requests": 12000, "rps": 1000.0, "errors": {}},
        intervals=[
            EngineInterval(seq=i, t=float(i + 1), data={"completed": 1000}) for i in range(3)
        ],
        samples=[
            MonitorSample(t=i / 10, cpu_percent=40.0 + i, rss_bytes=50_000_000, threads=9)
            for i in range(5)
        ],
        histograms={"latency_us": "HISTFAAAAB94nJNpmSzMwMDAxQABzFCaEUzbLPoAEU"},
        server_stats=[ServerStats(t=12.4, stats={"responses": {"total": 11999}})],
        emits=[
            EmitRecord("e1", 1, place, 3, 2.0 * place, 1000, 1000 + place) for place in (1, 2, 3)
        ],
        cycles=two_cycles(),
        signals=[
            RuntimeSignal(t=2.5, kind="gc_pause", value=4.2, data={"gc": "scavenge"}),
            RuntimeSignal(t=2.6, kind="loop_delay", value=11.0, data={"p99": 10.5}),
        ],
        plan={"version": 1, "key": key, "measured": {"target": "http://{host}:{port}/push"}},
        run_info={"ports": {"http": 40123}, "priming": [{"requests": 10}]},
    )


def test_round_trip_keeps_every_field(db_path):
    with Store(db_path) as store:
        suite = stored_suite(store)
        run = store.start_run(suite, {"kernel": "6.1", "cores": 2})
        written = full_test(run.id)
        store.commit_test(written)
        store.finish_run(run.id, "finished")

    with Store(db_path) as store:
        (run,) = store.runs()
        assert (run.status, run.machine["cores"]) == ("finished", 2)
        assert run.ended_at is not None
        (read,) = store.tests([run.id])
        store.load_details(read)
    assert read == written


def test_crash_details_survive_the_round_trip(db_path):
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {})
        crashed = full_test(run.id, status="crashed")
        crashed.crash = Crash(time=4.2, exit_code=None, signal=9, oom=True)
        crashed.summary = None
        store.commit_test(crashed)
        (read,) = store.tests()
    assert read.crash == Crash(time=4.2, exit_code=None, signal=9, oom=True)
    assert read.summary is None


def test_add_suite_returns_the_same_row_for_the_same_file(db_path):
    with Store(db_path) as store:
        first = stored_suite(store)
        again = stored_suite(store)
        edited = stored_suite(store, sha="b" * 64)
    assert first.id == again.id
    assert edited.id != first.id


def test_finished_keys_cover_results_but_not_abandoned_tests_nor_other_suites(db_path):
    with Store(db_path) as store:
        suite = stored_suite(store)
        other = stored_suite(store, name="full")
        run = store.start_run(suite, {})
        for repeat, status in enumerate(("ok", "crashed", "invalid")):
            store.commit_test(full_test(run.id, key="p", repeat=repeat, status=status))
        store.commit_test(full_test(store.start_run(other, {}).id, key="q"))
        with pytest.raises(ValueError, match="test status"):
            store.commit_test(full_test(run.id, key="p", repeat=3, status="abandoned"))
    # The schema still holds what a version before this one may have written.
    with sqlite3.connect(db_path) as raw:
        raw.execute(
            "INSERT INTO tests (run_id, permutation_key, contestant, repeat_index, status,"
            " started_at, ended_at) VALUES (?, 'p', 'node-http', 3, 'abandoned', 0, 1)",
            (run.id,),
        )
    with Store(db_path) as store:
        assert store.finished_test_keys(suite) == {"p#r0", "p#r1", "p#r2"}


def test_a_failure_inside_commit_leaves_nothing_of_the_test(db_path):
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {})
        broken = full_test(run.id)
        # The emit records are written last; a bad one fails the insert after every other
        # table of this test already received rows inside the transaction.
        broken.emits.append(EmitRecord("e1", 1, 3, 3, None))
        with pytest.raises(StoreError, match="could not store test .*NOT NULL"):
            store.commit_test(broken)
        counts = {
            table: store._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in store.table_names()
            if table not in ("suites", "runs")
        }
        assert counts == dict.fromkeys(counts, 0)
        store.commit_test(full_test(run.id))
        assert len(store.tests()) == 1


def test_an_unknown_status_is_refused_before_writing(db_path):
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {})
        with pytest.raises(ValueError, match="status"):
            store.commit_test(full_test(run.id, status="great"))
        with pytest.raises(ValueError, match="run status"):
            store.finish_run(run.id, "done")
        assert store.tests() == []


def test_an_old_database_is_upgraded_and_keeps_its_data(db_path):
    db_path.parent.mkdir(parents=True)
    old = sqlite3.connect(db_path)
    old.executescript(migration_steps()[0] + "\nPRAGMA user_version = 1;")
    old.execute(
        "INSERT INTO suites (id, name, path, sha256, scale, created_at)"
        " VALUES (1, 'quick', 'suites/quick.toml', 'abc', 1.0, 0)"
    )
    old.execute("INSERT INTO runs (id, suite_id, started_at, status) VALUES (1, 1, 0, 'finished')")
    old.execute(
        "INSERT INTO tests (run_id, permutation_key, contestant, repeat_index, status,"
        " started_at, ended_at) VALUES (1, 'p', 'node-http', 0, 'ok', 0, 1)"
    )
    old.commit()
    old.close()

    with Store(db_path) as store:
        assert store.schema_version == len(migration_steps())
        assert "emit_records" in store.table_names()
        (kept,) = store.tests()
        assert (kept.contestant, kept.key) == ("node-http", "p#r0")
        assert store.finished_test_keys(1) == {"p#r0"}
        # The tables added by the upgrade take rows like any other.
        kept.emits = [EmitRecord("e1", 1, 1, 1, 1.0)]
        kept.id = None
        store.commit_test(kept)


def test_run_time_outcomes_move_out_of_the_params_that_identify_a_test(db_path):
    """Schema 5: what older versions wrote into params at run time (priming outcomes, the
    link's namespace, the engine plan with its port) moves to run_info; the identity and
    the scenario's own parameters stay as they were."""
    db_path.parent.mkdir(parents=True)
    old = sqlite3.connect(db_path)
    old.executescript("".join(step + "\n" for step in migration_steps()[:4]))
    old.execute("PRAGMA user_version = 4")
    old.execute(
        "INSERT INTO suites (id, name, path, sha256, scale, created_at)"
        " VALUES (1, 'seed-003', 's.toml', 'abc', 1.0, 0)"
    )
    old.execute("INSERT INTO runs (id, suite_id, started_at, status) VALUES (1, 1, 0, 'finished')")
    params = {
        "behaviour": "new-connection",
        "clients": 10000,
        "priming": [{"requests": 20000, "ok": 20000}],
        "link_as_run": {"name": "serverlab-1-2-0", "rate_mbit": 10},
        "engine_plan": {"target": "http://127.0.0.1:40123/perf"},
    }
    old.execute(
        "INSERT INTO tests (run_id, permutation_key, contestant, repeat_index, status,"
        " started_at, ended_at, params_json) VALUES (1, 'p', 'node-http', 0, 'ok', 0, 1, ?)",
        (json.dumps(params),),
    )
    old.commit()
    old.close()
    with Store(db_path) as store:
        (test,) = store.tests()
    assert test.params == {"behaviour": "new-connection", "clients": 10000}
    assert test.run_info == {
        "priming": params["priming"],
        "link": params["link_as_run"],
        "engine_plan": params["engine_plan"],
    }
    assert (test.key, test.plan) == ("p#r0", None)


def test_a_failed_upgrade_leaves_the_old_database_as_it_was(db_path):
    db_path.parent.mkdir(parents=True)
    old = sqlite3.connect(db_path)
    # A stray table that the second step also creates makes that step fail part-way.
    old.executescript(
        migration_steps()[0] + "\nCREATE TABLE emit_records (x);\nPRAGMA user_version = 1;"
    )
    old.close()
    with pytest.raises(StoreError, match="emit_records already exists"):
        Store(db_path)
    check = sqlite3.connect(db_path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == 1
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "server_stats" not in tables
    check.close()


def test_a_database_from_a_newer_serverlab_is_refused(db_path):
    db_path.parent.mkdir(parents=True)
    newer = sqlite3.connect(db_path)
    newer.execute(f"PRAGMA user_version = {len(migration_steps()) + 1}")
    newer.close()
    with pytest.raises(StoreError, match="newer than this serverlab knows"):
        Store(db_path)


def test_a_file_that_is_not_a_database_gets_a_clear_error(db_path):
    db_path.parent.mkdir(parents=True)
    db_path.write_text("this is a text file, not SQLite\n" * 100)
    with pytest.raises(StoreError, match="is damaged .*serverlab export --db .* --recover NEW.db"):
        Store(db_path)


def test_the_way_to_recover_names_a_path_with_spaces_as_one_argument(tmp_path):
    db = tmp_path / "my results" / "lab $1.db"
    db.parent.mkdir()
    db.write_text("not SQLite\n" * 100)
    with pytest.raises(StoreError) as caught:
        Store(db)
    command = str(caught.value).split("Save what can be read: ")[1]
    assert shlex.split(command) == ["serverlab", "export", "--db", str(db), "--recover", "NEW.db"]


def test_opening_a_missing_database_for_reading_is_an_error(db_path):
    with pytest.raises(StoreError, match="no results database"):
        Store(db_path, create=False)
    assert not db_path.exists()


def test_the_database_is_in_wal_mode(db_path):
    with Store(db_path) as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_export_writes_every_table_with_its_rows(db_path, tmp_path):
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {"kernel": "6.1"})
        store.commit_test(full_test(run.id))
    files = export_csv(db_path, tmp_path / "csv")
    names = sorted(f.stem for f in files)
    assert names == sorted(
        [
            "emit_cycles",
            "emit_records",
            "engine_intervals",
            "histograms",
            "monitor_samples",
            "runs",
            "runtime_signals",
            "server_stats",
            "suites",
            "tests",
        ]
    )
    with (tmp_path / "csv" / "monitor_samples.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 5
    assert rows[2]["cpu_percent"] == "42.0"
    with (tmp_path / "csv" / "tests.csv").open() as handle:
        (test_row,) = list(csv.DictReader(handle))
    assert test_row["contestant"] == "node-http"
    assert '"clients":1000' in test_row["params_json"]


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from serverlab.results.records import MonitorSample, RecordedTest, StoredSuite
    from serverlab.results.store import Store

    def samples():
        for i in range(1000):
            if i == 500:
                print("inside the transaction", flush=True)
                time.sleep(60)
            yield MonitorSample(t=i / 10, cpu_percent=1.0)

    with Store(sys.argv[1]) as store:
        run = store.start_run(store.add_suite(StoredSuite("quick", "q.toml", "a" * 64)), {})
        store.commit_test(RecordedTest(
            run_id=run.id, permutation_key="p", contestant="node-http", repeat_index=0,
            status="ok", started_at=0.0, ended_at=1.0, samples=samples(),
            intervals=[], emits=[]))
    """
)


def test_a_writer_killed_in_the_middle_of_a_commit_leaves_no_half_test(db_path):
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(db_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "inside the transaction"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
    with Store(db_path) as store:
        assert len(store.runs()) == 1
        assert store.tests() == []
        assert store._db.execute("SELECT COUNT(*) FROM monitor_samples").fetchone()[0] == 0
        assert store.finished_test_keys(1) == set()


# --- a run's own process, and faults of the file itself --------------------------------

DIES_RUNNING = """
import os, signal, sys
from serverlab.results.records import StoredSuite
from serverlab.results.store import Store
with Store(sys.argv[1]) as store:
    suite = store.add_suite(StoredSuite(name="q", path="q.toml", sha256="b" * 64))
    run = store.start_run(suite, {})
    print(run.id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_run_whose_process_died_is_marked_abandoned_and_a_live_one_is_kept(db_path):
    with Store(db_path) as store:
        live = store.start_run(stored_suite(store), {})
    done = subprocess.run([sys.executable, "-c", DIES_RUNNING, str(db_path)], capture_output=True)
    assert done.returncode == -signal.SIGKILL
    dead_id = int(done.stdout)
    with Store(db_path) as store:
        assert store.mark_abandoned() == [dead_id]
        status = {run.id: run.status for run in store.runs()}
        mine = next(run for run in store.runs() if run.id == live.id)
    assert status == {live.id: "running", dead_id: "abandoned"}
    assert (mine.pid, mine.host) == (os.getpid(), socket.gethostname())


def stored_tests(db_path, count=3) -> list[str]:
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {})
        keys = [f"k{i}|node-http||" for i in range(count)]
        for key in keys:
            store.commit_test(full_test(run.id, key=key))
    return keys


def readable_keys(db_path) -> list[str]:
    with Store(db_path, create=False) as store:
        return [test.permutation_key for test in store.tests()]


def test_a_full_disk_names_the_test_it_could_not_store_and_keeps_the_rest(tmpfs):
    db = tmpfs / "lab.db"
    keys = stored_tests(db)
    with Store(db) as store:
        run = store.start_run(stored_suite(store), {})
        filler = tmpfs / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        big = full_test(run.id, key="lost|node-http||")
        big.samples *= 2000  # more than the few bytes left
        with pytest.raises(StoreError, match=r"disk is full; could not store test lost\|"):
            store.commit_test(big)
    filler.unlink()
    assert readable_keys(db) == keys


def test_an_immutable_database_is_a_one_line_error_and_stays_readable(tmpfs):
    db = tmpfs / "lab.db"
    keys = stored_tests(db)
    subprocess.run(["chattr", "+i", str(db)], check=True)
    with (
        pytest.raises(StoreError, match="cannot be written .*pass another --db"),
        Store(db) as store,
    ):
        store.start_run(stored_suite(store), {})
    assert readable_keys(db) == keys


def test_a_read_only_mount_is_a_one_line_error_and_stays_readable(tmpfs, tmp_path):
    db = tmpfs / "lab.db"
    keys = stored_tests(db)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    subprocess.run(["mount", "--bind", str(tmpfs), str(read_only)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(read_only)], check=True)
        with (
            pytest.raises(StoreError, match="cannot be written|read-only"),
            Store(read_only / "lab.db") as store,
        ):
            store.start_run(stored_suite(store), {})
        assert readable_keys(read_only / "lab.db") == keys
    finally:
        subprocess.run(["umount", "-l", str(read_only)], check=True)


def test_a_lock_held_too_long_is_a_one_line_error(db_path, monkeypatch):
    keys = stored_tests(db_path)
    holder = subprocess.Popen(
        ["sqlite3", str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    holder.stdin.write("BEGIN EXCLUSIVE;\nSELECT 'held';\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "held"
    monkeypatch.setenv("SERVERLAB_DB_TIMEOUT_S", "1")
    try:
        with Store(db_path) as store:
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"locked by another process; could not store"):
                store.commit_test(full_test(store.runs()[0].id, key="late|x||"))
            assert 1 <= time.monotonic() - started < 5
        assert readable_keys(db_path) == keys, "readers are not blocked by the writer"
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def corrupt_a_middle_page(db_path) -> None:
    page = 4096
    size = db_path.stat().st_size
    with open(db_path, "r+b") as handle:
        handle.seek((size // page // 2) * page)
        handle.write(b"\xa5" * page)


def test_a_damaged_database_says_how_to_recover_and_recovery_keeps_the_readable_rows(
    db_path, tmp_path
):
    keys = stored_tests(db_path, count=40)
    corrupt_a_middle_page(db_path)
    with (
        pytest.raises(StoreError, match=r"is damaged .*serverlab export --db .* --recover"),
        Store(db_path, create=False) as store,
    ):
        for test in store.tests():
            store.load_details(test)
    kept = {found.table: found.kept for found in export_recover(db_path, tmp_path / "saved.db")}
    assert kept["suites"] == 1 and kept["runs"] == 1
    assert 0 < kept["tests"] <= 40 and 0 < kept["monitor_samples"] <= 40 * 5
    saved = readable_keys(tmp_path / "saved.db")
    assert set(saved) <= set(keys) and len(saved) == kept["tests"]
    with sqlite3.connect(tmp_path / "saved.db") as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with pytest.raises(StoreError, match="exists already"):
        export_recover(db_path, tmp_path / "saved.db")


# --- one writer per file, whatever its name ---------------------------------------------

HOLDS_THE_LOCK = """
import sys
from pathlib import Path
from serverlab.results import dblock
with dblock.hold(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def lock_holder(db_path):
    """Another process that holds the writer lock of db_path until the test ends."""
    stored_tests(db_path, count=1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDS_THE_LOCK, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    yield holder
    holder.stdin.close()
    holder.wait(timeout=10)


def test_a_symlinked_name_of_a_database_in_use_is_refused_naming_the_holder(
    db_path, lock_holder, tmp_path
):
    other = tmp_path / "other.db"
    other.symlink_to(db_path)
    with pytest.raises(dblock.DatabaseBusyError) as refused, dblock.hold(other):
        pass
    said = str(refused.value)
    program = os.path.basename(sys.executable)
    assert said.startswith(f"{other} is in use by {program} (pid {lock_holder.pid}, started ")
    assert said.endswith("wait for it to finish, or pass another --db") and "\n" not in said


def test_a_hard_linked_database_is_refused_whether_or_not_a_run_holds_it(
    db_path, lock_holder, tmp_path
):
    hard = tmp_path / "hard.db"
    os.link(db_path, hard)
    with pytest.raises(dblock.DatabaseBusyError, match=f"pid {lock_holder.pid}"), dblock.hold(hard):
        pass
    lock_holder.stdin.close()
    lock_holder.wait(timeout=10)
    for name in (db_path, hard):
        with (
            pytest.raises(StoreError, match="has 2 hard links.*pass another --db"),
            dblock.hold(name),
        ):
            pass
    hard.unlink()
    with dblock.hold(db_path):
        pass


def sqlite_locks_of_this_process(path) -> list[str]:
    st = os.stat(path)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    # Each line without its leading ordinal ("8: "), which is the lock's place in the whole
    # machine's list and moves as other processes take and drop locks.
    with open("/proc/locks") as locks:
        return [
            line.split(":", 1)[1]
            for line in locks
            if " POSIX " in line and f" {os.getpid()} {inode} " in line
        ]


def test_the_lock_never_closes_a_descriptor_that_would_drop_sqlites_own_locks(db_path):
    with Store(db_path) as store:
        store.tests()  # in WAL mode a connection holds a shared POSIX lock on the file
        before = sqlite_locks_of_this_process(db_path)
        assert before
        for name in (db_path, db_path.parent / ".." / db_path.parent.name / db_path.name):
            with dblock.hold(name):
                pass
        assert sqlite_locks_of_this_process(db_path) == before


# --- recovery keeps every readable row --------------------------------------------------

SERVERLAB = [str(Path(sys.executable).parent / "serverlab")]
TABLES = [
    *("suites", "runs", "tests", "engine_intervals", "monitor_samples"),
    *("histograms", "server_stats", "emit_records", "emit_cycles", "runtime_signals"),
]


def a_real_database(db_path, tests=12) -> None:
    """Tests made by the real store, big enough that each table spans several pages."""
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {"kernel": "6.1"})
        for i in range(tests):
            test = full_test(run.id, key=f"k{i}|node-http||")
            test.summary["detail"] = "x" * 1500  # two tests a page
            test.samples *= 20
            store.commit_test(test)
        store.finish_run(run.id, "finished")


def pages_of(db_path, table: str, kind: str) -> list[int]:
    with sqlite3.connect(db_path) as db:
        query = "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ? ORDER BY pageno"
        return [row[0] for row in db.execute(query, (table, kind))]


def zero_pages(db_path, pages) -> None:
    with open(db_path, "r+b") as handle:
        for page in pages:
            handle.seek((page - 1) * 4096)
            handle.write(bytes(4096))


def rows_read_one_by_one(db_path, table: str, rowids) -> dict[int, tuple]:
    """What sqlite3 still reads of each row when asked for it alone."""
    readable = {}
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        for rowid in rowids:
            try:
                row = db.execute(f"SELECT rowid, * FROM {table} WHERE rowid = ?", (rowid,))
                readable.update((r[0], r[1:]) for r in row.fetchall())
            except sqlite3.DatabaseError:
                pass
    return readable


def without_partial(db_path, tests: dict[int, tuple]) -> dict[int, tuple]:
    """Rows of `tests` with recovery's `partial` mark taken out of their validity."""
    with sqlite3.connect(db_path) as db:
        at = [c[1] for c in db.execute("PRAGMA table_info(tests)")].index("validity_json")

    def unmarked(row: tuple) -> tuple:
        validity = json.loads(row[at])
        validity.pop("partial", None)
        return (
            *row[:at],
            json.dumps(validity, sort_keys=True, separators=(",", ":")),
            *row[at + 1 :],
        )

    return {rowid: unmarked(row) for rowid, row in tests.items()}


def all_rows(db_path, table: str) -> dict[int, tuple]:
    with sqlite3.connect(db_path) as db:
        return {r[0]: r[1:] for r in db.execute(f"SELECT rowid, * FROM {table}")}


def test_recovery_keeps_every_row_sqlite_can_still_read_one_by_one(db_path, tmp_path):
    a_real_database(db_path)
    rowids = {table: sorted(all_rows(db_path, table)) for table in TABLES}
    tests, samples = (
        pages_of(db_path, "tests", "leaf"),
        pages_of(db_path, "monitor_samples", "leaf"),
    )
    # Damage inside each table, and the last page of one (no row after it to resume from).
    zero_pages(db_path, [tests[1], tests[4], samples[2], samples[-1]])
    readable = {table: rows_read_one_by_one(db_path, table, rowids[table]) for table in TABLES}
    assert 0 < len(readable["tests"]) < 12

    found = {t.table: t for t in export_recover(db_path, tmp_path / "saved.db")}

    saved = {table: all_rows(tmp_path / "saved.db", table) for table in TABLES}
    # Kept as read, but for the mark of the tests around the lost samples (test below).
    assert without_partial(db_path, saved["tests"]) == readable["tests"]
    marked = {i for i, row in saved["tests"].items() if row != readable["tests"][i]}
    assert marked and sorted(marked) == found["monitor_samples"].partial
    kept_tests = set(saved["tests"])
    for table in TABLES[3:]:
        wanted = {k: v for k, v in readable[table].items() if v[0] in kept_tests}
        assert saved[table] == wanted, table
        assert found[table].kept == len(wanted)
    assert found["tests"].lost and found["monitor_samples"].lost[-1][1] == 2**63 - 1
    with sqlite3.connect(tmp_path / "saved.db") as check:
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_recovery_prints_per_table_what_it_kept_and_the_rowids_it_lost(db_path, tmp_path):
    a_real_database(db_path)
    first_leaf_of_tests = pages_of(db_path, "tests", "leaf")[0]
    zero_pages(db_path, [first_leaf_of_tests])
    done = subprocess.run(
        [*SERVERLAB, "export", "--db", str(db_path), "--recover", str(tmp_path / "saved.db")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert "tests: 10 rows kept; lost: rowids 1-2 (at most 2 rows)" in said
    assert "suites: 1 rows kept" in said
    assert "monitor_samples: 1000 rows kept; 200 rows dropped: their row in tests was lost" in said


def a_database_of_push_tests(db_path, tests=12) -> None:
    """Push tests whose emit records, emit cycles and runtime signals span several pages."""
    with Store(db_path) as store:
        run = store.start_run(stored_suite(store), {"kernel": "6.1"})
        for i in range(tests):
            test = full_test(run.id, key=f"k{i}|node-http||")
            test.validity = {}
            test.emits *= 40
            test.cycles *= 60
            test.signals *= 60
            store.commit_test(test)
        store.finish_run(run.id, "finished")


def owners_of(db_path, table: str) -> dict[int, int]:
    with sqlite3.connect(db_path) as db:
        return dict(db.execute(f"SELECT rowid, test_id FROM {table}"))


CHILDREN = ("emit_records", "emit_cycles", "runtime_signals")


def test_a_test_that_lost_rows_of_its_own_is_kept_marked_partial_with_its_figures_flagged(
    db_path, tmp_path
):
    a_database_of_push_tests(db_path)
    owners = {table: owners_of(db_path, table) for table in CHILDREN}
    # One page of each table, from the middle of it.
    pages = [pages_of(db_path, table, "leaf") for table in CHILDREN]
    zero_pages(db_path, [leaves[len(leaves) // 2] for leaves in pages])
    readable = {t: rows_read_one_by_one(db_path, t, owners[t]) for t in CHILDREN}
    lost_by = {t: {owners[t][r] for r in owners[t] if r not in readable[t]} for t in CHILDREN}
    assert all(lost_by.values()), "each damaged page held some test's rows"

    found = {t.table: t for t in export_recover(db_path, tmp_path / "saved.db")}

    with Store(tmp_path / "saved.db") as saved:
        tests = {test.id: test for test in saved.tests()}
    assert len(tests) == 12, "every test is kept"
    for table in CHILDREN:
        marked = {i for i, t in tests.items() if table in t.validity.get("partial", {})}
        assert lost_by[table] <= marked, table
        # Only the tests around the damage: a page's owners and at most its two neighbours.
        assert len(marked) <= len(lost_by[table]) + 2, (table, marked, lost_by[table])
        assert sorted(marked) == found[table].partial
        assert "marked partial, their figures flagged: tests" in found[table].describe()
    for test in tests.values():
        partial = "partial" in test.validity
        assert partial == any(test.id in found[t].partial for t in CHILDREN)
        codes = {f.code for metric in ("p50", "p99", "rps") for f in flags_for(test, metric)}
        assert ("partial" in codes) == partial, test.validity
    untouched = set(tests) - set().union(*(found[t].partial for t in CHILDREN))
    assert untouched, "tests far from the damage stay unflagged"


KILLED_MID_RUN = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from test_store import full_test, stored_suite
from serverlab.results.store import Store
store = Store(sys.argv[1])
run = store.start_run(stored_suite(store), {})
for i in range(5):
    store.commit_test(full_test(run.id, key=f"k{i}|node-http||"))
os.kill(os.getpid(), signal.SIGKILL)
"""


def a_run_killed_mid_run(db) -> None:
    """A real process that stores 5 tests in WAL mode and is killed with -9: they are in
    the log only, never copied into the database file."""
    tests_dir = str(Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", KILLED_MID_RUN, str(db), tests_dir])
    assert done.returncode == -signal.SIGKILL
    assert Path(f"{db}-wal").stat().st_size > 0


def a_closed_database(db) -> None:
    """5 tests stored by a process that ended cleanly: no log and no -shm beside it."""
    with Store(db) as store:
        run = store.start_run(stored_suite(store), {})
        for i in range(5):
            store.commit_test(full_test(run.id, key=f"k{i}|node-http||"))
    assert not Path(f"{db}-wal").exists()


@pytest.mark.parametrize("fault", ["read-only mount", "full disk"])
@pytest.mark.parametrize("made_by", [a_run_killed_mid_run, a_closed_database])
def test_recovery_reads_a_database_on_a_read_only_or_full_disk(tmpfs, tmp_path, fault, made_by):
    made_by(tmpfs / "lab.db")
    with faulty(tmpfs, fault) as where:
        found = {t.table: t.kept for t in export_recover(where / "lab.db", tmp_path / "saved.db")}
    assert (found["runs"], found["tests"], found["monitor_samples"]) == (1, 5, 25)
    assert readable_keys(tmp_path / "saved.db") == [f"k{i}|node-http||" for i in range(5)]


def test_recovery_into_a_full_disk_leaves_no_file_at_all(db_path, tmpfs):
    stored_tests(db_path, count=20)
    subprocess.run(["dd", "if=/dev/zero", f"of={tmpfs}/filler", "bs=64k"], capture_output=True)
    with pytest.raises(StoreError, match=r"could not write .*saved.db .*nothing was written"):
        export_recover(db_path, tmpfs / "saved.db")
    assert sorted(p.name for p in tmpfs.iterdir()) == ["filler"]


def test_recovery_that_can_read_nothing_exits_2_and_writes_nothing(tmp_path):
    db = tmp_path / "lab.db"
    db.write_bytes(b"SQLite format 3\0" + b"\xa5" * 8192)
    done = subprocess.run(
        [*SERVERLAB, "export", "--db", str(db), "--recover", str(tmp_path / "saved.db")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("serverlab: error: ") and len(done.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.db"]


def test_recovery_of_a_database_a_run_is_writing_is_refused(db_path, lock_holder, tmp_path):
    with pytest.raises(StoreError, match=f"being written by .*pid {lock_holder.pid}"):
        export_recover(db_path, tmp_path / "saved.db")


# --- every command on a damaged database: one line, exit 2 ------------------------------


def undecodable_text(db_path) -> None:
    """Bytes inside stored text changed, the pages themselves intact: SQLite reads the row,
    Python cannot decode it."""
    data = db_path.read_bytes()
    assert b"k3|node-http||" in data
    db_path.write_bytes(data.replace(b"k3|node-http||", b"k3|\xff\xfede-http||"))


@pytest.mark.parametrize("damage", ["undecodable text", "a zeroed page"])
def test_every_command_on_a_damaged_database_prints_one_line_and_exits_2(db_path, tmp_path, damage):
    a_real_database(db_path)
    if damage == "a zeroed page":
        zero_pages(db_path, pages_of(db_path, "tests", "leaf")[2:3])
    else:
        undecodable_text(db_path)
    for command in (
        ["export", "--csv", str(tmp_path / "csv")],
        ["report", "-o", str(tmp_path / "report.html")],
        ["compare", "run:1", "run:1"],
    ):
        done = subprocess.run(
            [*SERVERLAB, *command, "--db", str(db_path)], capture_output=True, text=True
        )
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith(f"serverlab: error: {db_path} is damaged ("), command
        assert len(done.stderr.splitlines()) == 1 and "--recover" in done.stderr
    assert not (tmp_path / "csv" / "tests.csv").exists()
    assert not [p for p in (tmp_path / "csv").iterdir() if p.name.startswith(".")]


def test_older_runs_get_a_fingerprint_and_versions_from_what_their_machine_said(db_path):
    """Schema 7: a run recorded before fingerprints gets one from its machine metadata (its
    governor unknown); its versions go beside it; a run with no metadata gets neither."""
    db_path.parent.mkdir(parents=True)
    old = sqlite3.connect(db_path)
    old.executescript("".join(step + "\n" for step in migration_steps()[:6]))
    old.execute("PRAGMA user_version = 6")
    old.execute(
        "INSERT INTO suites (id, name, path, sha256, scale, created_at)"
        " VALUES (1, 'quick', 'q.toml', 'abc', 1.0, 0)"
    )
    machine = {
        "cpu_model": "Xeon",
        "cpus": 2,
        "kernel": "6.1.0",
        "memory_bytes": 24 * 1024**3 - 5 * 1024**2,
        "contestant_versions": {"node-http": "v20.20.0"},
        "tools": {"node": "v20.20.0"},
    }
    for run_id, text in ((1, json.dumps(machine)), (2, "{}")):
        old.execute(
            "INSERT INTO runs (id, suite_id, started_at, status, machine_json)"
            " VALUES (?, 1, 0, 'finished', ?)",
            (run_id, text),
        )
    old.commit()
    old.close()
    with Store(db_path) as store:
        first, second = store.runs()
    assert first.fingerprint == {
        "cpu_model": "Xeon",
        "cpus": 2,
        "kernel": "6.1.0",
        "memory_gib": 24,
        "governor": None,
    }
    assert first.versions == {
        "contestants": {"node-http": "v20.20.0"},
        "tools": {"node": "v20.20.0"},
    }
    assert len(first.fingerprint_id) == 10
    assert (second.fingerprint, second.versions, second.fingerprint_id) == ({}, {}, "")


def test_a_run_keeps_its_fingerprint_apart_from_its_versions(db_path):
    print_ = {"cpu_model": "X", "cpus": 2, "kernel": "6.1", "memory_gib": 24, "governor": None}
    with Store(db_path) as store:
        run = store.start_run(
            stored_suite(store), {}, fingerprint=print_, versions={"engine": "e 1 (sha256 ab)"}
        )
        (stored,) = store.runs()
    assert (stored.fingerprint, stored.versions) == (print_, {"engine": "e 1 (sha256 ab)"})
    assert stored.fingerprint_id == run.fingerprint_id != ""
