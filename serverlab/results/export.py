"""``serverlab export``: every table of the results database as one CSV file (``--csv``),
or what can still be read of a damaged database copied into a new one (``--recover``)."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

from serverlab.results.store import Store, StoreError


def export_csv(db_path: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``<table>.csv`` (header row, then every row) per table; returns the files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with Store(db_path, create=False) as store:
        for table in store.table_names():
            columns, rows = store.table_rows(table)
            target = out_dir / f"{table}.csv"
            with target.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(columns)
                writer.writerows(tuple(row) for row in rows)
            written.append(target)
    return written


def recover(db_path: str | Path, out_path: str | Path) -> dict[str, int]:
    """Copies every row that can still be read from a damaged database into a new one with
    the current schema; returns the rows kept per table. Each table is read by rowid from
    the front until the damage, then from the back, so one bad page costs only its rows."""
    db_path, out_path = Path(db_path), Path(out_path)
    if not db_path.is_file():
        raise StoreError(f"no database at {db_path}")
    if out_path.exists():
        raise StoreError(f"{out_path} exists already; name a new file to recover into")
    try:
        source = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        tables = [row[0] for row in source.execute(_TABLES)]
    except sqlite3.Error as error:
        raise StoreError(f"{db_path}: not even its list of tables can be read ({error})") from None
    kept = {}
    with Store(out_path) as target:
        for table in target.table_names():
            if table in tables:
                kept[table] = _copy_readable_rows(source, target, table)
    source.close()
    return kept


_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def _copy_readable_rows(source: sqlite3.Connection, target: Store, table: str) -> int:
    columns = _shared_columns(source, target, table)
    names = ", ".join(f'"{c}"' for c in columns)
    rows: dict[int, tuple] = {}
    for order, after in (("ASC", "rowid > ?"), ("DESC", "rowid < ?")):
        start = -(2**63) if order == "ASC" else 2**63 - 1
        query = f'SELECT rowid, {names} FROM "{table}" WHERE {after} ORDER BY rowid {order}'
        try:
            for row in source.execute(query, (start,)):
                rows.setdefault(row[0], row[1:])
        except sqlite3.DatabaseError:
            continue  # the damage: the other direction reads what lies beyond it
    target.insert_rows(table, columns, rows.values())
    return len(rows)


def _shared_columns(source: sqlite3.Connection, target: Store, table: str) -> list[str]:
    """The columns both schemas have: an older database lacks what later migrations added."""
    theirs = {row[1] for row in source.execute(f'PRAGMA table_info("{table}")')}
    ours, _ = target.table_rows(table)
    return [column for column in ours if column in theirs]
