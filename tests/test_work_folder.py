"""A run's work folder (`work/<pid>.<start>` beside the database) holds its tests' folders,
and with them the run's TLS key: whatever ends the command (success, an exception in a test,
SIGTERM), no such folder outlives it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_manifest
from test_tls import TLS_MANIFEST

from serverlab import commands
from serverlab.run.execution import executor

SERVERLAB = str(Path(sys.executable).parent / "serverlab")
SUITE = """name = "work"
repeats = 1
contestants = ["reference-tls"]

[[scenario]]
name = "tls"
behaviour = "keepalive"
transport = "tls"
clients = 2
duration_s = {duration}
"""


@pytest.fixture
def suite(contestants_dir, tmp_path):
    write_manifest(contestants_dir, "reference-tls", TLS_MANIFEST)

    def write(duration: float) -> Path:
        path = tmp_path / "suite.toml"
        path.write_text(SUITE.format(duration=duration))
        return path

    return write


def _run(suite_path: Path, db: Path) -> subprocess.Popen:
    argv = [SERVERLAB, "run", str(suite_path), "--db", str(db), "--skip-verify"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _left_in(work: Path) -> list[str]:
    return sorted(str(p.relative_to(work)) for p in work.rglob("*")) if work.exists() else []


def test_a_successful_run_leaves_no_folder_of_its_own_beside_the_database(suite, tmp_path):
    db = tmp_path / "lab.db"
    done = _run(suite(1), db)
    out, _ = done.communicate(timeout=120)
    assert done.returncode == 0, out
    assert "1 tests finished (0 crashed, 0 invalid)" in out
    assert _left_in(tmp_path / "work") == []


def test_sigterm_in_the_middle_of_a_test_leaves_no_key_and_no_work_folder(suite, tmp_path):
    db = tmp_path / "lab.db"
    running = _run(suite(20), db)
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "work").rglob("server.key")):
            assert time.monotonic() < deadline and running.poll() is None, running.stdout
            time.sleep(0.1)
        time.sleep(1)  # the load is under way
        running.send_signal(signal.SIGTERM)
        out, _ = running.communicate(timeout=60)
    finally:
        if running.poll() is None:
            os.kill(running.pid, signal.SIGKILL)
    assert running.returncode == 128 + signal.SIGTERM, out
    assert _left_in(tmp_path / "work") == []
    assert not list(tmp_path.rglob("server.key"))


def test_an_exception_in_a_test_leaves_no_key_and_no_work_folder(suite, tmp_path, monkeypatch):
    def broken(*_args):
        raise RuntimeError("a bug in judging the test")

    monkeypatch.setattr(executor, "assess", broken)
    planned = commands.plan_suite(str(suite(1)), 1.0, None, None, None)
    with pytest.raises(RuntimeError, match="a bug in judging"):
        commands.run(planned, str(tmp_path / "lab.db"), resume=False, verify_first=False)
    assert _left_in(tmp_path / "work") == []
    assert not list(tmp_path.rglob("server.key"))
