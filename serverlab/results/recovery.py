"""``serverlab export --recover`` (results stage): every row a damaged database still
yields, copied into a new database with the current schema.

- The database and its write-ahead log are copied into a private folder first, and only
  the copy is read: a read-only mount or a full disk does not stop recovery, and the rows
  a run killed with -9 left in the log are read with the rest (``immutable=1`` would
  ignore the log).
- Each table is read in rowid steps with ``LIMIT``, which stops SQLite before it steps
  past the last row asked for; around damage the readable prefix is found by halving
  the limit, the first readable rowid beyond it by galloping and bisecting, and the rowids
  in between are tried one by one, so every row a lookup by rowid can read is kept.
- Rows whose parent row was lost (a sample of a test that could not be read) are dropped:
  the copy passes ``PRAGMA foreign_key_check``.
- A kept test that may have lost rows of its own (samples, emit cycles, signals: rowids
  that could not be read, between its rows and its neighbours') is marked partial: its
  validity gets ``partial`` (which tables, which rowids), a flag the report puts on every
  figure of the test, since any of them may have been computed from the rows lost.
- The copy is built under a temporary name beside the target and linked to its name only
  when complete: a full disk leaves no file, not even an empty one.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.results import dblock
from serverlab.results.store import Store, StoreError

# serverlab's tables number their rows from 1 (SQLite's own numbering, never set by hand).
_FIRST, _LAST = 1, 2**63 - 1
STEP = 256  # rows per read
# At most this many rowids of one gap are tried one by one (a damaged page holds some
# hundreds); past the last readable row, where the gap has no known end, fewer.
SWEEP = 65_536
TAIL_SWEEP = 1024


@dataclass
class TableRecovery:
    """What recovery made of one table; rowid ranges are the source's."""

    table: str
    kept: int = 0
    lost: list[tuple[int, int]] = field(default_factory=list)  # rowids that could not be read
    orphans: dict[str, int] = field(default_factory=dict)  # parent table -> rows dropped
    partial: list[int] = field(default_factory=list)  # kept tests that may have lost rows here

    def describe(self) -> str:
        said = f"{self.table}: {self.kept} rows kept"
        if self.lost:
            ranges = ", ".join(_range(lo, hi) for lo, hi in self.lost)
            if self.lost[-1][1] == _LAST:
                counted = "how many is unknown"
            else:
                counted = f"at most {sum(hi - lo + 1 for lo, hi in self.lost)} rows"
            said += f"; lost: rowids {ranges} ({counted})"
        for parent, count in sorted(self.orphans.items()):
            said += f"; {count} rows dropped: their row in {parent} was lost"
        if self.partial:
            tests = ", ".join(str(test_id) for test_id in self.partial)
            said += f"; marked partial, their figures flagged: tests {tests}"
        return said


def _range(lo: int, hi: int) -> str:
    if hi == _LAST:
        return f"{lo} and after"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def recover(db_path: str | Path, out_path: str | Path, progress=None) -> list[TableRecovery]:
    """Copies every readable row of `db_path` into the new file `out_path`; returns what
    was kept and lost per table. StoreError when nothing at all could be kept. `progress`
    counts the rows as they are copied (``serverlab.base.progress.Tally``)."""
    db_path, out_path = Path(db_path), Path(out_path)
    if not db_path.is_file():
        raise StoreError(f"no database at {db_path}")
    if out_path.exists():
        raise StoreError(f"{out_path} exists already; name a new file to recover into")
    who = dblock.holder(db_path)
    if who:
        raise StoreError(f"{db_path} is being written by {who}; recover it once that ends")
    with tempfile.TemporaryDirectory(prefix="serverlab-recover-") as private:
        source = _open_copy(db_path, Path(private))
        try:
            tables = _table_names(source, db_path)
            partial = out_path.with_name(f".{out_path.name}.partial-{os.getpid()}")
            try:
                found = _rebuild(source, tables, partial, out_path, progress)
                if not any(t.kept for t in found):
                    raise StoreError(f"{db_path}: no row could be read; nothing was written")
                _publish(partial, out_path)
            finally:
                for leftover in ("", "-wal", "-shm", "-journal"):
                    Path(f"{partial}{leftover}").unlink(missing_ok=True)
        finally:
            source.close()
    return found


