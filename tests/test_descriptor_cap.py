"""Tests a descriptor cap cannot hold are refused before anything runs, and a profile's
planned time is printed and held to its budget: the real `serverlab run` under a real
RLIMIT_NOFILE, with CAP_SYS_RESOURCE dropped (setpriv) so that the run cannot lift it."""

import json
import re
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

from serverlab.run.plan import descriptors
from serverlab.run.plan.suite.permutation import QUIET_END_S

SERVERLAB = str(Path(sys.executable).parent / "serverlab")
SEED_004 = Path(__file__).parent.parent / "suites" / "seed-004-server-push.toml"


def capped_run(cap: int, *args: str) -> subprocess.CompletedProcess:
    """`serverlab run ARGS` whose descriptor limit is `cap`, soft and hard, for good."""

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (cap, cap))

    return subprocess.run(
        ["setpriv", "--bounding-set", "-sys_resource", SERVERLAB, "run", *args],
        capture_output=True,
        text=True,
        preexec_fn=limit,
    )


def test_a_test_the_cap_cannot_hold_is_refused_before_anything_runs_and_the_rest_run(
    contestants_dir, tmp_path
):
    cap = 2048
    many = cap - descriptors.RESERVED + 1  # one connection too many for one process
    suite = tmp_path / "suite.toml"
    suite.write_text(
        'name = "t"\ncontestants = ["reference"]\n'
        f'[[scenario]]\nname = "held"\nbehaviour = "keepalive"\nclients = [{many}, 4]\n'
        "duration_s = 1\n"
    )
    db = tmp_path / "lab.db"
    done = capped_run(cap, str(suite), "--db", str(db), "--skip-verify")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    refused = f"refused, not run: held x reference clients={many}: reference as one process"
    assert lines[0].startswith(refused), "listed first, before anything runs"
    assert f"would need {cap + 1:,} descriptors" in lines[0]
    assert f"cap of {cap:,}" in lines[0]
    with sqlite3.connect(db) as con:
        ran = [json.loads(params) for (params,) in con.execute("SELECT params_json FROM tests")]
    assert [p["clients"] for p in ran] == [4]


def test_the_medium_profile_of_seed_004_refuses_its_20000_client_cells_and_prints_its_time():
    done = capped_run(20000, str(SEED_004), "--profile", "medium", "--dry-run")
    assert done.returncode == 0, done.stderr
    out = done.stdout.replace("\n", " ")
    refused = re.findall(r"refused, not run: (\S+) x (\S+) clients=(\d+)", out)
    # 13 cells of 20,000 clients per server (4 + 4 + 1 + 4), against each of three servers.
    assert len(refused) == 39
    assert {clients for _, _, clients in refused} == {"20000"}
    found = re.search(r"195 tests, 39 refused: 156 to run, about ([\d.]+) h of machine time", out)
    assert found, out[-400:]
    assert float(found.group(1)) <= 3.0
    assert "(budget 3 h)" in out


def test_every_medium_push_test_holds_its_cycles_after_the_ramp():
    done = capped_run(20000, str(SEED_004), "--profile", "medium", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr

    plans = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(plans) == 156
    for plan in plans:
        p = plan["params"]
        interval = p.get("emit_interval_ms") or (
            p["longpoll_duration_ms"] if p["behaviour"] == "longpoll" else None
        )
        if interval is None:
            continue
        window_s = p["duration_s"] - QUIET_END_S
        wanted = 2 if interval == 30000 else 3
        assert window_s * 1000 // interval >= wanted, p


def test_a_profile_over_its_budget_is_refused_at_its_line(contestants_dir, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text(
        'name = "t"\ncontestants = ["reference"]\n'
        "[profiles.short]\nbudget_h = 0.001\n"
        '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nclients = 4\nduration_s = 10\n'
    )
    done = capped_run(20000, str(suite), "--profile", "short", "--dry-run")
    assert done.returncode == 2
    assert f"{suite}:4:" in done.stderr
    assert "over its budget_h of 0.001" in done.stderr
    assert "Traceback" not in done.stderr
