"""History, change points, paired runs and the regression gate.

The detector is checked on synthetic series whose change points are known; everything else on
real runs of rust-zhtta (``history_fixture.record``), kept as a compact copy in
``tests/data/history_runs.json`` and written into a temporary database when this module
starts: ten runs of one suite, the last five on a "version" whose chunked reads are 1 KB (a
planted regression), then a paired run of the two versions and an A/A paired run. The
verdicts depend on what was recorded, not on the noise of the machine running the tests;
live paired runs are in bench/history-paired.sh.
"""

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import history_fixture
import pytest
from history_fixture import load_compact

from serverlab.results import gate
from serverlab.results.report.builder import build_report
from serverlab.results.report.charts.series import (
    HISTORY_METRICS,
    build_series,
    change_points,
    version_changes,
)
from serverlab.results.report.selection import load_selected, parse_selection

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]


def serverlab(*args):
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=120)


def noisy(level: float, n: int, spread: float, rng: random.Random) -> list[float]:
    return [level + rng.gauss(0, spread) for _ in range(n)]


def test_a_step_is_found_where_it_happens_with_its_size_and_p_value():
    rng = random.Random(1)
    series = noisy(100, 12, 3, rng) + noisy(75, 12, 3, rng)
    (found,) = change_points(series)
    assert found.index == 12
    assert -29 < found.percent < -21
    assert found.p_value < 0.001


def test_a_gradual_drift_is_cut_into_steps_that_all_go_its_way():
    rng = random.Random(2)
    series = [100 - 2 * i + rng.gauss(0, 2) for i in range(24)]
    found = change_points(series)
    assert found, "a drift of 46 % over the series went unseen"
    assert all(cp.percent < 0 for cp in found)
    assert all(2 <= cp.index <= 22 for cp in found)


def test_single_outliers_are_not_change_points():
    rng = random.Random(3)
    series = noisy(100, 24, 3, rng)
    series[7], series[16] = 160.0, 45.0
    assert change_points(series) == []


def test_a_flat_noisy_series_has_no_change_point():
    rng = random.Random(4)
    for _ in range(20):
        assert change_points(noisy(100, 16, 8, rng)) == []


def test_a_change_point_names_the_versions_that_changed_there():
    before = {"engine": "e 1 (sha256 aa)", "node-http": "v20.20.0", "tool node": "v20.20.0"}
    after = {**before, "node-http": "v22.1.0", "tool node": "v22.1.0"}
    assert version_changes(before, after) == (
        "node-http: v20.20.0 → v22.1.0",
        "tool node: v20.20.0 → v22.1.0",
    )
    assert version_changes(before, before) == ()


COMPACT = Path(__file__).parent / "data" / "history_runs.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The committed recording of real runs, written into a new database."""
    return load_compact(json.loads(COMPACT.read_text()), tmp_path_factory.mktemp("h") / "lab.db")


def runs_text(run_ids) -> str:
    return "run:" + ",".join(map(str, run_ids))


def planted_series(recorded, metric: str):
    found = load_selected(recorded.db, parse_selection(runs_text(recorded.planted_runs)))
    (series,) = build_series(found.tests, found.runs, found.suites, [metric])
    return series


def test_history_marks_the_planted_regression_at_its_run(recorded):
    series = planted_series(recorded, "rps")
    assert [p.run_id for p in series.points] == recorded.planted_runs
    (found,) = series.change_points
    assert abs(found.index - recorded.first_slow) <= 1
    assert found.percent < -50 and found.p_value < 0.001
    if found.index == recorded.first_slow:
        assert "rust-zhtta: zhtta 1.0 → zhtta 1.1" in found.versions_changed


def test_the_runs_before_the_regression_have_no_change_point(recorded):
    for metric in ("rps", "p99"):
        series = planted_series(recorded, metric)
        before = [p.summary.median for p in series.points[: recorded.first_slow]]
        assert change_points(before) == []


def test_every_run_carries_its_fingerprint_and_the_versions_beside_it(recorded):
    found = load_selected(recorded.db, parse_selection("all"))
    assert len({r.fingerprint_id for r in found.runs}) == 1 and found.runs[0].fingerprint_id
    versions = [r.versions["contestants"]["rust-zhtta"] for r in found.runs[:10]]
    assert versions == ["zhtta 1.0"] * 5 + ["zhtta 1.1"] * 5
    assert "sha256" in found.runs[0].versions["engine"]
    assert "zhtta" not in str(found.runs[0].fingerprint)


