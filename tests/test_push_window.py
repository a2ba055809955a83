"""Issue 19's test of the figures themselves: real push runs against the reference server
(the real engine, the real store) with a control call served late and with `sent` stamped
early. The flags fire, and the figures stay those of the cycles between the end of the ramp
and the emitters' intended stop."""

from hdrh.histogram import HdrHistogram
from test_runner import run_in_process, write_suite

from serverlab.results.records import EmitCycle, RecordedTest
from serverlab.results.report.figures import push
from serverlab.results.report.figures.hdr import values_at_quantiles
from serverlab.results.report.figures.table import METRICS_BY_NAME
from serverlab.results.report.flags.validity import TAIL_FLOOR_SHARE, flags_for, validity_flags
from serverlab.results.report.sections.transports import cycle_row, resubscribe_gap_ms

CLIENTS = 50
# Ramp 1 s, held 5 s, emitters cleared at 4 s: six 500 ms cycles in the window. The ramp
# holds two of the server's cycles, so at least one reaches a subscriber whatever the phase of
# its timer against the ramp's start (with a 0.5 s ramp its one cycle could come before any
# subscriber, and a loaded local run then had no ramp cycle to plant a drain on).
COMET = """
[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 50
ramp_up_s = 1.0
duration_s = 4.5
emit_interval_ms = 500
[scenario.tunables.reference]
fault = "{fault}"
"""


def comet_run(tmp_path, fault):
    _, (test,), _ = run_in_process(
        write_suite(tmp_path, COMET.format(fault=fault)), tmp_path / "lab.db"
    )
    assert test.status == "ok", test.validity
    return test


def codes(test) -> set[str]:
    return {flag.code for flag in validity_flags(test)}


def assert_in_window_figures(test) -> None:
    window = push.in_window(test)
    assert len(window) >= 4, [c.seq for c in push.cycles(test)]
    assert push.admitted(test) == CLIENTS
    assert [share for _, share in push.completeness(test)] == [1.0] * len(window)
    assert all(cycle.total == CLIENTS for cycle in window), "the server's snapshot beside it"
    assert push.delivered_to_nobody(test) == 0


def test_a_correct_server_has_every_cycle_in_its_window_and_no_late_call(contestants_dir, tmp_path):
    test = comet_run(tmp_path, "none")
    calls = test.run_info["control_calls"]
    # Every control call stamped: /logging and /event/set before, the timed clear, the clear after.
    assert [(c["phase"], c["path"], c["status"]) for c in calls] == [
        ("before", "/logging", 200),
        ("before", "/event/set", 200),
        ("during", "/event/clear", 200),
        ("after", "/event/clear", 200),
    ]
    assert all(c["sent_ms"] <= c["answered_ms"] for c in calls)
    (clear,) = [c for c in calls if c["phase"] == "during"]
    assert clear["due_ms"] <= clear["sent_ms"] <= clear["answered_ms"]
    assert_in_window_figures(test)
    assert push.after_window(test) == []
    assert push.emitted_after_window(test) == 0
    assert "control-late" not in codes(test)


def test_a_clear_served_late_flags_control_late_and_its_cycles_stay_out_of_the_figures(
    contestants_dir, tmp_path
):
    test = comet_run(tmp_path, "late_control")
    (clear,) = [c for c in test.run_info["control_calls"] if c["phase"] == "during"]
    # Sent when due, on its own thread; answered a second later.
    assert clear["sent_ms"] - clear["due_ms"] < 100
    assert clear["late_ms"] >= 900 and clear["status"] == 200
    (late,) = [flag for flag in validity_flags(test) if flag.code == "control-late"]
    assert late.text.startswith("control-late (")
    assert "POST /event/clear answered" in late.text
    assert "created after the emitters' stop" in late.text
    # The delays shown come from the window's own cycles, so the late cycles are not in
    # them: the flag touches the whole load's figures, not these.
    assert push.has_cycle_records(test)
    assert not late.touches("delay_p50") and not late.touches("delay_p99")
    assert late.touches("cpu") and late.touches("lost")
    # The emitter went on for the second the clear took: those cycles are apart.
    after = push.after_window(test)
    assert after, "cycles created after the intended stop"
    stop = push.window_ms(test)[1]
    assert all(cycle.created_ms > stop for cycle in after)
    assert push.emitted_after_window(test) >= CLIENTS
    assert_in_window_figures(test)


