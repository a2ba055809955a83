"""Issue 19's test of the figures themselves: real push runs against the reference server
(the real engine, the real store) with a control call served late and with `sent` stamped
early. The flags fire, and the figures stay those of the cycles between the end of the ramp
and the emitters' intended stop."""

from test_runner import run_in_process, write_suite

from serverlab.results.report import push
from serverlab.results.report.metrics import flags_for, validity_flags

CLIENTS = 50
# Ramp 0.5 s, held 5 s, emitters cleared at 4 s: seven 500 ms cycles in the window.
COMET = """
[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 50
ramp_up_s = 0.5
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
    # Delays pool every cycle until the engine reports them per cycle: said on p50/p99 only.
    pooled = [f for f in flags_for(test, "p99") if f.code == "delay-includes-ramp"]
    assert pooled and not [f for f in flags_for(test, "rss") if f.code == "delay-includes-ramp"]


def test_an_unanswered_stats_is_explained_in_the_servers_terms():
    from pathlib import Path

    from serverlab.base.httpclient import HttpError
    from serverlab.contestant.manifest import find
    from serverlab.run.executor import stats_silence
    from serverlab.run.planner import plan_tests
    from serverlab.run.suite import load_suite

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
