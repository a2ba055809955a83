"""One writer per results database (results stage): `serverlab run` holds an flock(2) on
the database file itself, and checks before anything else that the file can be written.

The lock is on the file, not on a name: a second name of the same file (a hard link, a
symlink, a bind mount) reaches the same inode, and so the same lock. The kernel drops it
when the holder dies, even by kill -9, so a dead run never blocks the next one. The holder
is named from /proc/locks, which lists each lock's process by device and inode.

Two rules keep SQLite's own locks safe beside ours:
- flock(2) locks and the POSIX locks SQLite takes are independent on Linux (not over NFS,
  where flock is emulated with POSIX locks: keep results databases on a local disk);
- POSIX locks belong to a process and an inode, and closing *any* descriptor of the file
  drops all of them, SQLite's included. So the descriptor opened here is the only one
  serverlab opens on a database outside SQLite, it is opened once per file and process,
  and it stays open until the process exits: the lock is released with LOCK_UN, never by
  closing.

A file with more than one hard link is refused: SQLite names the write-ahead log after the
path it was given, so a reader of the other name would read the file without this run's
log. Readers (report, compare, export) take no lock: SQLite's WAL lets them read while a
run writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from serverlab.results.store import StoreError

# A run stores each test in one transaction of some hundred KiB; with less room than this
# the first test would fail only after the servers were verified and started.
MIN_FREE_BYTES = 1 << 20
_PROC_LOCKS = Path("/proc/locks")
# (device, inode) -> the descriptor that holds or held its lock; never closed (see above).
_descriptors: dict[tuple[int, int], int] = {}


class DatabaseBusyError(StoreError):
    """Another live run writes this database."""


@contextlib.contextmanager
def hold(db_path: Path, command: str = "serverlab run") -> Iterator[None]:
    """Holds the database's writer lock for as long as the block runs. Refused at once,
    in one StoreError line, when another process holds it, when the file has another
    name, or when it cannot be written (immutable, read-only, a full disk)."""
    fd = _descriptor(Path(db_path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        who = holder(db_path) or "another process"
        raise DatabaseBusyError(
            f"{db_path} is in use by {who}; wait for it to finish, or pass another --db"
        ) from None
    try:
        _refuse_other_names(fd, db_path)
        _refuse_full_disk(fd, db_path)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _descriptor(db_path: Path) -> int:
    """The one descriptor this process keeps on the database file (created if missing),
    opened read-write: a file that cannot be written is refused here, before any verify."""
    real = db_path.resolve()
    with contextlib.suppress(OSError):
        known = real.stat()
        if (known.st_dev, known.st_ino) in _descriptors:
            return _descriptors[(known.st_dev, known.st_ino)]
    try:
        fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise _cannot_write(db_path, error) from None
    st = os.fstat(fd)
    _descriptors[(st.st_dev, st.st_ino)] = fd
    return fd


def _cannot_write(db_path: Path, error: OSError) -> StoreError:
    if error.errno == errno.ENOSPC:
        return StoreError(f"{db_path}: the disk is full. Free some space or pass another --db")
    if error.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
        return StoreError(
            f"{db_path} cannot be written ({error.strerror}); make it writable or pass another --db"
        )
    return StoreError(f"cannot open {db_path}: {error.strerror}")


def _refuse_other_names(fd: int, db_path: Path) -> None:
    links = os.fstat(fd).st_nlink
    if links > 1:
        raise StoreError(
            f"{db_path} has {links} hard links: a reader of another name would read it "
            "without this run's write-ahead log. Copy it (cp) to a file of its own, or "
            "pass another --db"
        )


def _refuse_full_disk(fd: int, db_path: Path) -> None:
    fs = os.fstatvfs(fd)
    free = fs.f_bavail * fs.f_frsize
    if free < MIN_FREE_BYTES:
        raise StoreError(
            f"{db_path}: the disk is full ({free // 1024} KiB free, a run needs "
            f"{MIN_FREE_BYTES >> 20} MiB). Free some space or pass another --db"
        )


def holder(db_path: Path) -> str | None:
    """Who holds the writer lock of this file (`serverlab run (pid N, started T)`); None
    if nobody does. Found by the file's device and inode: no descriptor is opened on it."""
    try:
        st = Path(db_path).stat()
    except OSError:
        return None
    pid = _flock_pid(st.st_dev, st.st_ino)
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        what = _command(process.cmdline())
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(process.create_time()))
    except psutil.Error:
        return f"process {pid}"
    return f"{what} (pid {pid}, started {since})"


def _flock_pid(dev: int, ino: int) -> int | None:
    """The pid of the flock on (dev, ino) in /proc/locks: `N: FLOCK ADVISORY WRITE pid
    MAJ:MIN:INODE start end`, device numbers in hex; waiters (`->`) hold nothing."""
    wanted = (os.major(dev), os.minor(dev), ino)
    try:
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        with contextlib.suppress(ValueError):
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == wanted:
                return int(fields[4])
    return None


def _command(cmdline: list[str]) -> str:
    """`serverlab run` rather than the interpreter's full command line."""
    for i, arg in enumerate(cmdline):
        if os.path.basename(arg) == "serverlab" or arg == "serverlab.cli":
            return " ".join(["serverlab", *cmdline[i + 1 : i + 2]])
    return os.path.basename(cmdline[0]) if cmdline else "another process"
