"""Latency stacked at a kernel timer (issue 32, item 5): a distribution piled just past the
40 ms delayed ACK, the 200 ms minimum RTO or the 1 s SYN retransmit is flagged on the cells
that show it, from synthetic histograms and from a real delayed-ACK stall planted in the
reference server (its `nagle_split` fault), which the engine really waits on."""

import random

from hdrh.histogram import HdrHistogram
from test_report import recorded
from test_runner import run_in_process, write_suite

from serverlab.results.report.builder import report_data
from serverlab.results.report.flags.kernel_timers import stacked_timers
from serverlab.results.report.flags.validity import flags_for, validity_flags


def encoded(*groups: tuple[int, float, float]) -> str:
    """A latency histogram (µs) of `count` samples spread evenly from `low_ms` to `high_ms`,
    for each (count, low_ms, high_ms)."""
    histogram = HdrHistogram(1, 60_000_000, 3)
    for count, low_ms, high_ms in groups:
        for i in range(count):
            histogram.record_value(int(1000 * (low_ms + (high_ms - low_ms) * i / count)))
    return histogram.encode().decode()


def request_test(latencies: str, intended_rate: float | None = None):
    test = recorded(1, "stall", {"behaviour": "keepalive"}, "node-http", 0, random.Random(3))
    test.histograms = {"latency_us": latencies}
    test.summary["intended_rate"] = intended_rate
    return test


def timer_flags(test):
    return [flag for flag in validity_flags(test) if flag.code == "kernel-timer"]


def test_answers_piled_at_the_delayed_ack_are_flagged_on_latency_and_a_closed_loops_rate():
    test = request_test(encoded((930, 41, 47), (70, 0.5, 3)))
    (flag,) = timer_flags(test)
    assert flag.text == (
        "latency stacked at the 40 ms delayed-ACK timer: 93% of answers between 38 and 52 ms"
    )
    assert flag.figures == {"p50", "p99", "rps"}
    assert [f.code for f in flags_for(test, "cpu")] == []


def test_an_open_loops_rate_is_the_pacers_and_does_not_carry_the_flag():
    (flag,) = timer_flags(request_test(encoded((930, 41, 47), (70, 0.5, 3)), 300.0))
    assert flag.figures == {"p50", "p99"}


def test_the_rto_and_syn_retransmit_timers_are_named_by_their_own_piles():
    # 25 % of the answers at 200 ms is a pile; 15 % at 1 s is under the share one needs.
    stacks = stacked_timers(encoded((600, 1, 3), (250, 201, 230), (150, 1003, 1100)))
    assert [(s.timer, s.share) for s in stacks] == [("TCP minimum RTO", 0.25)]
    (syn,) = stacked_timers(encoded((700, 1, 3), (300, 1003, 1100)))
    assert (syn.timer, syn.low_ms, syn.high_ms) == ("SYN retransmit", 950.0, 1300.0)


def test_a_broad_distribution_passing_through_a_timer_is_not_a_pile():
    # A third of the answers between 38 and 52 ms, but as many just below that band.
    broad = encoded((500, 24, 38), (500, 38, 52), (500, 52, 66))
    assert stacked_timers(broad) == ()
    # A fast server, and a slow one whose answers sit near no timer: nothing.
    assert stacked_timers(encoded((1000, 0.2, 2))) == ()
    assert stacked_timers(encoded((1000, 60, 150))) == ()


def test_stalls_smeared_upwards_by_a_busy_machine_still_stand_on_the_timers_edge():
    # Nothing below 41 ms, 30 % up to 52 ms, the rest late timers and lag up to 110 ms.
    (stack,) = stacked_timers(encoded((300, 41, 52), (700, 52, 110)))
    assert (stack.timer, stack.share) == ("delayed-ACK", 0.3)


def test_a_few_stalls_under_the_share_are_left_to_the_tail_figures():
    assert stacked_timers(encoded((850, 0.5, 2), (150, 41, 47))) == ()
    (stack,) = stacked_timers(encoded((750, 0.5, 2), (250, 41, 47)))
    assert (stack.timer_ms, stack.share) == (40.0, 0.25)


STALLED = """
[[scenario]]
name = "stalled"
behaviour = "keepalive"
clients = 2
duration_s = 1.5
[scenario.tunables.reference]
fault = "nagle_split"

[[scenario]]
name = "clean"
behaviour = "keepalive"
clients = 2
duration_s = 1.5
"""


def test_a_real_delayed_ack_stall_is_flagged_on_its_cells_and_on_no_other(
    contestants_dir, tmp_path
):
    db = tmp_path / "lab.db"
    _, tests, _ = run_in_process(write_suite(tmp_path, STALLED), db)
    by_scenario = {test.scenario: test for test in tests}
    assert all(test.status == "ok" for test in tests), [t.validity for t in tests]
    # The body waits for the engine's delayed ACK of the head: ~40 ms an answer.
    assert by_scenario["stalled"].summary["latency_us"]["p50"] >= 38_000
    (flag,) = timer_flags(by_scenario["stalled"])
    assert flag.text.startswith("latency stacked at the 40 ms delayed-ACK timer: ")
    assert timer_flags(by_scenario["clean"]) == []
    cells = report_data(db)["cells"]
    flagged = {
        (cell["scenario"], cell["metric"])
        for cell in cells
        if "kernel-timer" in [f["code"] for f in cell["flags"]]
    }
    assert flagged == {("stalled", "p50"), ("stalled", "p99"), ("stalled", "rps")}
