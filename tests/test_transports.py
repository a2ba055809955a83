"""The push study's report section: its figures from stored tests, the capacity searches'
knees (and stored ladders' rungs), and the notes it must carry."""

import random

from test_report import recorded

from serverlab.results.records import EmitRecord, EngineInterval, MonitorSample, Run, ServerStats
from serverlab.results.report.figures import push
from serverlab.results.report.figures.efficiency import cpu_per_event_us, memory_per_connection_kib
from serverlab.results.report.figures.table import METRICS_BY_NAME
from serverlab.results.report.flags.validity import flags_for, validity_flags
from serverlab.results.report.sections.transports import FIGURES, capacity_table, transport_section

PARAMS = {"behaviour": "websocket", "clients": 1000, "emit_interval_ms": 1000}


def pushed(contestant="node-http", repeat=0, **params):
    return recorded(1, "transports", {**PARAMS, **params}, contestant, repeat, random.Random(5))


def test_memory_per_connection_is_the_rise_over_the_load_per_client():
    test = pushed()
    test.samples = [
        MonitorSample(t=0, rss_bytes=50 * 2**20),
        MonitorSample(t=1, rss_bytes=52 * 2**20),
    ]
    assert memory_per_connection_kib(test) == 2 * 1024 / 1000


T0 = 1_700_000_000_000  # the engine's start, Unix ms


def windowed(late_clear_ms=0.0):
    """A comet test of 1,000 clients ramped over 1.5 s, emitters due to stop at 4.5 s: one
    cycle in the ramp, three in the window, and, when the clear came late, one after it
    that no client saw whole (Tomcat's case in issue 19)."""
    test = pushed("java-tomcat-blocking", behaviour="comet", ramp_up_s=1.5)
    test.intervals = [
        EngineInterval(seq=i, t=t, data={"open_connections": n})
        for i, (t, n) in enumerate([(1.0, 667), (2.0, 1000), (3.0, 1000)])
    ]
    # (seq, created after T0 in ms, received by the clients, the server's snapshot total)
    rows = [(1, 1000, 663, 663), (2, 2000, 1000, 1000), (3, 3000, 990, 1000), (4, 4000, 1000, 1000)]
    if late_clear_ms:
        rows.append((5, 5000, 400, 1000))
    test.emits = [
        EmitRecord("e1", seq, place=1, total=total, duration_ms=5, created_ms=T0 + at, received=got)
        for seq, at, got, total in rows
    ]
    test.run_info["emit_window"] = {"start_ms": T0 + 1500.0, "stop_ms": T0 + 4500.0}
    test.run_info["control_calls"] = [
        {"method": "POST", "path": "/event/clear", "due_ms": T0 + 4500.0, "status": 200,
         "late_ms": late_clear_ms},
    ]  # fmt: skip
    delivered = sum(total for *_, total in rows) + (2000 if late_clear_ms else 0)
    test.server_stats = [
        ServerStats(0, {"responses": {"push": 0}}, "start"),
        ServerStats(9, {"responses": {"push": delivered}}, "end"),
    ]
    return test


def test_push_figures_come_from_the_cycles_between_the_ramp_and_the_emitters_stop():
    test = windowed()
    assert [c.seq for c in push.in_window(test)] == [2, 3, 4]
    assert push.admitted(test) == 1000, "open at the first interval line after the ramp"
    assert [round(share, 3) for _, share in push.completeness(test)] == [1.0, 0.99, 1.0]
    assert push.worst_completeness_percent(test) == 99.0
    assert push.delivered_to_nobody(test) == 10, "the ramp's cycle counts: its total is 663"
    assert push.emitted_after_window(test) == 0
    assert push.plan_events_per_s(test) == 1000, "3 cycles x 1,000 subscribers / 3 s"
    assert push.control_late_ms(test) is None
    assert not [f for f in validity_flags(test) if f.code == "control-late"]


def test_a_late_clear_flags_control_late_and_its_cycles_are_apart_not_delivered_to_nobody():
    test = windowed(late_clear_ms=3512.0)
    assert [c.seq for c in push.in_window(test)] == [2, 3, 4]
    assert [c.seq for c in push.after_window(test)] == [5]
    assert push.delivered_to_nobody(test) == 10, "cycle 5's 600 unseen are not counted"
    assert push.emitted_after_window(test) == 3000, "cycle 5 and two the clients never saw"
    (late,) = [f for f in validity_flags(test) if f.code == "control-late"]
    assert late.text.startswith("control-late (3,512 ms): POST /event/clear answered 3,512 ms")
    assert "1 cycle(s) created after the emitters' stop" in late.text
    # On the figures over the whole load, not on those of the window; delays pooled over
    # every cycle (a test stored without per-cycle records, as this one) are of the load.
    assert not push.has_cycle_records(test)
    assert late.touches("delay_p99") and late.touches("cpu")
    assert not any(late.touches(name) for name in ("admitted", "complete", "nobody", "after"))


