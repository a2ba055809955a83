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
        outcome = commands.run(
            commands.plan_suite(str(suite), 1.0, None, None), str(db), False, False
        )
    assert outcome.run is not None and outcome.run.finished > 0
    return outcome.run.run_id


def _paired(suite: Path, db: Path, side_a: str, side_b: str, rounds: int, home: Path) -> int:
    with _contestants(home):
        return history_commands.record_paired(str(suite), side_a, side_b, str(db), rounds).run_id


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


# --- the committed compact copy ---------------------------------------------------------
# The tests judge a compact copy of one recording (tests/data/history_runs.json): what the
# figures and flags read of each real test, nothing else, so that their verdicts do not
# depend on the noise of the machine that runs them. Regenerate it with
#   PYTHONPATH=. python tests/history_fixture.py tests/data/history_runs.json
SUMMARY_KEYS = (
    "rps",
    "errors",
    "valid",
    "invalid_reasons",
    "floor_us",
    "intended_rate",
    "achieved_rate",
    "client_cpu_s",
    "spin_cpu_s",
    "duration_s",
)
SAMPLE_KEYS = ("t", "cpu_percent", "rss_bytes", "system_cpu_percent", "engine_cpu_percent")


def export_compact(recorded: Recorded) -> dict:
    from serverlab.results.store import Store

    with Store(recorded.db, create=False) as store:
        suites = [s.__dict__ for s in store.suites()]
        runs = [_run_data(r) for r in store.runs()]
        tests = [_test_data(store.load_details(t)) for t in store.tests()]
    layout = {k: v for k, v in recorded.__dict__.items() if k != "db"}
    return {"layout": layout, "suites": suites, "runs": runs, "tests": tests}


def _run_data(run) -> dict:
    keep = ("id", "suite_id", "started_at", "ended_at", "status", "fingerprint", "versions")
    return {k: getattr(run, k) for k in keep}


def _test_data(test) -> dict:
    summary = test.summary or {}
    compact = {k: summary[k] for k in SUMMARY_KEYS if k in summary}
    compact["latency_us"] = {p: summary["latency_us"][p] for p in ("p50", "p99")}
    keep = ("run_id", "permutation_key", "contestant", "repeat_index", "status", "started_at")
    data = {k: getattr(test, k) for k in keep + ("ended_at", "scenario", "params", "tunables")}
    data.update(validity=test.validity, summary=compact)
    # Rows of SAMPLE_KEYS, rounded to what the figures show: a third of the size.
    data["samples"] = [[_rounded(getattr(s, k)) for k in SAMPLE_KEYS] for s in test.samples]
    data["run_info"] = {k: v for k, v in test.run_info.items() if k == "paired"}
    return data


def _rounded(value):
    return round(value, 3) if isinstance(value, float) else value


def _steady_lines(test: dict) -> list:
    """The compact copy keeps no interval lines: two even halves at the summary's rate stand
    in for them, so that the steady check (never skipped) sees the window the figures had."""
    from serverlab.results.records import EngineInterval

    rps, duration = test["summary"].get("rps"), test["params"].get("duration_s")
    if rps is None or not duration:
        return []
    half = float(duration) / 2
    line = {"rps": rps, "interval_s": half}
    return [
        EngineInterval(i, half * (i + 1), {**line, "elapsed_s": half * (i + 1)}) for i in (0, 1)
    ]


def load_compact(data: dict, db: Path) -> Recorded:
    """The compact copy written into a new database, run ids and order as recorded."""
    from serverlab.results.records import MonitorSample, RecordedTest, StoredSuite
    from serverlab.results.store import Store

    with Store(db) as store:
        suites = {s["id"]: store.add_suite(StoredSuite(**s)) for s in data["suites"]}
        for run in data["runs"]:
            made = store.start_run(
                suites[run["suite_id"]],
                {},
                run["started_at"],
                fingerprint=run["fingerprint"],
                versions=run["versions"],
            )
            assert made.id == run["id"]
            for test in (t for t in data["tests"] if t["run_id"] == run["id"]):
                samples = [
                    MonitorSample(**dict(zip(SAMPLE_KEYS, row, strict=True)))
                    for row in test["samples"]
                ]
                lines = _steady_lines(test)
                store.commit_test(RecordedTest(**{**test, "samples": samples, "intervals": lines}))
            store.finish_run(made.id, run["status"], run["ended_at"])
    return Recorded(db, **data["layout"])


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="history-fixture-") as scratch:
        made = export_compact(record(Path(scratch)))
    Path(sys.argv[1]).write_text(json.dumps(made, indent=None, separators=(",", ":")) + "\n")
