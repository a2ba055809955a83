"""What a dead run left behind, found and removed by the next one.

A run that dies (kill -9, a lost terminal) cannot clean up after itself. Everything it
made carries its owner mark (serverlab.base.owner): its processes in their environment, its
network namespaces and its work folder in their names. A later run removes what belongs
to owners that are gone, and never touches a live run's things.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base import owner, scratch
from serverlab.run.host import shapedlink

_OWNER_FOLDER = re.compile(r"\d+\.\d+")


@dataclass
class Reaped:
    processes: list[int] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.namespaces or self.folders)

    def describe(self) -> str:
        return (
            f"{len(self.processes)} processes, {len(self.namespaces)} network namespaces "
            f"and {len(self.folders)} work and temporary folders"
        )


def work_folder(workdir: Path) -> Path:
    """This process's own folder under the shared work folder."""
    return workdir / owner.token()


def reap(workdir: Path) -> Reaped:
    """Kills orphaned processes, deletes their namespaces, their owners' work folders (the
    tests in hand when they died, never stored) and their scratch folders."""
    reaped = Reaped(owner.reap_orphans(), shapedlink.reap_stale(), scratch.reap())
    if workdir.is_dir():
        for folder in workdir.iterdir():
            if _OWNER_FOLDER.fullmatch(folder.name) and not owner.alive(folder.name):
                shutil.rmtree(folder, ignore_errors=True)
                reaped.folders.append(folder)
    return reaped
