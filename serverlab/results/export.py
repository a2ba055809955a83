"""``serverlab export --csv`` (results stage): every table of the results database as one
CSV file. Recovery of a damaged database (``--recover``) is in ``recovery``."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from serverlab.results.store import Store, StoreError


def export_csv(db_path: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``<table>.csv`` (header row, then every row) per table; returns the files.
    Each file is written under a temporary name and renamed when complete: damage met
    part-way (a StoreError) leaves no half table behind."""
    out_dir = Path(out_dir)
    written = []
    # The database first: a file that is none is refused before the folder is made.
    with Store(db_path, create=False) as store:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot make {out_dir}: {error.strerror}") from None
        for table in store.table_names():
            columns, rows = store.table_rows(table)
            target = out_dir / f"{table}.csv"
            partial = out_dir / f".{table}.csv.partial-{os.getpid()}"
            try:
                with partial.open("w", newline="", encoding="utf-8") as handle:
                    writer = csv.writer(handle)
                    writer.writerow(columns)
                    writer.writerows(tuple(row) for row in rows)
                partial.replace(target)
            except OSError as error:
                raise StoreError(f"cannot write {target}: {error.strerror}") from None
            finally:
                partial.unlink(missing_ok=True)
            written.append(target)
    return written