def test_cpu_per_event_counts_the_window_only_not_the_ramp_nor_a_late_cycle():
    # The monitor starts 0.5 s after T0: its t = 1.0 is the window's start (T0 + 1.5 s).
    test = windowed(late_clear_ms=3512.0)
    test.started_at, test.run_info["monitor_t0_s"] = T0 / 1000, 0.5
    # 90 % of a core through the ramp's connection set-up, 20 % in the window, 80 % after
    # it (the late cycle's deliveries to clients that had left).
    busy = [(0.0, None), (0.5, 90.0), (1.0, 90.0), (2.0, 20.0), (3.0, 20.0), (4.0, 20.0)]
    busy += [(5.0, 80.0)]
    test.samples = [MonitorSample(t=t, cpu_percent=cpu) for t, cpu in busy]
    # Window t 1.0-4.0: 3 s x 20 % = 0.6 s of CPU over 2,990 events of cycles 2, 3 and 4,
    # in µs per event.
    assert round(cpu_per_event_us(test), 3) == round(0.6e6 / 2990, 3)
    # Readings that stop before the window ends give no figure rather than a part of one.
    test.samples = test.samples[:-3]
    assert cpu_per_event_us(test) is None
    (late,) = [f for f in validity_flags(windowed(3512.0)) if f.code == "control-late"]
    assert not late.touches("cpu_event"), "a figure of the window, as completeness is"


def test_an_unreadable_stats_flags_only_the_figures_that_read_it():
    test = windowed()
    test.server_stats = test.server_stats[:1]
    test.validity["stats_unreadable"] = "all 1,000 request threads held by long polls"
    assert push.emitted_after_window(test) is None
    assert push.delivered_to_nobody(test) == 10, "from the cycles' own totals, not /stats"
    (flag,) = [f for f in validity_flags(test) if f.code == "stats-unreadable"]
    assert flag.figures == frozenset({"after"})
    assert "1,000 request threads" in flag.text
    assert not [f for f in flags_for(test, "delay_p50") if f.code == "stats-unreadable"]


def test_push_rows_have_no_throughput_nor_request_latency_but_a_delivery_delay():
    test = windowed()
    test.summary["rps"] = 484.0
    test.summary["event_delay_us"] = {"p50": 26000, "p99": 42000}
    assert METRICS_BY_NAME["rps"].of(test) is None
    assert METRICS_BY_NAME["delay_p50"].of(test) == 26.0
    poll = windowed()
    poll.params["behaviour"] = "longpoll"
    poll.summary["latency_us"] = {"p50": 992000}
    poll.summary["event_delay_us"] = {"p50": 39000, "p99": 60000}
    assert METRICS_BY_NAME["delay_p50"].of(poll) == 39.0, "not the poll's wait for the next emit"
    assert METRICS_BY_NAME["p50"].of(poll) is None, "a poll's answer time is not a latency"
    assert all("/s" not in figure.unit for figure in FIGURES)


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
    p99 = tomcat_ws.cells[[f.name for f in FIGURES].index("delay_p99")][0]
    assert p99 == "9", "the p99 delivery delay in ms"


def ladder(rungs: dict[int, float], contestant="node-http"):
    tests = []
    for clients, p99_ms in rungs.items():
        test = pushed(contestant, clients=clients)
        test.scenario = "capacity"
        test.summary["event_delay_us"] = {"p50": 1000, "p99": p99_ms * 1000}
        tests.append(test)
    return tests


