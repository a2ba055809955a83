"""``serverlab export --csv DIR``: every table of the results database as one CSV file."""

from __future__ import annotations

import csv
from pathlib import Path

from serverlab.store import Store


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
