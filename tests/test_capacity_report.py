"""The capacity section, from stored searches: each test's knee, the highest rate every
contestant sustained in every test, CPU per request and p99 there, the latency-against-rate
chart with the knees marked, and the same in `report --json`."""

import json
import re

from serverlab.results.records import EngineInterval, RecordedTest, StoredSuite
from serverlab.results.report import build_report
from serverlab.results.report.builder import report_data
from serverlab.results.store import Store

TOMCAT = "java-tomcat-blocking"
PARAMS = {"kind": "capacity", "behaviour": "keepalive", "clients": 50, "p99_bound_ms": 10}


def step(level, sustained, p99_ms, cpu_us, reason=""):
    return {
        "level": level,
        "sustained": sustained,
        "reason": reason if not sustained else "",
        "answered": int(level * 2),
        "p50_ms": p99_ms / 4,
        "p99_ms": p99_ms,
        "cpu_us_per_request": cpu_us,
    }


def search(contestant, repeat, steps, knee, stop="bisected", **validity) -> RecordedTest:
    return RecordedTest(
        run_id=None,
        permutation_key=f"capacity-keepalive|{contestant}|",
        contestant=contestant,
        repeat_index=repeat,
        status="ok",
        started_at=1_763_780_000.0 + repeat,
        ended_at=1_763_780_060.0 + repeat,
        scenario="capacity-keepalive",
        params=PARAMS,
        tunables={},
        validity=validity,
        # The knee's step, as the executor keeps it.
        summary={
            "requests": knee or 1000,
            "answered": knee or 1000,
            "ok": knee or 1000,
            "errors": {},
            "rps": float(knee or 1000),
            "duration_s": 1.0,
            "latency_us": {"p50": 500, "p99": 2000},
            "valid": True,
        },
        run_info={
            "capacity": {"knee": knee, "stop": stop, "steps": steps, "p99_bound_ms": 10},
        },
        # The kept step's two interval lines at its rate: a steady window (never unchecked).
        intervals=[
            EngineInterval(i, 0.5 * (i + 1), {"rps": float(knee or 1000), "interval_s": 0.5})
            for i in (0, 1)
        ],
    )


def searches():
    """node-http holds to 6,000/s (bisected), Tomcat to 3,000/s in one repeat and 3,500/s in
    the other; 2,000/s is the highest step both held every time."""
    node = [
        step(1000, True, 1.0, 30),
        step(2000, True, 1.2, 28),
        step(4000, True, 2.0, 27),
        step(8000, False, 80, 25, "p99 80 ms over the 10 ms bound"),
        step(6000, True, 4.0, 26),
        step(7000, False, 30, 25, "p99 30 ms over the 10 ms bound"),
    ]
    tomcat = [
        step(1000, True, 2.0, 90),
        step(2000, True, 3.0, 80),
        step(4000, False, 50, 70, "answered 3,500/s of 4,000/s offered"),
        step(3000, True, 5.0, 75),
    ]
    tomcat_again = tomcat[:2] + [
        step(4000, False, 40, 70, "p99 40 ms over the 10 ms bound"),
        step(3000, True, 6.0, 74),
        step(3500, True, 8.0, 72),
    ]
    return [
        search("node-http", 0, node, 6000),
        search("node-http", 1, node, 6000),
        search("java-tomcat-blocking", 0, tomcat, 3000),
        search("java-tomcat-blocking", 1, tomcat_again, 3500, machine_busy="other 40 %"),
    ]


def stored(tmp_path):
    db = tmp_path / "lab.db"
    with Store(db) as store:
        suite = store.add_suite(StoredSuite("capacity", "suites/capacity.toml", "ab" * 32, 0.4))
        run = store.start_run(suite, {"cpu_count": 2})
        for test in searches():
            test.run_id = run.id
            store.commit_test(test)
        store.finish_run(run.id, "finished")
    return db


def test_the_json_report_gives_each_knee_and_the_comparison_at_the_common_rate(tmp_path):
    data = report_data(stored(tmp_path))
    (group,) = data["capacity"]
    knees = {(k["contestant"], k["repeat"]): k["knee_rate"] for k in group["knees"]}
    assert knees == {
        ("node-http", 1): 6000,
        ("node-http", 2): 6000,
        ("java-tomcat-blocking", 1): 3000,
        ("java-tomcat-blocking", 2): 3500,
    }
    assert group["common_rate"] == 2000 and group["p99_bound_ms"] == 10
    at = {row["contestant"]: row for row in group["at_common_rate"]}
    assert (at["node-http"]["cpu_us_per_request"], at["node-http"]["p99_ms"]) == (28, 1.2)
    assert (
        at["java-tomcat-blocking"]["cpu_us_per_request"],
        at["java-tomcat-blocking"]["p99_ms"],
    ) == (80, 3.0)
    assert not at["node-http"]["flags"]
    assert any("r2" in flag for flag in at["java-tomcat-blocking"]["flags"]), "the flag travels"
    assert data["cells"] == [] and data["at_a_glance"] == [], "a search's kept step is no cell"


