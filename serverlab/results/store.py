"""The results database: one SQLite file (``results/lab.db`` by default) in WAL mode, and the
mapping of the records (serverlab.results.records: suites, runs, tests and what was measured
during each) to its rows and back.

The runner's side of the API, in order::

    with Store(db_path) as store:
        suite = store.add_suite(StoredSuite.from_file(path, scale=0.2))
        done = store.finished_test_keys(suite)          # for --resume
        run = store.start_run(suite, machine_metadata)
        for each permutation and repeat whose make_test_key(...) is not in done:
            store.commit_test(RecordedTest(run_id=run.id, ...))   # all or nothing
        store.finish_run(run.id, "finished")           # or "interrupted" / "failed"

The schema is versioned with ``PRAGMA user_version`` and upgraded by the steps in
``serverlab/results/migrations/`` when an older database is opened; a database written by a newer
serverlab is refused rather than guessed at.

Every SQLite failure (a read-only or full file, a damaged one, a lock held too long) comes
out as one ``StoreError`` sentence that says what to do; what was committed stays intact.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import fields
from pathlib import Path
from typing import Any

from serverlab.base import owner
from serverlab.results.migrations import migration_steps
from serverlab.results.records import (
    RUN_STATUSES,
    TEST_STATUSES,
    Crash,
    EmitCycle,
    EmitRecord,
    EngineInterval,
    MonitorSample,
    RecordedTest,
    Run,
    RuntimeSignal,
    ServerStats,
    StoredSuite,
    make_test_key,
)

DEFAULT_DB = Path("results/lab.db")
# Tests with a result; an older version's 'abandoned' rows are not among them.
FINISHED_TEST_STATUSES = TEST_STATUSES
# How long a write waits for another process's lock before it gives up.
BUSY_TIMEOUT_ENV = "SERVERLAB_DB_TIMEOUT_S"
DEFAULT_BUSY_TIMEOUT_S = 30.0
# Each try waits this long inside SQLite: short, so that Ctrl-C is seen between tries.
_BUSY_STEP_S = 0.1
# The columns of the tables that hold a record's fields as they are, in its fields' order.
SAMPLE_COLUMNS = tuple(f.name for f in fields(MonitorSample))
CYCLE_COLUMNS = tuple(f.name for f in fields(EmitCycle))


class StoreError(Exception):
    """The results database cannot be used; the message says why and what to do."""


def _explain(path: Path, error: sqlite3.Error, doing: str) -> StoreError:
    """One sentence for a SQLite failure: what happened and what the user can do."""
    text = str(error)
    lowered = text.lower()
    if "full" in lowered:
        return StoreError(
            f"{path}: the disk is full; could not {doing}. Free some space; "
            "every test stored before is intact (--resume continues)"
        )
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return StoreError(
            f"{path} cannot be written ({text}); could not {doing}. Make it "
            "writable or pass another --db"
        )
    # SQLite returns damaged text as it finds it; Python fails to decode it.
    damaged = ("malformed", "not a database", "corrupt", "could not decode")
    if any(word in lowered for word in damaged):
        return StoreError(
            f"{path} is damaged ({text}); could not {doing}. Save what can be "
            f"read: serverlab export --db {shlex.quote(str(path))} --recover NEW.db"
        )
    if "locked" in lowered or "busy" in lowered:
        return StoreError(
            f"{path} is locked by another process; could not {doing} "
            f"(gave up after {busy_timeout_s():g} s, see ${BUSY_TIMEOUT_ENV})"
        )
    return StoreError(f"{path}: could not {doing}: {text}")


def busy_timeout_s() -> float:
    try:
        return max(0.0, float(os.environ.get(BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_BUSY_TIMEOUT_S


def _sqlite_errors(doing: str):
    """Turns SQLite's exceptions in a Store method into a StoreError that names the task."""

    def wrap(method):
        @functools.wraps(method)
        def translated(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as error:
                raise _explain(self.path, error, doing) from error
            except json.JSONDecodeError as error:
                # Damage SQLite cannot see: text that reads, but is no longer what was written.
                raise StoreError(
                    f"{self.path} is damaged (a stored value is not JSON: {error}); could "
                    f"not {doing}"
                ) from error

        return translated

    return wrap


class Store:
    """An open results database. Use as a context manager, or call ``close()``."""

    def __init__(self, path: str | Path = DEFAULT_DB, *, create: bool = True, synced: bool = True):
        """`synced=False`: no fsync per transaction, for a file made whole and synced once
        at the end (a recovered copy, published only when complete)."""
        self.path = Path(path)
        self._synced = synced
        self._create = create
        if not create:
            _check_readable(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot make the folder of {self.path}: {error.strerror}") from None
        try:
            self._db = self._open(self.path)
        except sqlite3.Error as error:
            if create:
                raise _explain(self.path, error, "open the results database") from error
            # A reader on read-only media cannot make WAL's shared-memory file; a file
            # that nothing can change needs none.
            try:
                self._db = self._open(f"file:{self.path}?immutable=1", uri=True)
            except sqlite3.Error:
                raise _explain(self.path, error, "open the results database") from error

    def _open(self, target, uri: bool = False) -> sqlite3.Connection:
        # Autocommit mode: every transaction here is explicit (see _transaction).
        db = sqlite3.connect(target, isolation_level=None, timeout=_BUSY_STEP_S, uri=uri)
        db.row_factory = sqlite3.Row
        self._db = db
        try:
            if not self._create:
                self._refuse_foreign()  # before anything is written: a reader writes nothing
            if not uri:
                self._retry_busy(lambda: db.execute("PRAGMA journal_mode = WAL"))
            db.execute("PRAGMA foreign_keys = ON")
            if not self._synced:
                db.execute("PRAGMA synchronous = OFF")
            self._migrate()
        except BaseException:
            db.close()
            raise
        return db

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # --- schema -------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        steps = migration_steps()
        self._refuse_newer(len(steps))
        if self.schema_version == len(steps):
            return
        # A step may rebuild a table that others reference; SQLite allows that only with
        # foreign keys off, a setting that cannot change inside a transaction.
        self._db.execute("PRAGMA foreign_keys = OFF")
        # The version is read again under the write lock: another process may have upgraded
        # the file while this one waited for it.
        with self._transaction() as db:
            self._refuse_newer(len(steps))
            for step in steps[self.schema_version :]:
                for statement in _statements(step):
                    db.execute(statement)
            if db.execute("PRAGMA foreign_key_check").fetchone() is not None:
                raise StoreError(f"{self.path}: a migration broke a reference; nothing changed")
            db.execute(f"PRAGMA user_version = {len(steps)}")
        self._db.execute("PRAGMA foreign_keys = ON")

    def _refuse_foreign(self) -> None:
        """A reader's database must be one serverlab wrote: an SQLite file of another
        program (no schema version) is refused before a table is made in it."""
        if self.schema_version != 0:
            return
        if self._db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None:
            # Empty, or a run is making its schema this moment.
            raise StoreError(
                f"{self.path} holds no results yet (no tables); nothing was written into "
                "it: run a suite into it first"
            )
        raise StoreError(
            f"{self.path} is not a serverlab results database (an SQLite file without "
            "its schema); nothing was changed: pass the database a run wrote"
        )

    def _refuse_newer(self, known: int) -> None:
        if self.schema_version > known:
            raise StoreError(
                f"{self.path} has schema version {self.schema_version}, newer than this "
                f"serverlab knows ({known}); use a newer serverlab or another --db"
            )

    def _retry_busy(self, attempt, wait_s: float | None = None):
        """Runs `attempt` until no other process holds the lock it needs, for at most
        `wait_s` (default busy_timeout_s()); between tries Python runs, so Ctrl-C is never
        held up."""
        deadline = time.monotonic() + (busy_timeout_s() if wait_s is None else wait_s)
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as error:
                text = str(error).lower()
                if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                    raise

    @contextmanager
    def _transaction(self, wait_s: float | None = None) -> Iterator[sqlite3.Connection]:
        try:
            # Inside the try: a Ctrl-C that lands just after BEGIN must still roll it back,
            # or the connection stays in a transaction that no later write can start.
            self._retry_busy(lambda: self._db.execute("BEGIN IMMEDIATE"), wait_s)
            yield self._db
            self._retry_busy(self._db.commit, wait_s)
        except BaseException:
            # SQLite may have rolled back already (a full disk does); a failed rollback
            # must not hide the error that caused it.
            if self._db.in_transaction:
                with suppress(sqlite3.Error):
                    self._db.rollback()
            raise

    # --- writing ------------------------------------------------------------------------

    @_sqlite_errors("store the suite")
    def add_suite(self, suite: StoredSuite) -> StoredSuite:
        """The stored row of this suite version, created if new."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO suites (name, path, sha256, scale, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (suite.name, suite.path, suite.sha256, suite.scale, time.time()),
            )
        row = self._db.execute(
            "SELECT * FROM suites WHERE name = ? AND sha256 = ? AND scale = ?",
            (suite.name, suite.sha256, suite.scale),
        ).fetchone()
        return _suite_from_row(row)

    @_sqlite_errors("record the start of the run")
    def start_run(
        self,
        suite: StoredSuite | int,
        machine: dict[str, Any],
        started_at: float | None = None,
        *,
        fingerprint: dict[str, Any] | None = None,
        versions: dict[str, Any] | None = None,
    ) -> Run:
        suite_id = _suite_id(suite)
        started_at = time.time() if started_at is None else started_at
        prints = (fingerprint or {}, versions or {})
        me = os.getpid()
        mine = (me, owner.start_ticks(me), socket.gethostname())
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (suite_id, started_at, status, machine_json, pid, pid_start,"
                " host, fingerprint_json, versions_json) VALUES (?, ?, 'running', ?, ?, ?, ?,"
                " ?, ?)",
                (suite_id, started_at, _to_json(machine), *mine, *_to_json_each(prints)),
            )
        return Run(cursor.lastrowid, suite_id, started_at, "running", machine, None, *mine, *prints)

    @_sqlite_errors("mark dead runs as abandoned")
    def mark_abandoned(self) -> list[int]:
        """Runs still 'running' whose process on this host is gone become 'abandoned',
        ended at their last stored test. A run without a recorded process (written before
        schema 4) cannot be judged and is left alone."""
        rows = self._db.execute(
            "SELECT id, pid, pid_start FROM runs WHERE status = 'running' AND host = ?",
            (socket.gethostname(),),
        ).fetchall()
        dead = [r["id"] for r in rows if not owner.alive(f"{r['pid']}.{r['pid_start']}")]
        with self._transaction() as db:
            for run_id in dead:
                db.execute(
                    "UPDATE runs SET status = 'abandoned', ended_at = COALESCE("
                    "(SELECT MAX(ended_at) FROM tests WHERE run_id = ?), started_at)"
                    " WHERE id = ?",
                    (run_id, run_id),
                )
        return dead

    @_sqlite_errors("record the end of the run")
    def finish_run(
        self, run_id: int, status: str, ended_at: float | None = None, wait_s: float | None = None
    ) -> None:
        """`wait_s` bounds the wait for another process's lock (a run being interrupted
        must not wait long: if it cannot mark itself, the next run marks it abandoned)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        with self._transaction(wait_s) as db:
            db.execute(
                "UPDATE runs SET status = ?, ended_at = ? WHERE id = ?",
                (status, time.time() if ended_at is None else ended_at, run_id),
            )

    def commit_test(self, test: RecordedTest, supersedes: int | None = None) -> int:
        """Store a test and everything measured in it in one transaction; returns its id.
        `supersedes`: the stored test this one re-runs, marked superseded in the same
        transaction.

        Either all of it lands or none of it does: an exception (or a killed process)
        part-way leaves no trace of this test, so --resume runs it again.
        """
        if test.status not in TEST_STATUSES:
            raise ValueError(f"test status {test.status!r} is not one of {TEST_STATUSES}")
        try:
            with self._transaction() as db:
                test_id = _insert_test_row(db, test)
                _insert_details(db, test_id, test)
                if supersedes is not None:
                    db.execute(
                        "UPDATE tests SET superseded_by = ? WHERE id = ?", (test_id, supersedes)
                    )
        except sqlite3.Error as error:
            raise _explain(self.path, error, f"store test {test.key}") from error
        test.id = test_id
        return test_id

    @_sqlite_errors("check the file")
    def check_intact(self) -> None:
        """Every page of every table and index read once (`PRAGMA quick_check`, some 20 ms
        per MiB): a run must not write into a damaged file, where SQLite could damage
        more, nor find the damage only hours later."""
        first = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
        if first != "ok":
            said = "; ".join(line for line in first.splitlines() if not line.startswith("***"))
            raise _explain(self.path, sqlite3.DatabaseError(f"malformed: {said}"), "check it")

    @_sqlite_errors("remove rows")
    def delete_rows(self, rows: list[tuple[str, int]]) -> None:
        """(table, rowid) rows removed in one transaction, without cascading (recovery
        drops orphans round by round)."""
        tables = set(self.table_names())
        with self._transaction() as db:
            for table, rowid in rows:
                if table not in tables:
                    raise StoreError(f"no table {table!r} in {self.path}")
                db.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))

    @_sqlite_errors("check the references between rows")
    def foreign_key_orphans(self) -> list[tuple[str, int, str]]:
        """(table, rowid, parent table) of each row whose parent row is missing."""
        return [(r[0], r[1], r[2]) for r in self._db.execute("PRAGMA foreign_key_check")]

    @_sqlite_errors("read the tables of a test's rows")
    def tables_of_tests(self) -> list[str]:
        """The tables whose rows belong to a test (a `test_id` referencing `tests`)."""
        return [
            table
            for table in self.table_names()
            if any(
                fk[2] == "tests" and fk[3] == "test_id"
                for fk in self._db.execute(f'PRAGMA foreign_key_list("{table}")')
            )
        ]

    @_sqlite_errors("find the tests around lost rows")
    def tests_around(self, table: str, first: int, last: int) -> list[int]:
        """The tests whose rows of `table` may have had rowids `first`..`last`: a test's
        rows are written in one transaction, after those of every test stored before it,
        so they are the tests from the one owning the row before to the one owning the
        row after (every test before or after, where there is no such row)."""
        if table not in self.tables_of_tests():
            raise StoreError(f"no table {table!r} of tests' rows in {self.path}")
        before = self._db.execute(
            f'SELECT test_id FROM "{table}" WHERE rowid < ? ORDER BY rowid DESC LIMIT 1',
            (first,),
        ).fetchone()
        after = self._db.execute(
            f'SELECT test_id FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT 1', (last,)
        ).fetchone()
        low = before[0] if before else 0
        high = after[0] if after else 2**63 - 1
        rows = self._db.execute(
            "SELECT id FROM tests WHERE id BETWEEN ? AND ? ORDER BY id", (low, high)
        )
        return [row[0] for row in rows]

    @_sqlite_errors("flag a test")
    def add_validity(self, test_id: int, code: str, detail: Any) -> None:
        """Sets one entry of a stored test's validity (recovery marks what a test lost)."""
        with self._transaction() as db:
            row = db.execute("SELECT validity_json FROM tests WHERE id = ?", (test_id,)).fetchone()
            if row is None:
                raise StoreError(f"no test {test_id} in {self.path}")
            validity = {**json.loads(row[0]), code: detail}
            db.execute(
                "UPDATE tests SET validity_json = ? WHERE id = ?", (_to_json(validity), test_id)
            )

    @_sqlite_errors("write the database out in full")
    def seal(self) -> None:
        """Folds the write-ahead log into the database file and leaves WAL mode, so that the
        one file holds everything (a copy that will be moved or renamed); a failure to
        write (a full disk) is an error here, not a log left behind."""
        mode = self._db.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
        if mode != "delete":
            raise StoreError(f"{self.path}: could not leave WAL mode (still {mode})")

    @_sqlite_errors("copy rows in")
    def insert_rows(self, table: str, columns: list[str], rows: Iterable[tuple]) -> None:
        """Rows copied in as they are (recovery); foreign keys are not checked, because a
        damaged source may have lost a parent row whose children survived."""
        if table not in self.table_names():
            raise StoreError(f"no table {table!r} in {self.path}")
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        self._db.execute("PRAGMA foreign_keys = OFF")
        try:
            with self._transaction() as db:
                db.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
        finally:
            self._db.execute("PRAGMA foreign_keys = ON")

    # --- reading ------------------------------------------------------------------------

    @_sqlite_errors("read the finished tests")
    def finished_test_keys(self, suite: StoredSuite | int) -> set[str]:
        """Keys (``make_test_key``) of the tests of this suite version that have a result."""
        placeholders = ", ".join("?" for _ in FINISHED_TEST_STATUSES)
        rows = self._db.execute(
            "SELECT tests.permutation_key, tests.repeat_index FROM tests"
            " JOIN runs ON runs.id = tests.run_id"
            f" WHERE runs.suite_id = ? AND tests.status IN ({placeholders})",
            (_suite_id(suite), *FINISHED_TEST_STATUSES),
        )
        return {make_test_key(row[0], row[1]) for row in rows}

    @_sqlite_errors("read the machine-busy tests")
    def busy_tests(self, suite: StoredSuite | int) -> dict[str, tuple[int, int]]:
        """This suite version's standing tests flagged machine-busy, by key
        (``make_test_key``): (test id, how many re-runs it already replaced)."""
        rows = self._db.execute(
            "SELECT t.id, t.permutation_key, t.repeat_index,"
            " (SELECT COUNT(*) FROM tests s JOIN runs sr ON sr.id = s.run_id"
            "  WHERE sr.suite_id = r.suite_id AND s.permutation_key = t.permutation_key"
            "  AND s.repeat_index = t.repeat_index AND s.superseded_by IS NOT NULL)"
            " FROM tests t JOIN runs r ON r.id = t.run_id"
            " WHERE r.suite_id = ? AND t.superseded_by IS NULL"
            " AND json_extract(t.validity_json, '$.machine_busy') IS NOT NULL",
            (_suite_id(suite),),
        )
        return {make_test_key(row[1], row[2]): (row[0], row[3]) for row in rows}

    @_sqlite_errors("read the suites")
    def suites(self) -> list[StoredSuite]:
        return [_suite_from_row(r) for r in self._db.execute("SELECT * FROM suites ORDER BY id")]

    @_sqlite_errors("read a suite")
    def suite(self, suite_id: int) -> StoredSuite:
        row = self._db.execute("SELECT * FROM suites WHERE id = ?", (suite_id,)).fetchone()
        if row is None:
            raise StoreError(f"no suite {suite_id} in {self.path}")
        return _suite_from_row(row)

    @_sqlite_errors("read the runs")
    def runs(self, suite_ids: Iterable[int] | None = None) -> list[Run]:
        rows = self._db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        wanted = None if suite_ids is None else set(suite_ids)
        return [_run_from_row(r) for r in rows if wanted is None or r["suite_id"] in wanted]

    @_sqlite_errors("read the tests")
    def tests(
        self, run_ids: Iterable[int] | None = None, superseded: bool = False
    ) -> list[RecordedTest]:
        """Tests with their own columns only; ``load_details`` fills the measurement lists.
        The figures' tests by default; ``superseded``: the ones re-runs replaced instead."""
        rows = self._db.execute(
            "SELECT * FROM tests WHERE (superseded_by IS NOT NULL) = ? ORDER BY id",
            (int(superseded),),
        ).fetchall()
        wanted = None if run_ids is None else set(run_ids)
        return [_test_from_row(r) for r in rows if wanted is None or r["run_id"] in wanted]

    @_sqlite_errors("read a test's figures")
    def load_details(self, test: RecordedTest) -> RecordedTest:
        """Fill intervals, samples, histograms, server stats, emit records, emit cycles and
        runtime signals of a test."""
        test.intervals = [
            EngineInterval(r["seq"], r["t"], json.loads(r["data_json"]))
            for r in self._select("engine_intervals", test.id, "seq")
        ]
        test.samples = [
            MonitorSample(**_without_test_id(r))
            for r in self._select("monitor_samples", test.id, "t")
        ]
        test.histograms = {r["name"]: r["data"] for r in self._select("histograms", test.id)}
        test.server_stats = [
            ServerStats(r["t"], json.loads(r["stats_json"]), r["phase"])
            for r in self._select("server_stats", test.id, "t")
        ]
        test.emits = [
            EmitRecord(**_without_test_id(r))
            for r in self._select("emit_records", test.id, "event, seq, place")
        ]
        test.cycles = [
            EmitCycle(**_without_test_id(r))
            for r in self._select("emit_cycles", test.id, "event, seq")
        ]
        test.signals = [
            RuntimeSignal(r["t"], r["kind"], r["value"], json.loads(r["data_json"]))
            for r in self._select("runtime_signals", test.id, "t")
        ]
        return test

    def _select(self, table: str, test_id: int | None, order: str = "rowid") -> list[sqlite3.Row]:
        return self._db.execute(
            f"SELECT * FROM {table} WHERE test_id = ? ORDER BY {order}", (test_id,)
        ).fetchall()

    @_sqlite_errors("read the tables")
    def table_names(self) -> list[str]:
        rows = self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " ORDER BY name"
        )
        return [row[0] for row in rows]

    @_sqlite_errors("read a table")
    def table_rows(self, table: str) -> tuple[list[str], Iterator[sqlite3.Row]]:
        """Column names and rows of one table, for export."""
        if table not in self.table_names():
            raise StoreError(f"no table {table!r} in {self.path}")
        cursor = self._db.execute(f'SELECT * FROM "{table}" ORDER BY rowid')
        return [d[0] for d in cursor.description], self._translated(cursor, f"read {table}")

    def _translated(self, rows: Iterator[sqlite3.Row], doing: str) -> Iterator[sqlite3.Row]:
        """`rows` as they come, with a failure on the way (damage met past the first row)
        as a StoreError like any other."""
        try:
            yield from rows
        except sqlite3.Error as error:
            raise _explain(self.path, error, doing) from error


