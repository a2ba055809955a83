import random
import re

import pytest
from rich.console import Console
from test_report import fill_realistic_db, recorded

from serverlab.results.compare import compare, print_comparison
from serverlab.results.report import SelectionError
from serverlab.results.stats import Verdict
from serverlab.results.store import Store, Suite


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return fill_realistic_db(tmp_path_factory.mktemp("compare") / "lab.db")


def rows_by(rows, scenario, metric):
    return next(r for r in rows if r.scenario == scenario and r.metric.name == metric)


def test_contestants_compared_scenario_by_scenario(db):
    rows = compare(db, "node-http", "java-tomcat-blocking")
    assert {r.scenario for r in rows} == {"keepalive", "longpoll"}
    throughput = rows_by(rows, "keepalive", "rps")
    # node-http is built twice as fast in the fixture, over five repeats against five.
    assert throughput.verdict is Verdict.BETTER and throughput.words == "faster"
    assert throughput.test.p_value == pytest.approx(2 / 252)
    assert throughput.a.median > 1.8 * throughput.b.median
    # Long poll's latency is the event delay; it has no requests/s to compare (issue 19).
    latency = rows_by(rows, "longpoll", "p99")
    assert latency.words == "faster"
    assert not [r for r in rows if r.scenario == "longpoll" and r.metric.name == "rps"]
    # The crashed fifth repeat of java-tomcat-blocking is not summarized.
    assert latency.b.n == 4
    reverse = rows_by(compare(db, "java-tomcat-blocking", "node-http"), "keepalive", "rps")
    assert reverse.words == "slower"


def test_equal_contestants_are_not_significantly_different(tmp_path):
    db = tmp_path / "lab.db"
    fill_realistic_db(db, odd_contestant="java-tomcat-async")
    rows = compare(db, "java-tomcat-async", "java-tomcat-blocking", metrics=["rps"])
    # Same speed in the fixture: only noise separates them.
    assert all(r.verdict is Verdict.NO_DIFFERENCE for r in rows)
    assert all(r.words == "no significant difference" for r in rows)


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


def test_the_table_fits_120_columns_with_medians_ratios_and_verdicts(db):
    console = Console(record=True, width=120)
    rows = compare(db, "node-http", "java-tomcat-blocking", metrics=["rps", "p50"])
    print_comparison(rows, "node-http", "java-tomcat-blocking", console=console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "A = node-http" in text and "java-tomcat-blocking" in text
    assert "faster" in text and "n=5" in text
    assert re.search(r"\d\.\d\d×", text), "the ratio of the medians"
    assert "Mann-Whitney" in " ".join(text.split())


def test_three_repeats_a_side_say_too_few_to_test_and_still_give_the_ratio(tmp_path):
    db = tmp_path / "lab.db"
    with Store(db) as store:
        run = store.start_run(store.add_suite(Suite("q", "q.toml", "3" * 64)), {})
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
