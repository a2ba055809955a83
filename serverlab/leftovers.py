"""Process groups a run started, written down before they start and crossed off when they
stop, so that a later run can stop what an orchestrator killed with -9 left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import psutil


class Leftovers:
    def __init__(self, path: Path):
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _read(self) -> dict[str, float]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def _write(self, entries: dict[str, float]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, self.path)

    def add(self, pid: int) -> None:
        entries = self._read()
        with contextlib.suppress(psutil.Error):
            entries[str(pid)] = psutil.Process(pid).create_time()
        self._write(entries)

    def remove(self, pid: int | None) -> None:
        entries = self._read()
        entries.pop(str(pid), None)
        self._write(entries)

    def reap(self) -> list[int]:
        """Kills the groups of recorded processes that still run. A pid is trusted only if
        its start time matches, so a reused pid is never killed."""
        killed = []
        for pid_text, created in self._read().items():
            pid = int(pid_text)
            try:
                if abs(psutil.Process(pid).create_time() - created) > 0.01:
                    continue
            except psutil.Error:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
                killed.append(pid)
        self._write({})
        return killed
