"""Temporary folders, all under one root owned per process: `/tmp/serverlab/<owner mark>/`
($TMPDIR/serverlab when TMPDIR is set).

Every scratch folder serverlab makes (a server's work folder, verify's docroot and secret,
a Ray actor's plans) lives under the folder named after the owner mark of the process that
made it (serverlab.base.owner: `<pid>.<start ticks>`). A process that ends normally
removes its own folder; one killed with -9 cannot, and the next command removes every
folder whose owner is gone (`reap`), as the reaper does with its processes. A virtual
lab's folders (its Ray nodes' temp dirs) live in `lab-<name>/` under the same root, and go
with the lab (serverlab.lab.manage).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from serverlab.base import owner

LAB_PREFIX = "lab-"
_registered: set[int] = set()


def root() -> Path:
    """`serverlab` in the temporary folder ($TMPDIR, else /tmp)."""
    return Path(tempfile.gettempdir()) / "serverlab"


def own_folder() -> Path:
    """This process's root for its scratch folders (made on first use, removed at exit)."""
    folder = root() / owner.token()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    pid = os.getpid()
    if pid not in _registered:
        # A forked child inherits the parent's atexit list: it must not remove the parent's.
        _registered.add(pid)
        atexit.register(_remove_if_mine, pid, folder)
    return folder


def make(prefix: str) -> Path:
    """A new scratch folder (`tempfile.mkdtemp`) under this process's own root."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=own_folder()))


def lab_folder(name: str) -> Path:
    """The folder of a virtual lab's temporary files."""
    return root() / f"{LAB_PREFIX}{name}"


def remove_own() -> None:
    """Removes every scratch folder of this process (a Ray actor's, before it is killed)."""
    shutil.rmtree(root() / owner.token(), ignore_errors=True)


def _remove_if_mine(pid: int, folder: Path) -> None:
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def reap() -> list[Path]:
    """Removes the root's folders whose owner process is gone; returns them. Labs' folders
    are the lab's to remove (serverlab.lab.manage), and a live owner's are never touched."""
    base = root()
    if not base.is_dir():
        return []
    removed = []
    for folder in base.iterdir():
        if folder.name.startswith(LAB_PREFIX) or owner.alive(folder.name):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
