"""One writer per results database: `serverlab run` holds `<db>.lock` for its whole life.

The lock is an flock(2) on a file beside the database, so the kernel drops it when the
holder dies, even by kill -9: a dead run never blocks the next one. The file also names
the holder, so that a second run is refused with who holds it. Readers (report, compare,
export) take no lock: SQLite's WAL lets them read while a run writes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from serverlab.results.store import StoreError


class DatabaseBusyError(StoreError):
    """Another live run writes this database."""


def lock_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".lock")


@contextlib.contextmanager
def hold(db_path: Path, command: str = "serverlab run") -> Iterator[None]:
    """Holds the database's writer lock; DatabaseBusyError at once if another holds it."""
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise StoreError(f"cannot lock {db_path} ({path}: {error.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatabaseBusyError(f"{db_path} is in use by {_holder(fd)}") from None
        _write_holder(fd, command)
        yield
    finally:
        os.close(fd)


def _write_holder(fd: int, command: str) -> None:
    holder = {"pid": os.getpid(), "started_at": time.time(), "command": command}
    with contextlib.suppress(OSError):  # a full disk must not stop the run for a note
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)


def _holder(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["started_at"]))
        return (
            f"{holder['command']} (pid {holder['pid']}, started {since}); wait for it to "
            "finish, or pass another --db"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "another serverlab run; wait for it to finish, or pass another --db"
