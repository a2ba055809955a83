"""`serverlab watch`: the live page of a run going on in another process.

The results database says which run is going (the newest marked running whose process is
alive); that run writes every live event to `live.jsonl` in its own work folder (beside the
database, `work/<owner>/`), numbered as its own page numbers them. Watch reads that file
from its first line and follows it, so its page shows the whole run so far, as `--live`
would have; it stops following at the run's `end` event, or when the run's folder goes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from serverlab.base import owner
from serverlab.results.store import Store
from serverlab.run.plan.live.events import EventLog
from serverlab.run.plan.live.feed import SIDE_FILE, pin_thread
from serverlab.run.plan.live.server import LiveError

POLL_S = 0.2


def running_run(db: Path) -> int:
    """The id of the newest run the database says is going (a run killed with -9 stays so
    until the next run marks it abandoned: `side_file_of` then finds no file of it)."""
    with Store(db, create=False) as store:
        going = [run for run in store.runs() if run.status == "running"]
    if not going:
        raise LiveError(f"no run is going in {db}")
    return max(going, key=lambda run: run.started_at).id


def side_file_of(db: Path, run_id: int) -> Path:
    """The live events file of run `run_id`: the one whose first event names it."""
    work = db.resolve().parent / "work"
    for path in sorted(work.glob(f"*/{SIDE_FILE}")) if work.is_dir() else []:
        if not owner.alive(path.parent.name):
            continue
        with path.open(encoding="utf-8") as lines:
            first = lines.readline()
        if first and json.loads(json.loads(first)["event"]).get("run_id") == run_id:
            return path
    raise LiveError(
        f"run {run_id} in {db} has no live events here: its process has ended, runs on "
        "another machine, or is a serverlab older than `watch`"
    )


class Follower:
    """Copies a side file's events into a log, line by line as they are written."""

    def __init__(self, path: Path, log: EventLog, cpus: str | None):
        self.path, self.log, self.cpus = path, log, cpus
        self._thread = threading.Thread(target=self._follow, name="serverlab-watch", daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def _follow(self) -> None:
        pin_thread(self.cpus)
        try:
            with self.path.open(encoding="utf-8") as lines:
                while self._copy(lines):
                    time.sleep(POLL_S)
        except OSError:
            pass  # the run's folder went with it
        self.log.close()

    def _copy(self, lines) -> bool:
        """Copies the whole lines written so far; False once the run has ended or gone."""
        while True:
            at = lines.tell()
            line = lines.readline()
            if not line.endswith("\n"):
                lines.seek(at)  # a line half written: read whole next time
                return self.path.exists()
            entry = json.loads(line)
            self.log.add_numbered(entry["id"], entry["event"])
            if json.loads(entry["event"])["kind"] == "end":
                return False
