"""The suite runner against the reference server and the real load engine."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import write_manifest

from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.results.store import Store
from serverlab.run.execution.executor import Environment, smoke_check
from serverlab.run.execution.testplan import TestPlan
from serverlab.run.host import shapedlink
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.runner import Session, run_suite
from serverlab.run.plan.suite.load import load_suite

SERVERLAB = [str(Path(sys.executable).parent / "serverlab")]


def write_suite(tmp_path: Path, body: str, repeats: int = 1) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(f'name = "t"\nrepeats = {repeats}\ncontestants = ["reference"]\n{body}')
    return path


FAST = """
[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 4
duration_s = {duration}
"""


def run_in_process(suite_path: Path, db: Path, resume: bool = False):
    suite = load_suite(suite_path)
    with Store(db) as store:
        env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=db.parent / "work")
        session = Session(suite, plan_tests(suite, find), store, env, resume=resume)
        outcome = run_suite(session)
        tests = [store.load_details(t) for t in store.tests([outcome.run_id])]
        runs = store.runs()
    return outcome, tests, runs


def test_every_test_is_measured_and_stored(contestants_dir, tmp_path):
    suite = write_suite(tmp_path, FAST.format(duration=1.5), repeats=2)
    outcome, tests, runs = run_in_process(suite, tmp_path / "lab.db")
    assert (outcome.finished, outcome.crashed, outcome.invalid) == (2, 0, 0)
    assert [t.repeat_index for t in tests] == [0, 1]
    for test in tests:
        assert test.status == "ok", test.validity
        assert test.summary["requests"] > 50
        assert test.summary["errors"]["connect"] == 0
        assert test.histograms["latency_us"]
        assert len(test.samples) >= 10
        assert max(s.engine_cpu_percent or 0 for s in test.samples) > 0
        assert [s.phase for s in test.server_stats] == ["start", "end"]
        served = test.server_stats[1].stats["requests"]["total"]
        assert served >= test.summary["requests"]
    (run,) = runs
    assert run.status == "finished"
    assert run.machine["pinning"] == {
        "server": Pinning.default().server,
        "engine": Pinning.default().engine,
    }
    assert run.machine["contestant_versions"]["reference"].startswith("Python 3")
    assert "tls_speed" not in run.machine, "openssl speed is for runs with TLS tests only"


def test_a_server_that_dies_mid_test_is_a_crash_and_the_suite_goes_on(contestants_dir, tmp_path):
    body = (
        FAST.format(duration=4).replace('name = "fast"', 'name = "dies"')
        + '[scenario.tunables.reference]\ndie_after = "1.5"\n'
        + FAST.format(duration=1)
    )
    outcome, tests, _ = run_in_process(write_suite(tmp_path, body), tmp_path / "lab.db")
    assert outcome.crashed == 1 and outcome.finished == 2
    dead, alive = tests
    assert dead.scenario == "dies" and dead.status == "crashed"
    assert dead.crash.signal == signal.SIGKILL
    assert 0.5 < dead.crash.time < 4
    assert dead.summary is not None and dead.summary["errors"]["connect"] > 0
    assert alive.scenario == "fast" and alive.status == "ok"


BROKEN_MANIFEST = """
name = "broken"
language = "sh"
architecture = "none"
implements = ["perf"]
version = "echo 1"
start = "echo cannot start on {port} {host} >&2; exit 2"
"""


def test_a_server_that_cannot_start_is_recorded_not_fatal(contestants_dir, tmp_path):
    write_manifest(contestants_dir, "broken", BROKEN_MANIFEST)
    body = FAST.format(duration=1).replace('name = "fast"', 'name = "f"\ncontestants = ["broken"]')
    suite = write_suite(tmp_path, body + FAST.format(duration=1))
    outcome, tests, _ = run_in_process(suite, tmp_path / "lab.db")
    broken, fine = tests
    assert broken.status == "crashed" and fine.status == "ok"
    assert broken.crash.exit_code == 2
    assert "exited before it was ready" in broken.validity["start_failed"]
    assert "cannot start on" in Path(broken.validity["server_log"]).read_text()


def _start_cli_run(suite: Path, db: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*SERVERLAB, "run", str(suite), "--db", str(db), "--skip-verify", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _finished_rows(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT id, permutation_key, repeat_index FROM tests").fetchall()
    except sqlite3.OperationalError:
        return []  # schema not written yet


def _wait_for_rows(db: Path, count: int, timeout_s: float = 60) -> list[tuple]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = _finished_rows(db)
        if len(rows) >= count:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} tests finished in {timeout_s} s")


def _reference_servers(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "reference_server.py" in cmdline and marker in cmdline:
            found.append(proc)
    return found


def test_kill_9_mid_suite_then_resume_loses_and_reruns_nothing(contestants_dir, tmp_path):
    suite = write_suite(tmp_path, FAST.format(duration=1.5), repeats=4)
    db = tmp_path / "lab.db"
    first = _start_cli_run(suite, db)
    before = _wait_for_rows(db, 1)
    time.sleep(0.7)  # into the next test, with its server and engine running
    first.kill()
    first.wait()
    kept = _finished_rows(db)
    assert 1 <= len(kept) < 4
    resumed = _start_cli_run(suite, db, "--resume")
    out, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, out
    rows = _finished_rows(db)
    assert sorted(r[2] for r in rows) == [0, 1, 2, 3], "each repeat exactly once"
    assert set(kept) <= set(rows) and set(before) <= set(rows), "finished tests untouched"
    assert f"{len(kept)} kept from before" in out
    assert _reference_servers(str(tmp_path)) == [], "the killed run's server was reaped"


def test_ctrl_c_abandons_the_test_in_hand_and_keeps_the_rest(contestants_dir, tmp_path):
    suite = write_suite(tmp_path, FAST.format(duration=2), repeats=5)
    db = tmp_path / "lab.db"
    run = _start_cli_run(suite, db)
    _wait_for_rows(db, 1)
    time.sleep(0.5)
    run.send_signal(signal.SIGINT)
    out, _ = run.communicate(timeout=60)
    assert run.returncode == 130, out
    assert "interrupted" in out
    rows = _finished_rows(db)
    assert 1 <= len(rows) < 5
    with sqlite3.connect(db) as conn:
        (status,) = conn.execute("SELECT status FROM runs").fetchone()
    assert status == "interrupted"
    assert _reference_servers(str(tmp_path)) == []


def test_dry_run_shows_the_matrix_and_the_estimate(contestants_dir, tmp_path):
    body = FAST.format(duration=10).replace("clients = 4", "clients = [1, 2, 3]")
    out = subprocess.run(
        [*SERVERLAB, "run", str(write_suite(tmp_path, body, repeats=2)), "--dry-run"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "3 permutations x 2 repeats = 6 tests, about 1.6 minutes" in out
    assert "clients=3" in out


def test_dry_run_json_prints_each_tests_plan_in_run_order(contestants_dir, tmp_path):
    body = FAST.format(duration=10).replace("clients = 4", "clients = [1, 2]")
    suite = write_suite(tmp_path, body, repeats=2)
    out = subprocess.run(
        [*SERVERLAB, "run", str(suite), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    plans = [TestPlan.from_json(line) for line in out.splitlines()]
    assert [(p.params["clients"], p.repeat) for p in plans] == [(1, 0), (2, 0), (1, 1), (2, 1)]
    assert plans[0].measured["connections"] == 1
    assert not (tmp_path / "results").exists(), "a dry run stores nothing"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--contestants", "nobody"], "names no test"),
        (["--scale", "0"], "--scale must be positive"),
        (["--json"], "--json goes with --dry-run"),
        (["--rerun-busy", "-1"], "--rerun-busy -1: give 0 or more re-runs"),
    ],
)
def test_bad_run_arguments_are_one_line_errors(contestants_dir, tmp_path, args, message):
    suite = write_suite(tmp_path, FAST.format(duration=1))
    done = subprocess.run([*SERVERLAB, "run", str(suite), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_priming_runs_load_the_server_first_and_only_the_last_run_is_the_figure(
    contestants_dir, tmp_path
):
    body = FAST.format(duration=1) + "priming_runs = 1\n"
    outcome, (test,), _ = run_in_process(write_suite(tmp_path, body), tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    (priming,) = test.run_info["priming"]
    assert priming["requests"] > 50
    served = test.server_stats[-1].stats["requests"]["total"]
    assert served >= priming["requests"] + test.summary["requests"]
    assert test.samples[-1].t >= 1.5, "the monitor ran through the priming run too"


SYSLOG = """
[[scenario]]
name = "flood"
behaviour = "syslog"
clients = 1
syslog_messages = 20000
syslog_transport = "tcp"
syslog_framing = "{framing}"
syslog_mode = "{mode}"
"""


@pytest.mark.parametrize(("framing", "mode"), [("newline", "count"), ("octet", "parse")])
def test_a_syslog_flood_is_measured_at_the_receiver(contestants_dir, tmp_path, framing, mode):
    suite = write_suite(tmp_path, SYSLOG.format(framing=framing, mode=mode))
    _, (test,), _ = run_in_process(suite, tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    figures = test.summary["syslog"]
    assert figures["sent"] == 20000
    assert figures["received"] == 20000 and figures["lost"] == 0
    # The mode reached the server as its tunable, and every engine message parsed there.
    assert test.tunables["syslog_mode"] == figures["mode"] == mode
    assert (figures["parsed"], figures["malformed"]) == ((20000, 0) if mode == "parse" else (0, 0))
    assert test.validity["short_flood"].endswith("under 10 s"), "20,000 messages take < 10 s"
    assert test.summary["rps"] == figures["messages_per_s"] > 0
    assert test.summary["sender_rps"] >= figures["messages_per_s"]
    assert test.server_stats[-1].stats["syslog"]["received"] == 20000


FILES = """
[filesets.few]
seed = 5
count = {count}
min_bytes = {size}
max_bytes = {size}

[[scenario]]
name = "downloads"
behaviour = "keepalive"
clients = 2
duration_s = {duration}
files = "few"
"""


def test_a_file_set_is_the_docroot_and_its_files_are_fetched(contestants_dir, tmp_path):
    suite = write_suite(tmp_path, FILES.format(count=5, size=20_000, duration=1))
    _, (test,), _ = run_in_process(suite, tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    assert test.summary["ok"] > 20 and test.summary["errors"]["status"] == 0
    assert test.summary["bytes_read"] >= test.summary["ok"] * 20_000
    plan = test.run_info["engine_plan"]
    assert [p["path"] for p in plan["paths"]] == [f"/files/f000{i}.bin" for i in range(5)]
    assert len(list((tmp_path / "filesets").glob("*/f*.bin"))) == 5


def test_a_shaped_link_limits_what_the_server_can_send(contestants_dir, tmp_path):
    body = FILES.format(count=1, size=500_000, duration=3)
    body = "[links.slow]\nrate_mbit = 10\ndelay_ms = 50\n" + body + 'link = "slow"\n'
    _, (test,), runs = run_in_process(write_suite(tmp_path, body), tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    rate = test.summary["bytes_read"] / test.summary["duration_s"]
    assert 0.7e6 < rate < 1.4e6, rate  # 10 Mbit/s is 1.25 MB/s, headers included
    assert test.run_info["link"]["rate_mbit"] == 10
    assert ("link_delay_unavailable" in test.validity) == (
        not runs[0].machine["link_delay_available"]
    )
    link = test.run_info["link"]
    assert link["delay_by"] == runs[0].machine["link_delay_by"]
    if link["delay_applied"]:  # the round trip proves the delay: 2 x 50 ms
        assert 90 <= link["rtt_ms"] <= 110, link
    assert not [
        n for n in shapedlink.existing() if n.startswith(f"{shapedlink.PREFIX}{os.getpid()}-")
    ]


def test_dry_run_with_a_profile_shows_the_scaled_matrix(contestants_dir, tmp_path):
    body = (
        FAST.format(duration=10).replace("clients = 4", "clients = [1, 2, 3]") + "requests = 1000\n"
    ).replace("duration_s = 10\n", "")
    body = "[profiles.quick]\ncount_scale = 0.1\n[profiles.quick.only]\nclients = [2]\n" + body
    out = subprocess.run(
        [*SERVERLAB, "run", str(write_suite(tmp_path, body)), "--dry-run", "--profile", "quick"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "1 permutations x 1 repeats" in out
    assert "clients=2" in out and "requests=100" in out


def test_push_tests_keep_the_emit_cycles_the_engine_saw(contestants_dir, tmp_path):
    body = """
[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 20
ramp_up_s = 0.2
duration_s = 4
emit_interval_ms = 200
"""
    _, (test,), _ = run_in_process(write_suite(tmp_path, body), tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    cycles = {e.seq: e for e in test.emits}
    assert len(cycles) >= 5
    # The last cycle can be emitted just before the engine stops and be read only in part.
    before_the_end = [cycles[seq] for seq in sorted(cycles)[:-1]]
    full = [e for e in before_the_end if e.total == 20]
    assert full and all(e.received == 20 for e in full)
    assert all(1 <= e.place <= e.total and e.duration_ms >= 0 for e in test.emits)
    assert test.summary["events"]["lost"] == 0


def test_the_smoke_check_refuses_a_server_of_another_spec_major(contestants_dir, tmp_path):
    suite = load_suite(write_suite(tmp_path, FAST.format(duration=1)))
    (plan,) = plan_tests(suite, find)
    manifest = find("reference")
    with ContestantServer(manifest) as server:
        assert smoke_check(server, plan) is None
    with ContestantServer(manifest, settings={"fault": "old_spec_version"}) as server:
        assert smoke_check(server, plan) == "/stats spec_version is '1.0', not 3.x"


def test_emitters_stop_before_the_clients_leave_so_nothing_is_delivered_to_nobody(
    contestants_dir, tmp_path
):
    body = """
[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 20
ramp_up_s = 0.2
duration_s = 5
emit_interval_ms = 200
"""
    _, (test,), _ = run_in_process(write_suite(tmp_path, body), tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    cycles = {e.seq: e for e in test.emits}
    # Cycles during the ramp reach fewer subscribers; none is cut short at the end.
    assert all(e.received == e.total for e in cycles.values()), "no cycle cut short"
    assert cycles[max(cycles)].total == 20
    start, end = (s.stats for s in test.server_stats)
    assert end["events"]["e1"]["active"] is False, "cleared while the clients were there"
    delivered = end["responses"]["push"] - start["responses"]["push"]
    assert delivered == test.summary["events"]["received"] > 0