def test_sent_stamped_early_leaves_the_client_measured_delays_and_the_window_standing(
    contestants_dir, tmp_path
):
    test = comet_run(tmp_path, "early_sent")
    # The server claims no delay at all; its clients waited the 150 ms hold.
    assert {row.duration_ms for row in test.emits} == {0}
    assert test.summary["event_delay_us"]["p50"] >= 150_000
    assert_in_window_figures(test)
    assert "control-late" not in codes(test)
    # The engine recorded each cycle: the delays shown are the window's, nothing is pooled,
    # and a 50-delivery burst drains far within a quarter of the 150 ms its clients waited.
    assert push.has_cycle_records(test)
    assert push.delay_us(test, "p50") >= 150_000
    assert {"delay-includes-ramp", "engine-floor"}.isdisjoint(codes(test))
    assert_engine_floor_fires_on_a_planted_drain(test)


def assert_engine_floor_fires_on_a_planted_drain(test) -> None:
    """A cycle drained at the engine for longer than a quarter of the delay shown flags the
    delay figures (only those), through the real report code; outside the window it does not."""
    p99 = push.delay_us(test, "p99")
    before = push.cycles(test)[0]
    assert before.created_ms < push.window_ms(test)[0], "the ramp's cycle"
    push.measured(before).drain_us = int(p99)  # the ramp's own cycle: not a figure shown
    assert "engine-floor" not in codes(test)
    cycle = push.in_window(test)[1]
    push.measured(cycle).drain_us = int(p99 * TAIL_FLOOR_SHARE) + 1_000
    (floor,) = [f for f in flags_for(test, "delay_p99") if f.code == "engine-floor"]
    assert floor.figures == {"delay_p50", "delay_p99"}
    assert (
        f"cycle {cycle.seq}" in floor.text and "p50 (" in floor.text and "and p99 (" in floor.text
    )
    assert not [f for f in flags_for(test, "rss") if f.code == "engine-floor"]
    assert not [f for f in flags_for(test, "cpu") if f.code == "engine-floor"]


# Ramp 1 s over two 500 ms cycles, held 3 s, emitters cleared at 3 s: the server's first cycle
# that reaches anyone falls in the ramp and is held 400 ms; the window's are prompt.
SLOW_RAMP = """
[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 50
ramp_up_s = 1.0
duration_s = 3.0
emit_interval_ms = 500
[scenario.tunables.reference]
fault = "slow_first_cycle"
"""


