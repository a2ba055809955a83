"""Request latency and delivery delay are two figures (issue 34, item 3); what reads "p50" and
"p99" beyond the report follows them: the gate judges a push series on its delivery delay and a
request series on its latency, and the live page's finished test carries a push test's delivery
delay; a push series' history follows its delivery delay. On the golden database (a real
run: fast requests and comet)."""

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from serverlab.results import gate
from serverlab.results.report.cells.scenarios import scenario_key, scenario_labels
from serverlab.results.report.charts.series import build_series
from serverlab.results.report.figures.push import is_push
from serverlab.results.report.figures.table import METRICS_BY_NAME
from serverlab.results.report.selection import load_selected, parse_selection
from serverlab.run.plan.live.events import EventLog
from serverlab.run.plan.live.feed import LiveFeed

GOLDEN = Path(__file__).parent / "data" / "golden-report" / "lab.sql.gz"


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    path = tmp_path_factory.mktemp("golden") / "lab.db"
    db = sqlite3.connect(path)
    db.executescript(gzip.decompress(GOLDEN.read_bytes()).decode())
    db.close()
    return load_selected(path, parse_selection(None))


@pytest.fixture(scope="module")
def tests_of_golden(golden):
    return golden.tests


def test_the_gate_judges_push_on_delivery_delay_and_requests_on_latency(tests_of_golden):
    def key_of(test):
        return (f"{test.scenario}|{test.contestant}", f"{test.scenario} {test.contestant}")

    side_a = [t for t in tests_of_golden if t.repeat_index < 2]
    side_b = [t for t in tests_of_golden if t.repeat_index == 2]
    rows = gate.gate_rows(side_a, side_b, key_of)
    figures: dict[bool, set[str]] = {True: set(), False: set()}
    for row in rows:
        pushed = any(is_push(t) and key_of(t)[1] == row.series for t in tests_of_golden)
        figures[pushed].add(row.metric.name)
        assert row.n_a == 2 and row.n_b == 1, row
    assert {"delay_p50", "delay_p99"} <= figures[True] and not {"p50", "p99"} & figures[True]
    assert {"p50", "p99"} <= figures[False] and not {"delay_p50", "delay_p99"} & figures[False]


def test_a_finished_push_test_reaches_the_live_page_with_its_delivery_delay(
    tests_of_golden, tmp_path
):
    comet = next(t for t in tests_of_golden if is_push(t))
    request = next(t for t in tests_of_golden if not is_push(t))
    sink = tmp_path / "live.jsonl"
    feed = LiveFeed(EventLog(sink=sink), cpus=None)
    feed.begin([], 0)
    feed.test_finished(comet)
    feed.test_finished(request)
    feed.end()
    events = [json.loads(json.loads(line)["event"]) for line in sink.open()]
    pushed, requested = [e for e in events if e["kind"] == "finished"]
    delay = METRICS_BY_NAME["delay_p99"].of(comet)
    assert delay is not None and pushed["p99_ms"] == delay
    assert requested["p99_ms"] == METRICS_BY_NAME["p99"].of(request) is not None


def test_a_push_series_history_follows_its_delivery_delay_and_a_request_series_its_latency(
    golden,
):
    labels = scenario_labels(golden.tests)
    pushed_by_label = {labels[scenario_key(t)]: is_push(t) for t in golden.tests}
    figures: dict[bool, set[str]] = {True: set(), False: set()}
    for series in build_series(golden.tests, golden.runs, golden.suites):
        figures[pushed_by_label[series.scenario]].add(series.metric.name)
    assert {"delay_p50", "delay_p99", "cpu"} <= figures[True]
    assert not {"p50", "p99"} & figures[True]
    assert {"p50", "p99", "rps"} <= figures[False]
    assert not {"delay_p50", "delay_p99"} & figures[False]
