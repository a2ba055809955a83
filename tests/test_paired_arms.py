"""A paired run's arms (A, B, A') stay apart wherever its tests are read: the report gives each
arm its own cells and says which arm a cell is, the paired gate still sets them against each
other, and `history` (which follows ordinary runs) says why it leaves paired runs out. On the
committed recording of real runs (see test_history), in a real SQLite file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from history_fixture import load_compact

from serverlab.results import gate
from serverlab.results.report.builder import report_data

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]
COMPACT = Path(__file__).parent / "data" / "history_runs.json"


def serverlab(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return load_compact(json.loads(COMPACT.read_text()), tmp_path_factory.mktemp("a") / "lab.db")


def test_the_report_keeps_each_arm_of_a_paired_run_in_cells_of_its_own(recorded):
    run = recorded.paired_regression_run
    cells = [c for c in report_data(recorded.db, f"run:{run}")["cells"] if c["metric"] == "rps"]
    # Four rounds: A and A' four tests each, B (the slow contestants folder) four; never 12.
    assert sorted((c["arm"], c["n"]) for c in cells) == [("A", 4), ("A'", 4), ("B", 4)]
    by_arm = {c["arm"]: c for c in cells}
    assert by_arm["B"]["median"] < 0.5 * by_arm["A"]["median"], "the planted regression"
    assert by_arm["B"]["scenario"].startswith("files-keepalive, arm B (contestants=")
    assert by_arm["A'"]["scenario"].startswith("files-keepalive, arm A' (contestants=")
    # An ordinary run's cells carry no arm.
    plain = report_data(recorded.db, f"run:{recorded.planted_runs[0]}")["cells"]
    assert {c["arm"] for c in plain} == {""}
    assert {c["scenario"] for c in plain} == {"files-keepalive"}


def test_the_terminal_summary_says_which_arm_each_row_is(recorded, tmp_path):
    run = recorded.paired_regression_run
    done = serverlab(
        "report", f"run:{run}", "--db", str(recorded.db), "--summary", "-o", str(tmp_path / "r")
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for arm in ("arm A (contestants=", "arm B (contestants=", "arm A' (contestants="):
        assert text.count(arm) >= 2, arm  # its row, and its line in "at a glance"


def test_the_paired_gate_still_sets_b_against_a_and_a_again(recorded):
    rows = gate.paired_gate(recorded.db, recorded.paired_regression_run, ["rps"], threshold=10)
    assert [(r.series, r.n_a, r.n_b) for r in rows] == [("files-keepalive / rust-zhtta", 8, 4)]


def test_history_of_paired_runs_only_says_why_it_has_nothing_to_follow(recorded):
    runs = f"run:{recorded.paired_regression_run},{recorded.paired_same_run}"
    done = serverlab("history", runs, "--db", str(recorded.db))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        f"serverlab: error: the selection holds only paired runs (runs "
        f"{recorded.paired_regression_run}, {recorded.paired_same_run}): history follows "
        "ordinary runs."
    )


def test_history_over_ordinary_and_paired_runs_says_which_it_left_out(recorded):
    done = serverlab("history", "all", "--db", str(recorded.db), "--metric", "rps")
    assert done.returncode == 0, done.stderr
    left = f"left out: paired runs {recorded.paired_regression_run}, {recorded.paired_same_run}."
    assert left in " ".join(done.stderr.split())
    assert "change point in throughput" in done.stdout
