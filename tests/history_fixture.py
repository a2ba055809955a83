"""Records the real runs the history and gate tests judge, once per test session, into a
temporary database (no results database is committed).

The subject is rust-zhtta serving a seeded file set (files of 200 KB to 2 MB, fixed file
set seed; the engine's path choice has its own fixed seed) over kept-alive connections.
The planted regression is a new "version" of the contestant whose chunked reads go 1 KB at a
time instead of 512,000 bytes: measured on this machine it serves about a quarter of the
requests (see the history report). Reading each file whole, the starting code's way, is no
slower here than 512 KB chunks (it saves the extra reads), so it would plant nothing.

A version is a contestants folder of its own: the same built binary (its target folder
linked), a manifest whose default chunk size and version line differ. The suite never names
the chunk size, so both versions run the same series, as a real upgrade would.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from serverlab import commands, history_commands

ZHTTA = "rust-zhtta"
FAST_CHUNK = "512000"
SLOW_CHUNK = "1024"
SUITE = """
name = "history-zhtta"
description = "rust-zhtta serving a seeded file set over kept-alive connections"
repeats = {repeats}
contestants = ["rust-zhtta"]

[filesets.mixed]
seed = 24
count = 20
min_bytes = 200_000
max_bytes = 2_000_000
size_distribution = "uniform"

[[scenario]]
name = "files-keepalive"
behaviour = "keepalive"
clients = 8
warmup_s = 0.3
duration_s = 1
files = "mixed"
tunables.rust-zhtta = {{ read = "chunked" }}
"""


@dataclass
class Recorded:
    db: Path
    planted_runs: list[int]  # in order; the regression starts at planted_runs[first_slow]
    first_slow: int
    paired_regression_run: int
    paired_same_run: int


def contestant_version(root: Path, label: str, chunk: str) -> Path:
    """A contestants folder holding rust-zhtta as version `label`, reading `chunk` bytes a
    time by default; the binary is the built one."""
    built = Path(os.environ.get("SERVERLAB_CONTESTANTS", "contestants")).resolve() / ZHTTA
    folder = root / label / ZHTTA
    folder.mkdir(parents=True)
    (folder / "target").symlink_to(built / "target")
    text = (built / "contestant.toml").read_text()
    text = re.sub(r"(?m)^version = .*$", f'version = "echo zhtta {label}"', text)
    text = re.sub(
        r'(\[tunables\.chunk_size\][^\[]*?default = )"[^"]*"', rf'\1"{chunk}"', text, flags=re.S
    )
    (folder / "contestant.toml").write_text(text)
    return folder.parent


def record(root: Path, runs_before: int = 5, runs_after: int = 5, rounds: int = 4) -> Recorded:
    """A history of runs_before + runs_after runs (the last runs_after on the slow version),
    then two paired runs: fast against slow, and fast against fast (A/A)."""
    db = root / "lab.db"
    suite = root / "history.toml"
    suite.write_text(SUITE.format(repeats=2))
    fast = contestant_version(root, "1.0", FAST_CHUNK)
    slow = contestant_version(root, "1.1", SLOW_CHUNK)
    planted = [
        _one_run(suite, db, fast if i < runs_before else slow)
        for i in range(runs_before + runs_after)
    ]
    one = root / "paired.toml"
    one.write_text(SUITE.format(repeats=1))
    regression = _paired(one, db, f"contestants={fast}", f"contestants={slow}", rounds, fast)
    same = _paired(one, db, f"contestants={fast}", f"contestants={fast}", rounds, fast)
    return Recorded(db, planted, runs_before, regression, same)


def _one_run(suite: Path, db: Path, contestants: Path) -> int:
    with _contestants(contestants):
        outcome = commands.run(commands.load(str(suite), 1.0, None, None), str(db), False, False)
    assert outcome.run is not None and outcome.run.finished > 0
    return outcome.run.run_id


def _paired(suite: Path, db: Path, side_a: str, side_b: str, rounds: int, home: Path) -> int:
    with _contestants(home):
        return history_commands.record_paired(str(suite), side_a, side_b, str(db), rounds)


class _contestants:
    """SERVERLAB_CONTESTANTS set to one version's folder for a while."""

    def __init__(self, folder: Path):
        self.folder, self.saved = folder, None

    def __enter__(self):
        self.saved = os.environ.get("SERVERLAB_CONTESTANTS")
        os.environ["SERVERLAB_CONTESTANTS"] = str(self.folder)

    def __exit__(self, *_exc):
        if self.saved is None:
            os.environ.pop("SERVERLAB_CONTESTANTS", None)
        else:
            os.environ["SERVERLAB_CONTESTANTS"] = self.saved
