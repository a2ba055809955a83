"""The push study's report section: its figures from stored tests, the capacity ladder's
verdict, and the notes it must carry."""

import random

from test_report import recorded

from serverlab.results.report.transports import (
    capacity_table,
    delivered_to_nobody,
    memory_per_connection_kb,
    transport_section,
)
from serverlab.results.store import MonitorSample, Run

PARAMS = {"behaviour": "websocket", "clients": 1000, "emit_interval_ms": 1000}


def pushed(contestant="node-http", repeat=0, **params):
    return recorded(1, "transports", {**PARAMS, **params}, contestant, repeat, random.Random(5))


def test_memory_per_connection_is_the_rise_over_the_load_per_client():
    test = pushed()
    test.samples = [
        MonitorSample(t=0, rss_bytes=50 * 2**20),
        MonitorSample(t=1, rss_bytes=52 * 2**20),
    ]
    assert memory_per_connection_kb(test) == 2 * 1024 / 1000


def test_deliveries_the_clients_never_got_are_delivered_to_nobody():
    # The fixture's server counts comet deliveries in responses.push (spec §5).
    assert delivered_to_nobody(pushed("node-http", behaviour="comet")) == 0
    assert delivered_to_nobody(pushed("java-tomcat-blocking", behaviour="comet")) == 30
    assert delivered_to_nobody(pushed("node-http")) is None, "no websocket counter recorded"


def test_a_row_per_transport_contestant_and_count_and_the_shared_tomcat_websocket_said():
    tests = [
        pushed(contestant, repeat, behaviour=behaviour)
        for contestant in ("node-http", "java-tomcat-async")
        for behaviour in ("sse", "websocket")
        for repeat in range(3)
    ]
    section = transport_section(tests, [], {"node-http": "single event loop"})
    assert [(r.transport, r.contestant, r.tests) for r in section.rows] == [
        ("sse", "java-tomcat-async", 3),
        ("sse", "node-http", 3),
        ("websocket", "java-tomcat-async", 3),
        ("websocket", "node-http", 3),
    ]
    tomcat_ws = section.rows[2]
    assert "JSR 356" in tomcat_ws.architecture
    assert any("not a difference of architecture" in note for note in section.notes)
    p99 = tomcat_ws.cells[3][0]
    assert p99 == "9", "the p99 delivery delay in ms"


def ladder(rungs: dict[int, float], contestant="node-http"):
    tests = []
    for clients, p99_ms in rungs.items():
        test = pushed(contestant, clients=clients)
        test.scenario = "capacity"
        test.summary["event_delay_us"] = {"p50": 1000, "p99": p99_ms * 1000}
        tests.append(test)
    return tests


def test_capacity_is_the_largest_rung_held_and_says_when_the_descriptor_cap_stopped_it():
    tests = ladder({1000: 20, 4000: 90, 8000: 400}, "java-tomcat-blocking")
    tests += ladder({1000: 10, 4000: 20, 19000: 60}, "node-http")
    tests += ladder({1000: 300}, "rust-zhtta")
    table = dict(((t, c), text) for t, c, text in capacity_table(tests, nofile=20000))
    assert table[("websocket", "java-tomcat-blocking")] == "4,000"
    assert table[("websocket", "node-http")] == "≥ 19,000 (descriptor cap)"
    assert table[("websocket", "rust-zhtta")] == "< 1,000 (no rung held)"
    lossy = ladder({1000: 10})
    lossy[0].summary["events"]["lost"] = 3
    assert capacity_table(lossy, nofile=None) == [
        ("websocket", "node-http", "< 1,000 (no rung held)")
    ]


def test_no_push_test_no_section():
    keepalive = recorded(1, "fast", {"behaviour": "keepalive"}, "node-http", 0, random.Random(1))
    assert transport_section([keepalive], [Run(1, 1, 0.0, "finished", {})], {}) is None
