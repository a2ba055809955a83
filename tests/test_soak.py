"""The soak's memory verdict (bench/soak.py) is about boundedness: a real process whose
memory fills and then holds is bounded, with its plateau found where the filling stopped,
and one that keeps allocating is growing, whatever the length of the series."""

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "soak.py"
STEP_S, SAMPLES = 0.05, 90
# A child that allocates half a MiB (written, so resident) every STEP_S: `fill` stops after
# 24 steps and holds what it has, `leak` goes on.
CHILD = """
import sys, time
held, steps = [], 24 if sys.argv[1] == "fill" else 10**6
print("ready", flush=True)
for _ in range(steps):
    held.append(b"x" * (1 << 19))
    time.sleep(STEP_S)
time.sleep(60)
""".replace("STEP_S", str(STEP_S))


@pytest.fixture(scope="module")
def soak():
    spec = importlib.util.spec_from_file_location("soak", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def rss_series(soak, kind: str, samples: int = SAMPLES) -> list[dict]:
    """The child's RSS (kernel, VmRSS) every STEP_S, as the soak's rows."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, kind], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        start, rows = time.monotonic(), []
        for i in range(samples):
            time.sleep(max(0.0, start + i * STEP_S - time.monotonic()))
            rows.append({"t_s": time.monotonic() - start, "rss": soak.kib_of(child.pid)})
        return rows
    finally:
        child.kill()
        child.wait()


# MiB per 10 minutes: a held heap reads about 0 and the allocating child 6,000.
LIMIT = 100.0


def test_memory_that_fills_then_holds_is_bounded_with_its_plateau_where_the_fill_ended(soak):
    rows = rss_series(soak, "fill")
    points = soak.series(rows, lambda r: r["rss"], 0.0)
    judged = soak.plateau(points, LIMIT)
    assert judged["verdict"] == "bounded", judged
    assert judged["first"] > 10 * LIMIT, "the first third holds the fill"
    assert 0.5 < judged["plateau_s"] < 3.0, judged
    # The old verdict: one slope after a warm-up scaled down with the soak's length (the
    # first 5 minutes of 90, here the first sample period), read the fill as a leak.
    assert soak.slope_mib_per_10min(rows, lambda r: r["rss"], STEP_S) > LIMIT


def test_memory_that_keeps_growing_is_growing_not_filling(soak):
    points = soak.series(rss_series(soak, "leak"), lambda r: r["rss"], 0.0)
    judged = soak.plateau(points, LIMIT)
    assert judged["verdict"] == "growing", judged
    assert judged["plateau_s"] is None


def test_too_few_samples_judge_nothing(soak):
    points = soak.series(rss_series(soak, "leak", samples=23), lambda r: r["rss"], 0.0)
    assert soak.plateau(points, LIMIT)["verdict"] == "too-short"


def test_a_soak_stopped_by_ctrl_c_keeps_its_rows_and_leaves_no_process(tmp_path):
    # A real soak, small (50 clients, 2 minutes): Ctrl-C after its first row.
    import os
    import signal

    import psutil

    env = {**os.environ, "SOAK_MIN": "2", "CLIENTS": "50"}
    soak = subprocess.Popen(
        [sys.executable, str(BENCH)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        folder = Path(soak.stdout.readline().split("results in ")[1].strip())
        row = soak.stdout.readline()
        children = psutil.Process(soak.pid).children(recursive=True)
        soak.send_signal(signal.SIGINT)
        _, err = soak.communicate(timeout=60)
    finally:
        if soak.poll() is None:
            soak.kill()
    assert " t=" in row and soak.returncode == 130, (row, err)
    assert err.strip() == f"soak: interrupted; samples so far in {folder / 'samples.csv'}"
    assert len((folder / "samples.csv").read_text().splitlines()) >= 2  # a header, a row
    assert children and not [c for c in children if c.is_running() and c.status() != "zombie"]