def _open_copy(db_path: Path, private: Path) -> sqlite3.Connection:
    """The database and its log, copied into `private` and opened there. The shared-memory
    index is not copied: SQLite rebuilds it from the log."""
    copy = private / "copy.db"
    try:
        shutil.copyfile(db_path, copy)
        wal = db_path.with_name(db_path.name + "-wal")
        if wal.is_file():
            shutil.copyfile(wal, private / "copy.db-wal")
    except OSError as error:
        raise StoreError(
            f"cannot copy {db_path} into {private} to read it ({error.strerror}); "
            "set TMPDIR to a folder with room"
        ) from None
    return sqlite3.connect(copy, isolation_level=None)


def _table_names(source: sqlite3.Connection, db_path: Path) -> set[str]:
    try:
        return {row[0] for row in source.execute(_TABLES)}
    except sqlite3.Error as error:
        raise StoreError(f"{db_path}: not even its list of tables can be read ({error})") from None


_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def _rebuild(
    source: sqlite3.Connection, tables: set[str], partial: Path, out_path: Path, progress=None
) -> list[TableRecovery]:
    """The copy, built in `partial` and sealed (its log folded in, so that the one file
    holds everything)."""
    try:
        with Store(partial, synced=False) as target:
            names = [t for t in target.table_names() if t in tables]
            if progress:
                progress.begin(sum(_row_estimate(source, t) for t in names), "recovering rows")
            found = [_copy_table(source, target, name, progress) for name in names]
            _drop_orphans(target, {t.table: t for t in found})
            _mark_partial(target, found)
            target.seal()
    except StoreError as error:
        reason = error.__cause__ or error
        raise StoreError(f"could not write {out_path} ({reason}); nothing was written") from None
    return found


def _publish(partial: Path, out_path: Path) -> None:
    """Syncs the complete copy (written without a sync per transaction) and gives it its
    name, unless a file took that name meanwhile."""
    try:
        fd = os.open(partial, os.O_RDONLY)  # no SQLite connection is open on it any more
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(partial, out_path)
    except FileExistsError:
        raise StoreError(f"{out_path} exists already; name a new file to recover into") from None
    except OSError as error:
        raise StoreError(f"could not write {out_path}: {error.strerror}") from None


def _row_estimate(source: sqlite3.Connection, table: str) -> int:
    """How many rows a table may hold, for the progress: its highest rowid (rows deleted
    or lost to damage make it more than there are), 0 where even that cannot be read."""
    try:
        return source.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0] or 0
    except sqlite3.DatabaseError:
        return 0


def _copy_table(
    source: sqlite3.Connection, target: Store, table: str, progress=None
) -> TableRecovery:
    reader = _Reader(source, table, _shared_columns(source, target, table))
    result = TableRecovery(table)
    start: int | None = _FIRST
    while start is not None:
        rows = reader.prefix(start)
        _keep(target, reader, result, rows)
        if progress and rows:
            progress.advance(table, len(rows))
        if rows and rows[-1][0] == _LAST:
            break
        after = rows[-1][0] + 1 if rows else start
        if len(rows) == STEP:
            start = after
        elif reader.read(after, 1) == []:
            break  # the end of the table
        else:
            start = _around_damage(reader, target, result, after)
    result.lost = _merged(result.lost)
    return result


def _keep(target: Store, reader: _Reader, result: TableRecovery, rows: list[tuple]) -> None:
    target.insert_rows(result.table, ["rowid", *reader.columns], rows)
    result.kept += len(rows)


def _around_damage(
    reader: _Reader, target: Store, result: TableRecovery, gap_start: int
) -> int | None:
    """Past damage that starts at `gap_start`: the next rowid from which reading works
    (None: none to the end), after trying the rowids in between one by one (the first
    SWEEP of them: beyond, the gap is reported lost)."""
    resume = reader.first_readable(gap_start)
    gap_end = (resume - 1) if resume is not None else _LAST
    swept_end = min(gap_end, gap_start + (TAIL_SWEEP if resume is None else SWEEP) - 1)
    rescued, lost = reader.sweep(gap_start, swept_end)
    _keep(target, reader, result, rescued)
    result.lost += lost
    if swept_end < gap_end:
        result.lost.append((swept_end + 1, gap_end))
    return resume


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


