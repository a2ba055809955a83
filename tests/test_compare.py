import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from test_report import fill_realistic_db, recorded

from serverlab.results import stats
from serverlab.results.compare import compare, print_comparison
from serverlab.results.records import StoredSuite
from serverlab.results.report import SelectionError
from serverlab.results.report.cells.formatting import compact_number
from serverlab.results.stats import Verdict
from serverlab.results.store import Store


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return fill_realistic_db(tmp_path_factory.mktemp("compare") / "lab.db")


def rows_by(rows, scenario, metric):
    return next(r for r in rows if r.scenario == scenario and r.metric.name == metric)


@pytest.fixture(scope="module")
def db6(tmp_path_factory):
    return fill_realistic_db(tmp_path_factory.mktemp("compare6") / "lab.db", repeats=6)


def test_contestants_compared_scenario_by_scenario(db6):
    rows = compare(db6, "node-http", "java-tomcat-blocking")
    assert {r.scenario for r in rows} == {"keepalive", "longpoll"}
    # Long poll has no requests/s (a push test's events/s are its plan's) and no request
    # latency: its figure is the delivery delay, which node-http's fixture halves.
    assert not [r for r in rows if r.scenario == "longpoll" and r.metric.name == "rps"]
    assert not [r for r in rows if r.scenario == "longpoll" and r.metric.name == "p50"]
    delay = rows_by(rows, "longpoll", "delay_p50")
    # Six repeats against six: the smallest p there is (2/924), Holm-adjusted across every
    # test of this comparison, stays under 0.05.
    assert delay.verdict is Verdict.BETTER and delay.words == "faster"
    assert delay.test.p_value == pytest.approx(2 / 924)
    tested = [r for r in rows if r.test is not None]
    holm = stats.holm([r.test.p_value for r in tested])
    assert delay.judgement.adjusted_p == pytest.approx(holm[tested.index(delay)])
    assert delay.judgement.adjusted_p < 0.05
    assert delay.a.median < 0.6 * delay.b.median
    tail = rows_by(rows, "longpoll", "delay_p99")
    assert tail.words == "faster"
    # The crashed seventh repeat of java-tomcat-blocking is not summarized.
    assert delay.b.n == 6
    reverse = rows_by(compare(db6, "java-tomcat-blocking", "node-http"), "longpoll", "delay_p50")
    assert reverse.words == "slower"


def test_repeats_too_few_for_the_family_say_so_rather_than_no_difference(db):
    rows = compare(db, "node-http", "java-tomcat-blocking")
    delay = rows_by(rows, "longpoll", "delay_p50")
    # Four against four, fully separated, would give p = 2/70 = 0.029 alone; but this
    # comparison judges many figures, and no Holm adjustment for them could let 0.029
    # through (Tarone's rule): too few repeats, said so, and left out of the family.
    assert delay.test is None and delay.judgement.adjusted_p is None
    assert delay.verdict is Verdict.TOO_FEW
    assert delay.words.startswith(
        "too few repeats to test (n=4 each; they can give no p below 0.029, the family needs"
    )
    assert "1 against 2 ms" in delay.judgement.statement


def test_a_flagged_repeat_leaves_the_verdict_to_the_others_and_its_flag_is_printed(db6):
    rows = compare(db6, "node-http", "java-tomcat-blocking")
    # java-tomcat-blocking's seventh keep-alive repeat was generator-bound (engine CPU 97 %):
    # a flag with no figure list, so every keep-alive figure of that repeat leaves its
    # comparison, and the six others decide.
    for row in (r for r in rows if r.scenario == "keepalive" and r.metric.name != "errors"):
        assert row.verdict is Verdict.BETTER and row.test is not None
        # (node-http's seventh repeat has no monitor samples: six CPU and memory figures.)
        assert row.judgement.statement.endswith(
            "repeats against 6 of 7; java-tomcat-blocking generator-bound r7)"
        )
        assert [f.code for f in row.judgement.b.flags] == ["generator-bound"]
        assert row.judgement.b.flags[0].repeats == ("r7",)
        assert not row.judgement.a.flagged
    console = Console(record=True, width=120)
    print_comparison(rows, "node-http", "java-tomcat-blocking", console=console)
    text = " ".join(console.export_text().split())
    said = "! keepalive, B (java-tomcat-blocking): generator-bound (engine CPU 97 %) (r7); on "
    on = text[text.index(said) + len(said) :].split(" Intervals:")[0]
    labels = ["throughput", "latency p50", "latency p99", "errors", "server CPU over the load"]
    assert all(label in on for label in labels), on
    assert "no verdict: flagged" not in text


def test_equal_contestants_are_not_significantly_different(tmp_path):
    db = tmp_path / "lab.db"
    fill_realistic_db(db, odd_contestant="java-tomcat-async")
    metrics = ["rps", "p50", "delay_p50"]
    rows = compare(db, "java-tomcat-async", "java-tomcat-blocking", metrics=metrics)
    rows = [
        r
        for r in rows
        if (r.scenario, r.metric.name) in (("keepalive", "rps"), ("longpoll", "delay_p50"))
    ]
    # Same speed in the fixture: only noise separates them. Keep-alive's blocking side had a
    # generator-bound repeat: it leaves the comparison, and four against four cannot decide.
    by_scenario = {r.scenario: r for r in rows}
    assert by_scenario["longpoll"].verdict is Verdict.NO_DIFFERENCE
    assert by_scenario["longpoll"].words == "no significant difference"
    assert by_scenario["keepalive"].verdict is Verdict.TOO_FEW
    assert by_scenario["keepalive"].judgement.statement.endswith("generator-bound r5)")