def test_the_history_command_and_report_show_the_change_point(recorded, tmp_path):
    (found,) = planted_series(recorded, "rps").change_points
    selection = runs_text(recorded.planted_runs)
    shown = serverlab("history", selection, "--db", str(recorded.db))
    assert shown.returncode == 0, shown.stderr
    before, after = recorded.planted_runs[found.index - 1], recorded.planted_runs[found.index]
    assert f"change point in throughput between run {before} and run {after}" in shown.stdout
    page = build_report(recorded.db, selection, tmp_path / "r.html").read_text()
    assert 'id="history"' in page and 'data-chart="history-rps"' in page
    for line in found.versions_changed:
        assert line in shown.stdout and line in page


def gate_code(db, side_a, side_b, *options) -> subprocess.CompletedProcess:
    return serverlab("compare", side_a, side_b, "--db", str(db), *options)


def test_the_gate_fails_the_planted_regression_and_names_series_delta_and_floor(recorded):
    before = runs_text(recorded.planted_runs[:5])
    after = runs_text(recorded.planted_runs[5:])
    done = gate_code(recorded.db, before, after, "--fail-on-regression", "10")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "files-keepalive / rust-zhtta" in done.stdout
    assert "regression: worse by at least" in done.stdout and "±" in done.stdout


def test_the_gate_passes_an_aa_sequence(recorded):
    first, second = recorded.planted_runs[:3], recorded.planted_runs[3:5]
    done = gate_code(
        recorded.db,
        runs_text(first),
        runs_text(second),
        "--metric",
        "rps",
        "--fail-on-regression",
        "25",
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_paired_run_finds_the_regression_beyond_its_aa_floor(recorded):
    rows = gate.paired_gate(recorded.db, recorded.paired_regression_run, threshold=10)
    assert [r.metric.name for r in rows] == ["rps", "p50", "p99"]
    for row in rows:
        assert row.outcome is gate.GateOutcome.REGRESSION, row.reason
        assert row.difference == "B slower"
        assert (row.n_a, row.n_b) == (8, 4)
    assert gate.exit_code(rows) == 1


def test_a_paired_aa_run_calls_no_difference_and_passes(recorded):
    rows = gate.paired_gate(recorded.db, recorded.paired_same_run, ["rps"], threshold=25)
    (row,) = rows
    # Its floor is under 5 %: nothing under the least material difference is called.
    assert row.floor_size < 5
    assert row.difference == "no material difference (within ±5 %)"
    assert gate.exit_code(rows) == 0, row.reason


def test_a_flagged_test_makes_the_gate_inconclusive_never_red(recorded, tmp_path):
    """machine-busy cannot be produced on demand, so one recorded test gets the flag."""
    db = tmp_path / "flagged.db"
    # Through SQLite's backup: the recorded database is in WAL mode.
    with sqlite3.connect(recorded.db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    slow = recorded.planted_runs[5]
    with sqlite3.connect(db) as edit:
        edit.execute(
            "UPDATE tests SET validity_json ="
            " json_set(validity_json, '$.machine_busy', json('true'))"
            " WHERE id = (SELECT min(id) FROM tests WHERE run_id = ?)",
            (slow,),
        )
    before = runs_text(recorded.planted_runs[:5])
    after = runs_text(recorded.planted_runs[5:])
    done = gate_code(db, before, after, "--fail-on-regression", "10")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "inconclusive: flagged: machine-busy" in done.stdout


def test_a_gate_with_too_few_tests_is_inconclusive(recorded):
    one, other = runs_text(recorded.planted_runs[:1]), runs_text(recorded.planted_runs[1:2])
    assert gate_code(recorded.db, one, other, "--fail-on-regression", "10").returncode == 3


def test_a_bad_paired_configuration_is_one_line_and_exit_2(recorded, tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(history_fixture.SUITE.format(repeats=1))
    done = serverlab(
        "compare", "--paired", str(suite), "read=whole", "chunky", "--db", str(tmp_path / "x.db")
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "name=value" in done.stderr


def test_paired_plans_interleave_a_b_and_a_again_round_by_round(tmp_path):
    from serverlab import commands
    from serverlab.contestant.manifest import find
    from serverlab.run.plan import paired

    suite = tmp_path / "s.toml"
    suite.write_text(history_fixture.SUITE.format(repeats=3))
    planned = commands.plan_suite(str(suite), 1.0, None, None)
    a, b = paired.parse_config("chunk_size=512000"), paired.parse_config("chunk_size=1K,x=-")
    with pytest.raises(paired.PairedError, match="no contestant of the suite has a tunable 'x'"):
        paired.check_config(b, {"rust-zhtta": find("rust-zhtta")})
    b = paired.parse_config("chunk_size=1K")
    plans = paired.interleave(planned.plans, a, b, 3, {"rust-zhtta": find("rust-zhtta")})
    assert [paired.arm_of(p) for p in plans] == ["A", "B", "A'"] * 3
    assert [p.tunables["chunk_size"] for p in plans[:3]] == ["512000", "1K", "512000"]
    assert len({(p.key, p.repeat) for p in plans}) == 9
    with pytest.raises(paired.PairedError, match="does not exist"):
        paired.parse_config("engine=/no/such/serverlab-load")


def test_the_gate_calls_a_regression_only_beyond_zero_the_floor_and_the_threshold():
    rps = gate.METRICS_BY_NAME["rps"]
    a = [100, 101, 99, 100, 102, 98, 100, 101]
    _d, _f, outcome, _ = gate.judge(a, [80, 81, 79, 80], rps, 10)
    assert outcome is gate.GateOutcome.REGRESSION
    # A' drifted 30 % from A in the same sitting: a 20 % drop of B is no longer called.
    drifted = [100, 130, 99, 131, 101, 129, 100, 130]
    delta, floor, outcome, reason = gate.judge(drifted, [92, 93, 91, 92], rps, 10)
    assert floor.percent > 25 and outcome is gate.GateOutcome.INCONCLUSIVE, reason
    assert gate.judge(a, [99, 100, 101, 100], rps, 10)[2] is gate.GateOutcome.NONE
    # Higher is worse for latency: the same numbers are a regression of p99 only upward.
    p99 = gate.METRICS_BY_NAME["p99"]
    assert gate.judge(a, [120, 121, 119, 120], p99, 10)[2] is gate.GateOutcome.REGRESSION
    assert gate.judge(a, [80, 81, 79, 80], p99, 10)[2] is gate.GateOutcome.NONE
    assert gate.judge(a[:3], [80, 81, 79], rps, 10)[2] is gate.GateOutcome.INCONCLUSIVE


def test_the_history_charts_draw_in_a_real_browser_with_the_change_point(recorded, tmp_path):
    from test_report_browser import RENDER_TIMEOUT_S, DevTools, launched_chromium, problems_in

    selection = runs_text(recorded.planted_runs)
    report = build_report(recorded.db, selection, tmp_path / "report.html")
    with launched_chromium(tmp_path / "profile") as page_url:
        page = DevTools(page_url)
        try:
            for domain in ("Runtime", "Log", "Page", "Network"):
                page.call(f"{domain}.enable")
            page.call("Page.navigate", url=report.as_uri())
            page.wait_for(
                "document.body && document.body.getAttribute('data-charts-rendered')",
                RENDER_TIMEOUT_S,
            )
            history = "[...document.querySelectorAll('#history div.plot')]"
            plots = page.evaluate(f"{history}.length")
            drawn = page.evaluate(f"{history}.filter(p => p.querySelector('g.trace')).length")
            marked = page.evaluate(
                "document.querySelector('#history-rps').innerText.includes('p=')"
            )
            page.evaluate("0")
        finally:
            page.close()
    # The recording is of request tests: every history figure but the delivery delay's.
    assert plots == len(HISTORY_METRICS) - 2 and drawn == plots
    assert marked, "the throughput chart labels its change point with size and p"
    assert problems_in(page.events) == []


def test_a_series_never_mixes_machine_fingerprints_unless_asked(recorded, tmp_path):
    db = tmp_path / "two-machines.db"
    with sqlite3.connect(recorded.db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
        copy.execute(
            "UPDATE runs SET fingerprint_json = json_set(fingerprint_json, '$.kernel', 'other')"
            " WHERE id = ?",
            (recorded.planted_runs[0],),
        )
    found = load_selected(db, parse_selection(runs_text(recorded.planted_runs)))
    apart = build_series(found.tests, found.runs, found.suites, ["rps"])
    assert sorted(len(s.points) for s in apart) == [1, 9]
    assert len({s.fingerprint for s in apart}) == 2
    (mixed,) = build_series(found.tests, found.runs, found.suites, ["rps"], mix_machines=True)
    assert len(mixed.points) == 10