class _Reader:
    """Reads of one table of the private copy; None where SQLite meets damage."""

    def __init__(self, source: sqlite3.Connection, table: str, columns: list[str]):
        self.source, self.columns = source, columns
        names = ", ".join(["rowid", *(f'"{c}"' for c in columns)])
        self._from = f'SELECT {names} FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT ?'
        self._one = f'SELECT {names} FROM "{table}" WHERE rowid = ?'

    def read(self, start: int, limit: int) -> list[tuple] | None:
        try:
            return self.source.execute(self._from, (start, limit)).fetchall()
        except sqlite3.DatabaseError:
            return None

    def prefix(self, start: int) -> list[tuple]:
        """The rows from `start` on, up to STEP of them, that read without error: the
        longest limit that reads, found by halving."""
        rows = self.read(start, STEP)
        if rows is not None:
            return rows
        good, bad = [], STEP  # reading `bad` rows fails
        low = 0
        while bad - low > 1:
            middle = (low + bad) // 2
            got = self.read(start, middle)
            if got is None:
                bad = middle
            else:
                low, good = middle, got
        return good

    def first_readable(self, start: int) -> int | None:
        """The first rowid from `start` on from which a read works: gallop, then bisect."""
        failed, probe, step = start - 1, start, 1
        while self.read(probe, 1) is None:
            if probe == _LAST:
                return None
            failed, probe, step = probe, min(_LAST, probe + step), step * 2
        while probe - failed > 1:
            middle = (failed + probe) // 2
            if self.read(middle, 1) is None:
                failed = middle
            else:
                probe = middle
        return probe

    def sweep(self, first: int, last: int) -> tuple[list[tuple], list[tuple[int, int]]]:
        """Each rowid in [first, last] read alone: the rows read, and the ranges of rowids
        whose lookup failed (absent rowids read as nothing, without failing)."""
        rows, lost = [], []
        for rowid in range(first, last + 1):
            try:
                rows += self.source.execute(self._one, (rowid,)).fetchall()
            except sqlite3.DatabaseError:
                if lost and lost[-1][1] == rowid - 1:
                    lost[-1] = (lost[-1][0], rowid)
                else:
                    lost.append((rowid, rowid))
        return rows, lost


def _shared_columns(source: sqlite3.Connection, target: Store, table: str) -> list[str]:
    """The columns both schemas have: an older database lacks what later migrations added."""
    theirs = {row[1] for row in source.execute(f'PRAGMA table_info("{table}")')}
    ours, _ = target.table_rows(table)
    return [column for column in ours if column in theirs]


def _drop_orphans(target: Store, found: dict[str, TableRecovery]) -> None:
    """Deletes rows whose parent row was not kept, round after round (a test dropped for
    its lost run orphans its samples in turn), until foreign_key_check is clean."""
    while orphans := target.foreign_key_orphans():
        target.delete_rows([(table, rowid) for table, rowid, _ in orphans])
        for table, _, parent in orphans:
            entry = found[table]
            entry.kept -= 1
            entry.orphans[parent] = entry.orphans.get(parent, 0) + 1


def _mark_partial(target: Store, found: list[TableRecovery]) -> None:
    """Marks each kept test that may have lost rows of a table of tests' rows."""
    lost_by_test: dict[int, dict[str, str]] = {}
    children = set(target.tables_of_tests())
    for entry in found:
        if entry.table not in children:
            continue
        for first, last in entry.lost:
            for test_id in target.tests_around(entry.table, first, last):
                said = lost_by_test.setdefault(test_id, {})
                rowids = f"rowids {_range(first, last)}"
                said[entry.table] = (
                    f"{said[entry.table]}, {rowids}" if entry.table in said else rowids
                )
                if test_id not in entry.partial:
                    entry.partial.append(test_id)
    for test_id, lost in lost_by_test.items():
        target.add_validity(test_id, "partial", lost)