def test_a_stored_ladder_is_judged_rung_by_rung_as_the_searchs_steps():
    tests = ladder({1000: 20, 4000: 90, 8000: 400}, "java-tomcat-blocking")
    tests += ladder({1000: 10, 4000: 20, 19000: 60}, "node-http")
    tests += ladder({1000: 300}, "rust-zhtta")
    table = dict(((t, c), text) for t, c, text in capacity_table(tests, nofile=20000))
    assert table[("websocket", "java-tomcat-blocking")] == "4,000"
    assert table[("websocket", "node-http")] == "≥ 19,000 (descriptor cap)"
    assert table[("websocket", "rust-zhtta")] == "< 1,000 (none held)"
    # As the capacity search's knee: a rung held above one that was not does not count.
    noisy = ladder({1000: 10, 4000: 400, 8000: 30}, "go-nethttp")
    assert capacity_table(noisy, nofile=None) == [("websocket", "go-nethttp", "1,000")]
    lossy = ladder({1000: 10})
    lossy[0].summary["events"]["lost"] = 3
    assert capacity_table(lossy, nofile=None) == [("websocket", "node-http", "< 1,000 (none held)")]


def searched(contestant, repeat, held: dict[int, bool], maximum=19000, status="ok"):
    """A push capacity search as the executor stores it: its steps over the clients held."""
    test = pushed(contestant, repeat, behaviour="sse")
    test.scenario, test.status = "capacity-sse", status
    steps = [
        {"level": float(n), "sustained": ok, "reason": "" if ok else "delay p99 400 ms over"}
        for n, ok in held.items()
    ]
    test.run_info["capacity"] = {
        "level": "clients",
        "knee": None,
        "steps": steps,
        "maximum": maximum,
        "p99_bound_ms": 250,
    }
    return test


def test_the_push_capacity_is_the_knee_of_every_repeats_search_together():
    # Tomcat held 4,000 then failed 8,000 and bisected to 6,000 once, 5,000 the next time.
    tomcat = [
        searched("java-tomcat-blocking", 0, {1000: True, 2000: True, 4000: True, 8000: False,
                                             6000: True, 7000: False}),
        searched("java-tomcat-blocking", 1, {1000: True, 2000: True, 4000: True, 8000: False,
                                             6000: False, 5000: True}),
    ]  # fmt: skip
    node = [
        searched("node-http", r, {1000: True, 8000: True, 16000: True, 19000: True}) for r in (0, 1)
    ]
    crashed = [searched("go-nethttp", 0, {1000: True, 2000: True}, status="crashed")]
    table = dict(
        ((t, c), text) for t, c, text in capacity_table(tomcat + node + crashed, nofile=20000)
    )
    assert table[("sse", "java-tomcat-blocking")] == "5,000", "held in every repeat"
    assert table[("sse", "node-http")] == "≥ 19,000 (descriptor cap)"
    assert table[("sse", "go-nethttp")] == "< 1,000 (none held)", "a crashed search holds none"
    section = transport_section(tomcat + node, [Run(1, 1, 0.0, "finished", {})], {})
    assert section.rows == [], "a search's kept step is no cell of the study"
    assert ("sse", "node-http", "≥ 19,000 (the search's maximum)") in section.capacity


def test_no_push_test_no_section():
    keepalive = recorded(1, "fast", {"behaviour": "keepalive"}, "node-http", 0, random.Random(1))
    assert transport_section([keepalive], [Run(1, 1, 0.0, "finished", {})], {}) is None


def test_the_emit_duration_chart_shows_the_clients_delay_beside_the_servers_stamps():
    from serverlab.results.report.charts.chart import emit_duration_by_place

    test = windowed()
    test.summary["event_delay_us"] = {"p50": 26000, "p99": 42000}
    chart = emit_duration_by_place("e", [test])
    names = [trace["name"] for trace in chart.figure["data"]]
    assert "java-tomcat-blocking median" in names
    clients = {t["name"]: t["y"] for t in chart.figure["data"] if "clients" in t["name"]}
    assert clients == {
        "java-tomcat-blocking clients' delay p50": [26.0, 26.0],
        "java-tomcat-blocking clients' delay p99": [42.0, 42.0],
    }


def test_a_long_polls_percentile_curve_is_its_delivery_delay_not_its_wait_for_the_emit():
    from serverlab.results.report.figures.histogram import latency_histogram

    poll = windowed()
    poll.params["behaviour"] = "longpoll"
    poll.histograms = {"latency_us": "the answer times"}
    poll.summary["event_delay_histogram"] = "the delivery delays"
    assert latency_histogram(poll) == "the delivery delays"
    plain = pushed(behaviour="keepalive")
    plain.histograms = {"latency_us": "the answer times"}
    plain.summary["event_delay_histogram"] = "the delivery delays"
    assert latency_histogram(plain) == "the answer times"