def test_runs_compared_contestant_by_contestant(tmp_path):
    db = tmp_path / "lab.db"
    fill_realistic_db(db)
    with Store(db) as store:
        (suite,) = store.suites()
        run = store.start_run(suite, {})
        rng = random.Random(9)
        params = {"behaviour": "keepalive", "pacer": "closed", "clients": 50}
        for repeat in range(4):
            store.commit_test(recorded(run.id, "keepalive", params, "node-http", repeat, rng))
    rows = compare(db, "run:1", "run:2", metrics=["rps"])
    assert [(r.scenario, r.contestants) for r in rows] == [("keepalive", "node-http")]
    assert rows[0].a.n == 5 and rows[0].b.n == 4
    with pytest.raises(SelectionError, match="no scenario in common"):
        compare(db, "run:2", "run:1 java-tomcat-blocking")


def test_the_table_fits_120_columns_with_medians_ratios_and_verdicts(db6):
    console = Console(record=True, width=120)
    metrics = ["rps", "p50", "delay_p50"]
    rows = compare(db6, "node-http", "java-tomcat-blocking", metrics=metrics)
    print_comparison(rows, "node-http", "java-tomcat-blocking", console=console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "A = node-http" in text and "java-tomcat-blocking" in text
    assert "faster" in text and "n=7" in text and "n=6" in text
    assert re.search(r"\d\.\d\d×", text), "the ratio of the medians"
    assert "Mann-Whitney" in " ".join(text.split())


def test_three_repeats_a_side_say_too_few_to_test_and_still_give_the_ratio(tmp_path):
    db = tmp_path / "lab.db"
    with Store(db) as store:
        run = store.start_run(store.add_suite(StoredSuite("q", "q.toml", "3" * 64)), {})
        rng = random.Random(11)
        params = {"behaviour": "keepalive", "clients": 50}
        for contestant in ("node-http", "java-tomcat-blocking"):
            for repeat in range(3):
                test = recorded(run.id, "fast", params, contestant, repeat, rng)
                store.commit_test(test)
    (row,) = compare(db, "node-http", "java-tomcat-blocking", metrics=["rps"])
    assert row.verdict is Verdict.TOO_FEW and row.test is None
    assert row.words == "too few repeats to test (n=3 each; 4 or more needed)"
    # node-http is built twice as fast in the fixture.
    assert 1.7 < row.ratio.value < 2.3
    assert row.ratio.interval.coverage == pytest.approx(0.9)
    assert row.ratio.interval.low <= row.ratio.value <= row.ratio.interval.high


def test_sides_with_nothing_in_common_or_unknown_metrics_are_errors(db):
    with pytest.raises(SelectionError, match="no tests match the selection 'run:1 contestant:x'"):
        compare(db, "node-http", "x run:1")
    with pytest.raises(SelectionError, match="unknown metric"):
        compare(db, "node-http", "java-tomcat-blocking", metrics=["speed"])


def test_compare_json_and_the_table_give_the_same_cells_and_verdicts(db6):
    serverlab = str(Path(sys.executable).parent / "serverlab")
    argv = [serverlab, "compare", "node-http", "java-tomcat-blocking", "--db", str(db6)]
    data = json.loads(subprocess.run([*argv, "--json"], check=True, capture_output=True).stdout)
    rows = compare(db6, "node-http", "java-tomcat-blocking")
    console = Console(record=True, width=200)
    print_comparison(rows, "node-http", "java-tomcat-blocking", console=console)
    text = console.export_text()
    assert [(r["scenario"], r["metric"]) for r in data["rows"]] == [
        (r.scenario, r.metric.name) for r in rows
    ]
    for shown, row in zip(data["rows"], rows, strict=True):
        assert shown["words"] == row.words and shown["adjusted_p"] == row.judgement.adjusted_p
        assert (shown["a"]["n"], shown["b"]["n"]) == (row.a.n, row.b.n)
        assert shown["a"]["median"] == row.a.median
        assert [f["code"] for f in shown["b"]["flags"]] == [f.code for f in row.judgement.b.flags]
        # The table's line for the row: its scenario, metric, both medians and its verdict.
        line = next(
            line
            for line in text.splitlines()
            if line.split()[:1] == [row.scenario] and row.metric.label in line
        )
        assert compact_number(shown["a"]["median"]) in line and row.words.split()[0] in line
        if shown["p"] is not None:
            assert f"{shown['p']:.2g}" in line
    # The flagged repeat is named in both, and its figures are tested without it.
    dropped = [r for r in data["rows"] if r["dropped_b"]]
    assert len(dropped) == 7 and all(r["dropped_b"] == ["r7"] for r in dropped)
    pairs = zip(data["rows"], rows, strict=True)
    assert all(r["statement"] == row.judgement.statement for r, row in pairs)