def _check_readable(path: Path) -> None:
    """What a reader (report, compare, history, export) is refused before SQLite opens the
    file, and so before anything could write into it: no file, or an empty one."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise StoreError(f"no results database at {path}: run a suite first") from None
    except OSError as error:
        raise StoreError(f"{path} cannot be read: {error.strerror}") from None
    if size == 0 and path.is_file():
        raise StoreError(
            f"{path} is an empty file, not a serverlab results database; nothing was "
            "written into it: run a suite into it first, or pass the database a run wrote"
        )


def _statements(sql: str) -> Iterator[str]:
    """The SQL statements of a migration file, one by one (executescript would commit the
    surrounding transaction)."""
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    leftover = [ln for ln in pending.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    if leftover:
        raise StoreError(f"incomplete SQL statement in a migration: {pending.strip()[:80]}")


def _to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _to_json_each(values: Iterable[Any]) -> list[str]:
    return [_to_json(v) for v in values]


def _without_test_id(row: sqlite3.Row) -> dict[str, Any]:
    columns = dict(row)
    del columns["test_id"]
    return columns


def _suite_id(suite: StoredSuite | int) -> int:
    if isinstance(suite, StoredSuite):
        if suite.id is None:
            raise StoreError(
                "suite is not stored yet: pass the StoredSuite that add_suite returned"
            )
        return suite.id
    return suite


def _insert_test_row(db: sqlite3.Connection, test: RecordedTest) -> int:
    crash = test.crash or Crash()
    cursor = db.execute(
        "INSERT INTO tests (run_id, permutation_key, scenario, params_json, contestant,"
        " tunables_json, repeat_index, status, crash_time, exit_code, signal, oom,"
        " validity_json, summary_json, started_at, ended_at, plan_json, run_info_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            test.run_id,
            test.permutation_key,
            test.scenario,
            _to_json(test.params),
            test.contestant,
            _to_json(test.tunables),
            test.repeat_index,
            test.status,
            crash.time,
            crash.exit_code,
            crash.signal,
            int(crash.oom),
            _to_json(test.validity),
            None if test.summary is None else _to_json(test.summary),
            test.started_at,
            test.ended_at,
            None if test.plan is None else _to_json(test.plan),
            _to_json(test.run_info),
        ),
    )
    return cursor.lastrowid


def _insert_details(db: sqlite3.Connection, test_id: int, test: RecordedTest) -> None:
    db.executemany(
        "INSERT INTO engine_intervals (test_id, seq, t, data_json) VALUES (?, ?, ?, ?)",
        [(test_id, i.seq, i.t, _to_json(i.data)) for i in test.intervals],
    )
    db.executemany(
        f"INSERT INTO monitor_samples (test_id, {', '.join(SAMPLE_COLUMNS)})"
        f" VALUES (?, {', '.join('?' for _ in SAMPLE_COLUMNS)})",
        [(test_id, *(getattr(s, c) for c in SAMPLE_COLUMNS)) for s in test.samples],
    )
    db.executemany(
        "INSERT INTO histograms (test_id, name, data) VALUES (?, ?, ?)",
        [(test_id, name, data) for name, data in test.histograms.items()],
    )
    db.executemany(
        "INSERT INTO server_stats (test_id, t, phase, stats_json) VALUES (?, ?, ?, ?)",
        [(test_id, s.t, s.phase, _to_json(s.stats)) for s in test.server_stats],
    )
    db.executemany(
        "INSERT INTO emit_records (test_id, event, seq, place, total, duration_ms,"
        " created_ms, sent_ms, received) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                test_id,
                *(e.event, e.seq, e.place, e.total, e.duration_ms),
                *(e.created_ms, e.sent_ms, e.received),
            )
            for e in test.emits
        ],
    )
    db.executemany(
        f"INSERT INTO emit_cycles (test_id, {', '.join(CYCLE_COLUMNS)})"
        f" VALUES (?, {', '.join('?' for _ in CYCLE_COLUMNS)})",
        [(test_id, *(getattr(c, name) for name in CYCLE_COLUMNS)) for c in test.cycles],
    )
    db.executemany(
        "INSERT INTO runtime_signals (test_id, t, kind, value, data_json) VALUES (?, ?, ?, ?, ?)",
        [(test_id, s.t, s.kind, s.value, _to_json(s.data)) for s in test.signals],
    )


def _suite_from_row(row: sqlite3.Row) -> StoredSuite:
    return StoredSuite(**dict(row))


def _run_from_row(row: sqlite3.Row) -> Run:
    return Run(
        id=row["id"],
        suite_id=row["suite_id"],
        started_at=row["started_at"],
        status=row["status"],
        machine=json.loads(row["machine_json"]),
        ended_at=row["ended_at"],
        pid=row["pid"],
        pid_start=row["pid_start"],
        host=row["host"],
        fingerprint=json.loads(row["fingerprint_json"]),
        versions=json.loads(row["versions_json"]),
    )


def _test_from_row(row: sqlite3.Row) -> RecordedTest:
    has_crash = row["status"] == "crashed" or row["exit_code"] is not None or row["signal"]
    crash = (
        Crash(row["crash_time"], row["exit_code"], row["signal"], bool(row["oom"]))
        if has_crash
        else None
    )
    return RecordedTest(
        id=row["id"],
        run_id=row["run_id"],
        permutation_key=row["permutation_key"],
        scenario=row["scenario"],
        contestant=row["contestant"],
        repeat_index=row["repeat_index"],
        status=row["status"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        params=json.loads(row["params_json"]),
        tunables=json.loads(row["tunables_json"]),
        crash=crash,
        validity=json.loads(row["validity_json"]),
        summary=None if row["summary_json"] is None else json.loads(row["summary_json"]),
        plan=None if row["plan_json"] is None else json.loads(row["plan_json"]),
        run_info=json.loads(row["run_info_json"]),
        superseded_by=row["superseded_by"],
    )
