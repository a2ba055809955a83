"""The gate and `compare` judge runs of one machine only: two sides from different machine
fingerprints are inconclusive (exit 3), naming both, unless --mix-machines, which the verdict
then says. On the committed recording of real runs (see test_history), in real SQLite files."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from history_fixture import load_compact

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]
COMPACT = Path(__file__).parent / "data" / "history_runs.json"
XEON = {
    "cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
    "cpus": 64,
    "kernel": "6.8.0-1019-aws",
    "memory_gib": 256,
    "governor": None,
}


def serverlab(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """The recording, with runs 4 and 5 (the last two of the first version: no regression
    against runs 1 to 3) moved to a 64-CPU Xeon."""
    recorded = load_compact(json.loads(COMPACT.read_text()), tmp_path_factory.mktemp("m") / "x.db")
    moved = recorded.planted_runs[3:5]
    with sqlite3.connect(recorded.db) as db:
        db.executemany(
            "UPDATE runs SET fingerprint_json = ? WHERE id = ?",
            [(json.dumps(XEON), run_id) for run_id in moved],
        )
    return recorded


def sides(recorded) -> tuple[str, str]:
    runs = recorded.planted_runs
    return "run:" + ",".join(map(str, runs[:3])), "run:" + ",".join(map(str, runs[3:5]))


@pytest.mark.parametrize(
    "options",
    [("--fail-on-regression", "25", "--metric", "rps"), (), ("--json",)],
    ids=["gate", "compare", "json"],
)
def test_sides_from_two_machines_are_inconclusive_and_both_machines_are_named(
    two_machines, options
):
    a, b = sides(two_machines)
    done = serverlab("compare", a, b, "--db", str(two_machines.db), *options)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout == "", "a table or verdict across machines"
    line = " ".join(done.stderr.split())
    assert line.startswith("serverlab: inconclusive: A and B ran on different machines")
    assert "64 CPUs Intel(R) Xeon(R) Platinum 8375C" in line and "--mix-machines" in line
    with sqlite3.connect(two_machines.db) as db:
        here = json.loads(
            db.execute(
                "SELECT fingerprint_json FROM runs WHERE id = ?", (two_machines.planted_runs[0],)
            ).fetchone()[0]
        )
    assert f"{here['cpus']} CPUs {here['cpu_model']}" in line


def test_mix_machines_compares_them_and_says_so_in_the_verdict(two_machines):
    a, b = sides(two_machines)
    gate = ("--fail-on-regression", "25", "--metric", "rps")
    done = serverlab("compare", a, b, "--db", str(two_machines.db), *gate, "--mix-machines")
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("gate: no regression (exit 0); machines mixed (--mix-machines): A")
    assert "B on " in verdict and "64 CPUs Intel(R) Xeon(R)" in verdict
    data = json.loads(
        serverlab("compare", a, b, "--db", str(two_machines.db), "--json", "--mix-machines").stdout
    )
    assert data["machines"]["mixed"] is True and len(data["machines"]["b"]) == 1


def test_runs_of_one_machine_are_compared_as_before(two_machines):
    runs = two_machines.planted_runs
    a, b = f"run:{runs[0]},{runs[1]}", f"run:{runs[2]}"
    gate = ("--fail-on-regression", "25", "--metric", "rps")
    done = serverlab("compare", a, b, "--db", str(two_machines.db), *gate)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "machines" not in done.stdout and "different machines" not in done.stderr
    assert done.stdout.strip().splitlines()[-1] == "gate: no regression (exit 0)"