def test_the_html_report_draws_latency_against_the_offered_rate_with_the_knees(tmp_path):
    html = build_report(stored(tmp_path), None, tmp_path / "r.html").read_text()
    assert 'id="capacity"' in html and "At 2,000 requests/s offered" in html
    match = re.search(
        r'<script type="application/json" id="figure-data">(.*?)</script>', html, re.S
    )
    figures = json.loads(match.group(1))
    chart = figures["capacity-capacity-keepalive"]
    names = [trace["name"] for trace in chart["data"]]
    assert "node-http r1 p99" in names and "java-tomcat-blocking r2 p50" in names
    assert "node-http r1 knee 6,000/s" in names and "java-tomcat-blocking r2 knee 3,500/s" in names
    p99 = next(t for t in chart["data"] if t["name"] == "java-tomcat-blocking r1 p99")
    assert list(p99["x"]) == [1000, 2000, 3000, 4000], "steps in rate order"


def test_a_search_whose_first_step_failed_says_so_and_leaves_no_common_rate(tmp_path):
    failed = search(
        "rust-zhtta",
        0,
        [step(1000, False, 50, 10, "p99 50 ms over the 10 ms bound")],
        None,
        stop="first-failed",
    )
    db = tmp_path / "lab.db"
    with Store(db) as store:
        suite = store.add_suite(StoredSuite("capacity", "suites/capacity.toml", "ab" * 32, 0.4))
        run = store.start_run(suite, {"cpu_count": 2})
        for test in [*searches()[:1], failed]:
            test.run_id = run.id
            store.commit_test(test)
        store.finish_run(run.id, "finished")
    html = build_report(db, None, tmp_path / "r.html").read_text()
    assert "&lt; 1,000/s (the first step failed: p99 50 ms over the 10 ms bound)" in html
    assert "No step was sustained by every contestant" in html
    assert report_data(db)["capacity"][0]["common_rate"] is None


def push_step(clients, sustained, p99_ms, cpu_us, reason=""):
    return {
        "level": float(clients),
        "sustained": sustained,
        "reason": reason if not sustained else "",
        "clients": clients,
        "admitted": clients,
        "completeness": 1.0 if sustained else 0.97,
        "p50_ms": p99_ms / 4,
        "p99_ms": p99_ms,
        "cpu_us_per_event": cpu_us,
    }


def push_search(contestant, steps, knee) -> RecordedTest:
    test = search(contestant, 0, steps, knee)
    test.scenario, test.permutation_key = "capacity-sse", f"capacity-sse|{contestant}|"
    test.params = {
        "kind": "capacity",
        "behaviour": "sse",
        "pacer": "users",
        "emit_interval_ms": 1000,
        "start_clients": 1000,
        "max_clients": 19000,
        "p99_bound_ms": 250,
    }
    test.run_info["capacity"].update(level="clients", p99_bound_ms=250, maximum=19000)
    return test


def test_a_push_search_shows_delay_against_the_subscribers_held_with_its_knee(tmp_path):
    late = "delay p99 400 ms over the 250 ms bound"
    node = [
        push_step(1000, True, 20, 9),
        push_step(2000, True, 30, 8),
        push_step(4000, True, 40, 8),
    ]
    tomcat = [
        push_step(1000, True, 60, 30),
        push_step(2000, True, 120, 28),
        push_step(4000, False, 400, 25, late),
        push_step(3000, True, 200, 26),
    ]
    db = tmp_path / "lab.db"
    with Store(db) as store:
        suite = store.add_suite(StoredSuite("push-modern", "suites/push-modern.toml", "ab" * 32, 1))
        run = store.start_run(suite, {"cpu_count": 2})
        for test in [push_search("node-http", node, 4000), push_search(TOMCAT, tomcat, 3000)]:
            test.run_id = run.id
            store.commit_test(test)
        store.finish_run(run.id, "finished")
    (group,) = report_data(db)["capacity"]
    assert group["level"] == "clients" and group["p99_bound_ms"] == 250
    assert {k["contestant"]: k["knee_clients"] for k in group["knees"]} == {
        "node-http": 4000,
        TOMCAT: 3000,
    }
    assert group["common_clients"] == 2000
    at = {row["contestant"]: row for row in group["at_common_clients"]}
    assert (at[TOMCAT]["cpu_us_per_event"], at[TOMCAT]["p99_ms"]) == (28, 120)
    html = build_report(db, None, tmp_path / "r.html").read_text()
    assert "At 2,000 subscribers, which every contestant held" in html
    assert "knee (subscribers held)" in html and "delivery delay p99 &le; 250 ms" in html
    match = re.search(
        r'<script type="application/json" id="figure-data">(.*?)</script>', html, re.S
    )
    chart = json.loads(match.group(1))["capacity-capacity-sse"]
    names = [trace["name"] for trace in chart["data"]]
    assert f"{TOMCAT} r1 knee 3,000 clients" in names
    p99 = next(t for t in chart["data"] if t["name"] == f"{TOMCAT} r1 p99")
    assert list(p99["x"]) == [1000, 2000, 3000, 4000] and list(p99["y"]) == [60, 120, 200, 400]
    assert chart["layout"]["xaxis"]["title"]["text"] == "subscribers held"