def test_push_delay_percentiles_come_from_the_windows_cycles_and_leave_the_ramps_out(
    contestants_dir, tmp_path
):
    _, (test,), _ = run_in_process(write_suite(tmp_path, SLOW_RAMP), tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    start, _ = push.window_ms(test)
    ramp = [c for c in push.cycles(test) if c.created_ms < start]
    slow = [c for c in ramp if push.cycle_delay_us(c, [0.0])[0] >= 400_000]
    assert len(slow) == 1, [(c.seq, push.cycle_delay_us(c, [0.5, 1.0])) for c in ramp]
    # The engine's pool over the whole test holds the slow cycle; the window's figures do not.
    assert test.summary["event_delay_us"]["max"] >= 400_000
    window = push.in_window(test)
    assert len(window) >= 3
    assert all(push.cycle_delay_us(c, [1.0])[0] < 400_000 for c in window)
    p99 = push.delay_us(test, "p99")
    assert p99 is not None and p99 < 400_000
    assert push.window_delays(test).get_total_count() == sum(c.received for c in window)
    assert METRICS_BY_NAME["delay_p99"].of(test) == p99 / 1000
    assert METRICS_BY_NAME["p99"].of(test) is None, "a push test has no request latency"
    assert "delay-includes-ramp" not in codes(test)
    # The cycles' table shows each one's delays and the engine's drain of it.
    row = cycle_row(test)
    assert all(", delay p50 " in cell and " ms, drain " in cell for cell in row.cycles)
    assert all(push.measured(c).drain_samples == c.received for c in push.cycles(test))


def test_cycle_records_add_up_to_the_percentiles_of_every_delivery_together():
    """Two records of one cycle (as two workers or generators would hand them over) and a
    later cycle: the figures are those of one histogram of every value."""
    groups = [[1_000 * k for k in range(1, 300)], [250_000 + 7_000 * k for k in range(40)], [3_000]]
    every = HdrHistogram(1, 3_600_000_000, 3)
    cycles = []
    for index, values in enumerate(groups):
        one = HdrHistogram(1, 3_600_000_000, 3)
        for value in values:
            one.record_value(value)
            every.record_value(value)
        created = 2_000 + 500 * (index // 2)
        encoded = one.encode().decode()
        cycles.append(
            EmitCycle(
                event="e1", seq=1 + index // 2, created_ms=created, received=len(values),
                total=50, delay_histogram=encoded, first_arrival_ms=0.0, last_arrival_ms=0.0,
                drain_samples=0,
            )
        )  # fmt: skip
    test = RecordedTest(1, "k", "reference", 0, "ok", 0.0, 1.0, params={"behaviour": "comet"})
    test.cycles = cycles
    test.run_info["emit_window"] = {"start_ms": 1_000.0, "stop_ms": 9_000.0}
    for name, quantile in (("p50", 0.5), ("p99", 0.99)):
        assert push.delay_us(test, name) == values_at_quantiles(every, [quantile])[0]
    assert push.window_delays(test).get_total_count() == sum(map(len, groups))


def test_an_unanswered_stats_is_explained_in_the_servers_terms():
    from pathlib import Path

    from serverlab.base.httpclient import HttpError
    from serverlab.contestant.manifest import find
    from serverlab.run.execution.executor import stats_silence
    from serverlab.run.plan.planner import plan_tests
    from serverlab.run.plan.suite.load import load_suite

    root = Path(__file__).resolve().parents[1]
    suite = load_suite(root / "suites" / "quick.toml")
    plans = plan_tests(suite, lambda name: find(name, root / "contestants"))
    longpoll = [p for p in plans if p.scenario == "longpoll-1s" and p.repeat == 0]
    tomcat = next(p for p in longpoll if p.contestant == "java-tomcat-blocking")
    node = next(p for p in longpoll if p.contestant == "node-http")
    error = HttpError("timed out")
    text = stats_silence(tomcat, find("java-tomcat-blocking", root / "contestants"), 15, error)
    assert text.startswith(
        "all 1,000 request threads (thread per request (Tomcat, blocking servlet)) held by the "
        "plan's 1,000 long polls until their 30 s timeout; GET /stats unanswered for 15 s"
    )
    plain = stats_silence(node, find("node-http", root / "contestants"), 15, error)
    assert plain == "GET /stats unanswered for 15 s after the load (timed out)"


def test_stats_is_tried_briefly_where_every_request_thread_is_known_to_be_held():
    from pathlib import Path

    from serverlab.contestant.manifest import find
    from serverlab.run.execution.executor import STATS_HELD_LIMIT_S, STATS_LIMIT_S, stats_limit_s
    from serverlab.run.plan.planner import plan_tests
    from serverlab.run.plan.suite.load import load_suite

    root = Path(__file__).resolve().parents[1]
    plans = plan_tests(
        load_suite(root / "suites" / "quick.toml"), lambda n: find(n, root / "contestants")
    )
    limits = {
        (p.scenario, p.contestant): stats_limit_s(p, find(p.contestant, root / "contestants"))
        for p in plans
    }
    assert STATS_HELD_LIMIT_S < STATS_LIMIT_S
    assert limits[("longpoll-1s", "java-tomcat-blocking")] == STATS_HELD_LIMIT_S
    assert limits[("longpoll-1s", "node-http")] == STATS_LIMIT_S
    assert limits[("fast-requests", "java-tomcat-blocking")] == STATS_LIMIT_S


def test_a_server_that_dies_before_the_clear_is_due_is_a_crash_and_the_clear_is_not_made(
    contestants_dir, tmp_path
):
    body = COMET.format(fault="none") + 'die_after = "1.5"\n'
    _, (test,), _ = run_in_process(write_suite(tmp_path, body), tmp_path / "lab.db")
    assert test.status == "crashed"
    (clear,) = [c for c in test.run_info["control_calls"] if c["phase"] == "during"]
    assert clear["made"] == 0 and "sent_ms" not in clear
    noticed_ms = (test.started_at + test.crash.time) * 1000
    assert noticed_ms < clear["due_ms"], "noticed while the timed call waited for its time"


LONGPOLL = """
[[scenario]]
name = "longpoll"
behaviour = "longpoll"
pacer = "users"
clients = 20
ramp_up_s = 0.5
duration_s = 3.0
emit_interval_ms = 500
longpoll_duration_ms = 30000
"""


def test_a_long_polls_re_subscribe_gap_and_its_cycles_delays_are_reported(
    contestants_dir, tmp_path
):
    _, (test,), _ = run_in_process(write_suite(tmp_path, LONGPOLL), tmp_path / "lab.db")
    assert test.status == "ok", test.validity
    gap = test.summary["resubscribe_gap_us"]
    # A gap per answer followed by a poll: all of them, but for a client whose budget ended
    # with its answer (a poll still held at the run's end had one before it).
    answers = test.summary["events"]["longpoll_event_answers"]
    answers += test.summary["events"]["longpoll_timeout_answers"]
    assert answers - 20 <= gap["count"] <= answers
    p50 = resubscribe_gap_ms("p50")(test)
    p99 = resubscribe_gap_ms("p99")(test)
    assert p50 is not None and p99 is not None and p50 <= p99 < 500, (p50, p99)
    window = push.in_window(test)
    assert len(window) >= 3 and all(push.measured(c) is not None for c in window)
    assert push.delay_us(test, "p50") is not None
    assert "delay-includes-ramp" not in codes(test)
