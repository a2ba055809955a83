"""A grouped test run for real (the engine, the reference server, SQLite): each group's
figures stored apart from the other's and the test's totals, and the report's per-group
table drawn from them."""

import re

from test_runner import run_in_process, write_suite

from serverlab.base.paths import REPO_ROOT
from serverlab.contestant.manifest import find
from serverlab.results.report.builder import build_report, report_data
from serverlab.results.store import Store
from serverlab.run.execution.executor import Environment
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.runner import Session, run_suite
from serverlab.run.plan.suite.load import load_suite

# A fixed-rate keep-alive probe over the whole load, beside a closed loop of one request a
# connection for a second in its middle, half a second off the 1 s lines: a line counts what
# was counted when its tick came, and a tick may come late on a busy machine, so a start or
# a stop on a line's edge would leave the line's share to the machine's load.
MIXED = """
[[scenario]]
name = "mixed"
behaviour = "keepalive"
clients = 2
duration_s = 4

[[scenario.groups]]
name = "probe"
pacer = "open"
rate = 100
path = "/perf"

[[scenario.groups]]
name = "fresh"
behaviour = "new-connection"
clients = 2
start_s = 1.5
stop_s = 2.5
"""


def test_two_groups_figures_are_kept_apart_in_the_store_and_the_report(contestants_dir, tmp_path):
    db = tmp_path / "lab.db"
    _, (test,), _ = run_in_process(write_suite(tmp_path, MIXED), db)
    assert test.status == "ok"
    probe, fresh = test.summary["groups"]["probe"], test.summary["groups"]["fresh"]
    assert probe["window"] == {"start_s": 0.0, "stop_s": 4.0}
    assert fresh["window"] == {"start_s": 1.5, "stop_s": 2.5}
    # The probe's arrivals are its schedule's (100/s for 3 s) on its own two connections;
    # the other group opened a connection for each of its requests, and many more of them.
    assert probe["requests"] <= 401 and probe["connections_opened"] == 2
    assert fresh["connections_opened"] >= fresh["answered"] > probe["requests"]
    # The test's totals are the groups' added, and each interval line keeps them apart too.
    assert test.summary["requests"] == probe["requests"] + fresh["requests"]
    lines = [line.data["groups"] for line in test.intervals]
    fresh_answers = [line["fresh"]["answered"] for line in lines]
    # Nothing before its start; after its stop at most one late answer a connection
    # (engine/README.md, interval line).
    assert fresh_answers[0] == 0 and fresh_answers[1] > 50 and fresh_answers[2] > 50
    assert fresh_answers[3] <= 2
    assert all(line["probe"]["answered"] > 0 for line in lines)

    rows = report_data(db)["client_groups"]
    assert [(r["group"], r["window"]) for r in rows] == [
        ("probe", "0-4 s"),
        ("fresh", "1.5-2.5 s"),
        ("all groups", f"0-{test.summary['duration_s']:g} s"),
    ]
    assert [r["requests"] for r in rows] == [
        f"{n:,}" for n in (probe["requests"], fresh["requests"], test.summary["requests"])
    ]
    assert [r["clients"] for r in rows] == ["2", "2", "4"]
    assert rows[0]["p99_ms"] == f"{probe['latency_us']['p99'] / 1000:.3g}"
    assert rows[1]["throughput"] == f"{fresh['answered'] / fresh['duration_s']:,.0f}"
    html = build_report(db, out_path=tmp_path / "report.html").read_text()
    table = re.search(r'<table class="client-groups">.*?</table>', html, re.S).group(0)
    assert table.count("<tr>") == 4  # its head, two groups and the totals
    assert "over its\n  window" in table


def test_the_shipped_comet_fanout_suite_keeps_its_probe_apart_from_the_subscribers(
    contestants_dir, tmp_path
):
    """suites/comet-fanout.toml's quick profile, on the reference server, with 50
    subscribers instead of thousands."""
    text = (REPO_ROOT / "suites" / "comet-fanout.toml").read_text()
    text = re.sub(r"(?m)^contestants = .*$", 'contestants = ["reference"]', text)
    path = tmp_path / "comet-fanout.toml"
    path.write_text(text.replace("clients = [1000, 5000]", "clients = [50]"))
    db = tmp_path / "lab.db"
    suite = load_suite(path, profile="quick")
    with Store(db) as store:
        env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
        run_suite(Session(suite, plan_tests(suite, find), store, env))
        tests = {t.scenario: store.load_details(t) for t in store.tests()}
    grouped = tests["probe-beside-comet"]
    assert grouped.status == "ok" and tests["probe-alone"].status == "ok"
    probe, subscribers = (
        grouped.summary["groups"]["probe"],
        grouped.summary["groups"]["subscribers"],
    )
    # 500 arrivals a second for 6 s on the probe's 10 connections, no event among them;
    # the events went to the subscribers, none lost.
    assert 0 < probe["answered"] <= probe["requests"] <= 3001
    assert probe["connections_opened"] == 10 and probe["events"]["received"] == 0
    assert subscribers["events"]["received"] >= 50 * 3 and subscribers["events"]["lost"] == 0
    rows = report_data(db)["client_groups"]
    assert [r["group"] for r in rows] == ["subscribers", "probe", "all groups"]
    assert {r["scenario"] for r in rows} == {"probe-beside-comet"}
