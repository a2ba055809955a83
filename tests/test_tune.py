"""`serverlab tune` and the limits `serverlab run` checks, against the real /proc values."""

import json
import resource
import subprocess
import sys
from pathlib import Path

from serverlab.run.host import tune
from serverlab.run.host.machine import read_sysctl

SERVERLAB = [str(Path(sys.executable).parent / "serverlab")]


def _max_map_count() -> int:
    return int(read_sysctl("vm.max_map_count"))


def test_rows_show_what_is_in_force_and_judge_it_against_the_needs():
    current = _max_map_count()
    rows = {r.limit: r for r in tune.rows({"max_map_count": current + 1, "somaxconn": 1})}
    assert rows["vm.max_map_count"].in_force == str(current)
    assert not rows["vm.max_map_count"].ok
    assert rows["net.core.somaxconn"].ok
    assert rows["kernel.threads-max"].needed is None and rows["kernel.threads-max"].ok
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert rows["RLIMIT_NOFILE soft/hard"].in_force == f"{soft}/{hard}"
    assert [r.limit for r in tune.shortfalls({"max_map_count": current + 1})] == [
        "vm.max_map_count"
    ]


def test_the_port_range_counts_ports_and_tw_reuse_2_counts_as_on():
    low, high = (int(v) for v in read_sysctl("net.ipv4.ip_local_port_range").split())
    size = high - low + 1
    assert not tune.shortfalls({"local_ports": size})
    assert tune.shortfalls({"local_ports": size + 1})
    assert tune._port_range_for(50_000, f"{low} {high}") == "15536 65535"
    assert tune._tw_reuse("2") == tune._tw_reuse("1") == 1 and tune._tw_reuse("0") == 0


def test_apply_changes_nothing_when_the_needs_are_met():
    assert tune.apply({"somaxconn": 1, "max_map_count": 1}) == []


def test_apply_raises_a_short_value_and_says_so():
    """Root only, as `make test` runs; the value is put back."""
    before = read_sysctl("net.core.somaxconn")
    try:
        changes = tune.apply({"somaxconn": int(before) + 1})
        assert changes == [f"net.core.somaxconn: {before} -> {int(before) + 1}"]
        assert read_sysctl("net.core.somaxconn") == str(int(before) + 1)
    finally:
        Path("/proc/sys/net/core/somaxconn").write_text(before + "\n")


def test_raise_nofile_lifts_the_soft_limit_for_the_process_and_its_children():
    script = (
        "import json, resource, subprocess\n"
        "from serverlab.run.host import tune\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(7)[1]))\n"
        "changed = tune.raise_nofile()\n"
        "child = subprocess.run(['sh', '-c', 'ulimit -n'], capture_output=True, text=True)\n"
        "print(json.dumps({'changed': changed, 'child': int(child.stdout)}))\n"
    )
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
    )
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert out["changed"]["before"]["soft"] == 1024
    assert out["changed"]["after"]["soft"] == hard
    assert out["child"] == hard


def test_tune_prints_the_table_for_a_suite(contestants_dir, tmp_path):
    suite = tmp_path / "s.toml"
    need = _max_map_count() + 1
    suite.write_text(
        f'contestants = ["reference"]\n[needs]\nmax_map_count = {need}\n'
        '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 1\n'
    )
    out = subprocess.run([*SERVERLAB, "tune", str(suite)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "vm.max_map_count" in ln)
    assert str(need) in line and "SHORT" in line


def test_run_refuses_a_suite_the_machine_cannot_meet_and_names_the_fix(contestants_dir, tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(
        f'contestants = ["reference"]\n[needs]\nmax_map_count = {_max_map_count() + 1}\n'
        '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 1\n'
    )
    db = tmp_path / "lab.db"
    out = subprocess.run(
        [*SERVERLAB, "run", str(suite), "--db", str(db), "--skip-verify"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "vm.max_map_count" in out.stderr
    assert f"serverlab tune {suite} --apply" in out.stderr
    assert not db.exists(), "nothing started"
