"""The `serverlab` command as a user runs it: exit codes, one-line errors, serve and Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
from conftest import write_manifest

from serverlab.base import httpclient
from serverlab.base.ports import free_port

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]


def serverlab(*args, timeout=120):
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=timeout)


def test_contestants_lists_good_and_broken_manifests(contestants_dir):
    write_manifest(contestants_dir, "broken", 'name = "broken"\nlanguage = 3\n')
    done = serverlab("contestants")
    assert done.returncode == 0
    assert "reference" in done.stdout and "Python 3" in done.stdout
    assert "nothing to build" in done.stdout
    assert "broken" in done.stdout and "invalid manifest" in done.stdout


def test_unknown_contestant_is_one_line_and_exit_2(contestants_dir):
    done = serverlab("verify", "nope")
    assert done.returncode == 2
    assert done.stderr.strip() == ("serverlab: error: unknown contestant 'nope' (known: reference)")
    assert "Traceback" not in done.stderr


def test_verify_of_a_broken_manifest_fails_clearly(contestants_dir):
    write_manifest(contestants_dir, "broken", 'name = "broken"\nlanguage = 3\n')
    done = serverlab("verify", "broken")
    assert done.returncode == 1
    assert "broken/contestant.toml: key 'architecture': missing required key" in done.stdout


def test_verify_json_and_exit_codes(contestants_dir):
    good = serverlab("verify", "reference", "--case", "perf.*", "--json")
    assert good.returncode == 0, good.stderr
    [report] = json.loads(good.stdout)
    assert report["ok"] and {c["status"] for c in report["cases"]} == {"PASS"}
    assert "PASS  perf.get" in good.stderr
    bad = serverlab("verify", "reference", "--case", "perf.get", "--set", "fault=no_date_perf")
    assert bad.returncode == 1
    assert "FAIL  perf.get  200 response without a Date header" in bad.stdout
    assert "0 passed, 0 warned, 1 failed" in bad.stdout


def test_verify_unknown_tunable_is_a_user_error(contestants_dir):
    done = serverlab("verify", "reference", "--set", "threads=4")
    assert done.returncode == 1
    assert "has no tunable 'threads' (known: clock_skew_ms, die_after, fault)" in done.stdout


def test_verify_needs_names_or_all(contestants_dir):
    done = serverlab("verify")
    assert done.returncode == 2 and "name contestants or give --all" in done.stderr


def test_serve_runs_until_ctrl_c_and_stops_cleanly(contestants_dir, tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [*SERVERLAB, "serve", "reference", "--port", str(port), "--docroot", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = process.stdout.readline()
        assert f"listening on http://127.0.0.1:{port}" in first_line
        assert "log:" in process.stdout.readline()
        (tmp_path / "f.txt").write_text("served")
        assert httpclient.get(port, "/files/f.txt").body == b"served"
        children = psutil.Process(process.pid).children(recursive=True)
        assert children, "the contestant runs under serverlab"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
        assert "stopped" in process.stdout.read()
        time.sleep(0.1)
        assert not any(child.is_running() for child in children)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def test_build_reports_each_contestant_and_fails_if_any_failed(tmp_path, monkeypatch):
    base = """
language = "sh"
architecture = "none"
implements = ["perf"]
version = "echo 1"
start = "true {port} {host}"
"""
    write_manifest(
        tmp_path, "good", f'name = "good"\n{base}build = "touch out"\nartifacts = ["out"]\n'
    )
    write_manifest(tmp_path, "bad", f'name = "bad"\n{base}build = "echo boom; exit 3"\n')
    write_manifest(tmp_path, "lazy", f'name = "lazy"\n{base}build = "true"\nartifacts = ["x"]\n')
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path))
    done = serverlab("build")
    assert done.returncode == 2
    assert "built   good" in done.stdout and (tmp_path / "good" / "out").exists()
    assert "FAILED  bad" in done.stderr and "exit code 3" in done.stderr
    assert "boom" in done.stderr
    assert "FAILED  lazy" in done.stderr and "left no x" in done.stderr
    assert "build failed for bad, lazy" in done.stderr
    assert serverlab("build", "good").returncode == 0
