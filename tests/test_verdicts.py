"""Verdicts that matter (issue 32): a flagged repeat leaves only its figure's comparison, no
verdict on a saturated CPU % or below the material-difference floor, every verdict with
its unit and both medians, ordered by effect size; and the efficiency figures they judge.

Every case is stored tests in a real SQLite file, read back through the store as the
report and ``serverlab compare`` read them."""

import random
import re
from pathlib import Path

import pytest
from test_report import recorded

from serverlab.results import stats
from serverlab.results.compare import compare
from serverlab.results.records import MonitorSample, StoredSuite
from serverlab.results.report.builder import report_data
from serverlab.results.report.figures.efficiency import cpu_per_request_us
from serverlab.results.report.selection import load_selected, parse_selection
from serverlab.results.store import Store

NODE, TOMCAT = "node-http", "java-tomcat-blocking"
KEEPALIVE = {"behaviour": "keepalive", "pacer": "closed", "clients": 50}
T0_MS = 1_763_780_000_000.0


def store(db: Path, tests) -> Path:
    with Store(db) as lab:
        suite = lab.add_suite(StoredSuite("quick", "suites/quick.toml", "ab" * 32, 0.2))
        run = lab.start_run(suite, {"cpu_count": 2})
        for test in tests:
            test.run_id = run.id
            lab.commit_test(test)
        lab.finish_run(run.id, "finished")
    return db


def request_test(contestant, repeat, *, rps, p99_ms, cpu=None, params=KEEPALIVE, **validity):
    """A keep-alive test whose throughput, p99 and (kernel) server CPU % are given; its
    server pinned to one CPU."""
    test = recorded(0, "fast", dict(params), contestant, repeat, random.Random(repeat))
    test.summary["rps"] = rps
    test.summary["latency_us"]["p99"] = p99_ms * 1000
    test.summary["errors"] = {"timeout": 0}
    test.run_info["cpus"] = {"server": "1", "engine": "0"}
    test.tunables = {}
    if cpu is not None:
        test.run_info["kernel"] = {"server_cpu_percent": cpu}
    test.validity = dict(validity)
    return test


def glance_of(db: Path, scenario: str = "fast") -> dict:
    (glance,) = [g for g in report_data(db)["at_a_glance"] if g["scenario"] == scenario]
    return glance


def differences(glance: dict) -> dict[str, dict]:
    return {d["metric"]: d for d in glance["differences"]}


def test_a_flagged_repeat_leaves_its_figures_comparison_and_the_sentence_says_so(tmp_path):
    tests = [request_test(NODE, r, rps=40_000 + 100 * r, p99_ms=2 + 0.01 * r) for r in range(6)] + [
        request_test(TOMCAT, r, rps=10_000 + 100 * r, p99_ms=9 + 0.01 * r) for r in range(6)
    ]
    # node-http's third repeat ran while the machine was busy: that flag touches every
    # figure of that repeat, and only that repeat.
    tests[2].validity = {"machine_busy": "58 % of a core"}
    db = store(tmp_path / "lab.db", tests)
    glance = glance_of(db)
    stated = differences(glance)
    # 5 repeats against 6 still decide (smallest p 0.0043, under 0.05 / the family's size).
    assert stated["rps"]["verdict"] == "better" and stated["p99"]["verdict"] == "better"
    assert (stated["rps"]["n_a"], stated["rps"]["n_b"]) == (5, 6)
    assert stated["rps"]["dropped_a"] == ["r3"]
    throughput = next(s for s in glance["sentences"] if "throughput" in s)
    assert "(5 of 6 repeats against 6; node-http machine-busy r3)" in throughput
    # The medians the sentence gives are the five unflagged repeats' (r3's 40,200 is out).
    assert stated["rps"]["median_a"] == stats.median([40_000, 40_100, 40_300, 40_400, 40_500])
    # The same in compare, whose family is the whole comparison.
    row = next(r for r in compare(db, NODE, TOMCAT, metrics=["rps"]) if r.metric.name == "rps")
    assert row.verdict is stats.Verdict.BETTER
    assert row.judgement.statement == (
        "faster: 40.3k against 10.2k req/s (5 of 6 repeats against 6; node-http machine-busy r3)"
    )


def test_too_few_unflagged_repeats_leave_no_verdict_and_say_why_in_one_line(tmp_path):
    tests = [request_test(NODE, r, rps=40_000 + r, p99_ms=2) for r in range(6)]
    tests += [request_test(TOMCAT, r, rps=10_000 + r, p99_ms=9) for r in range(6)]
    for test in tests[:3]:
        test.validity = {"machine_busy": "70 % of a core"}
    glance = glance_of(store(tmp_path / "lab.db", tests))
    assert "rps" not in differences(glance)
    (line,) = [line for line in glance["not_supported"] if line.startswith("throughput")]
    assert "\n" not in line
    assert line.startswith(
        "throughput, node-http against java-tomcat-blocking: no verdict: flagged (too few "
        "unflagged repeats: 4 or more needed): "
    )
    assert line.endswith("(3 of 6 repeats against 6; node-http machine-busy r1–r3)")


def test_both_servers_saturated_get_no_cpu_verdict_in_a_closed_loop(tmp_path):
    # Clearly apart (97-98 % against 92-93 % of the one CPU each was allowed), and both at
    # the ceiling: a closed loop keeps each server as busy as it can be.
    tests = [request_test(NODE, r, rps=40_000 + r, p99_ms=2, cpu=97 + 0.2 * r) for r in range(6)]
    tests += [request_test(TOMCAT, r, rps=10_000 + r, p99_ms=9, cpu=92 + 0.2 * r) for r in range(6)]
    glance = glance_of(store(tmp_path / "lab.db", tests))
    assert "cpu" not in differences(glance)
    assert not [s for s in glance["sentences"] if "server CPU over the load" in s]
    row = next(r for r in compare(tmp_path / "lab.db", NODE, TOMCAT) if r.metric.name == "cpu")
    assert row.verdict is stats.Verdict.SATURATED
    assert row.words == "both saturated (98% and 92% of the CPU each was allowed)"
    # At a fixed offered rate (an open loop) the same CPU % is a cost, and is judged.
    paced = {**KEEPALIVE, "pacer": "open", "rate": 5000}
    tests = [
        request_test(NODE, r, rps=5000, p99_ms=2, cpu=97 + 0.2 * r, params=paced) for r in range(6)
    ]
    tests += [
        request_test(TOMCAT, r, rps=5000, p99_ms=9, cpu=92 + 0.2 * r, params=paced)
        for r in range(6)
    ]
    paced_db = store(tmp_path / "paced.db", tests)
    row = next(r for r in compare(paced_db, NODE, TOMCAT) if r.metric.name == "cpu")
    assert row.verdict is stats.Verdict.WORSE


def test_a_difference_under_five_percent_is_no_material_difference(tmp_path):
    # Every node-http repeat 3 % faster than every Tomcat repeat: significant, not material.
    tests = [request_test(NODE, r, rps=10_300 + r, p99_ms=2) for r in range(6)]
    tests += [request_test(TOMCAT, r, rps=10_000 + r, p99_ms=9) for r in range(6)]
    db = store(tmp_path / "lab.db", tests)
    glance = glance_of(db)
    assert "rps" not in differences(glance) and "p99" in differences(glance)
    (line,) = [line for line in glance["not_supported"] if line.startswith("throughput")]
    assert "no material difference (3.0% apart, under 5%): 10.3k against 10k req/s" in line
    (row,) = compare(db, NODE, TOMCAT, metrics=["rps"])
    assert row.verdict is stats.Verdict.NOT_MATERIAL and row.test.p_value < 0.01


def test_socket_memory_a_page_apart_gets_no_verdict(tmp_path):
    tests = [request_test(NODE, r, rps=40_000 + r, p99_ms=2) for r in range(6)]
    tests += [request_test(TOMCAT, r, rps=10_000 + r, p99_ms=9) for r in range(6)]
    for test in tests:
        # node-http: no byte unread at the reading; Tomcat: one page on one socket (the
        # harness's own control call, say) - "0 against 0.00391".
        unread = 0 if test.contestant == NODE else 4096 + test.repeat_index
        reading = {"kernel_bytes": unread, "established": 50, "sockets": 51}
        test.run_info["kernel"] = {"sockets": {"last": reading, "peak": reading}}
    glance = glance_of(store(tmp_path / "lab.db", tests))
    assert "sockmem" not in differences(glance)
    assert not [s for s in glance["sentences"] if "socket memory" in s]
    judged = report_data(tmp_path / "lab.db")["at_a_glance"]
    assert judged and all("sockmem" not in (d["metric"] for d in g["differences"]) for g in judged)


def test_each_verdict_states_its_unit_and_both_medians_largest_effect_first(tmp_path):
    # node-http: 4x the throughput, a third of the p99, 1.5x the RSS (the samples' peak).
    tests = [request_test(NODE, r, rps=40_000 + 10 * r, p99_ms=3 + 0.01 * r) for r in range(6)]
    tests += [request_test(TOMCAT, r, rps=10_000 + 10 * r, p99_ms=9 + 0.01 * r) for r in range(6)]
    for test in tests:
        scale = 1.5 if test.contestant == NODE else 1.0
        for sample in test.samples:
            sample.rss_bytes = int((100 + test.repeat_index) * 2**20 * scale)
    glance = glance_of(store(tmp_path / "lab.db", tests))
    effects = [d["effect"] for d in glance["differences"]]
    assert effects == sorted(effects, reverse=True) and len(effects) >= 3
    order = [d["metric"] for d in glance["differences"]]
    # 4x, then 3x, then (of those this fixture separates) 2x, and the RSS's 1.5x after.
    assert order[:2] == ["rps", "p99"] and order.index("rss") > order.index("p50")
    for said, difference in zip(glance["sentences"], glance["differences"], strict=True):
        unit = difference["unit"] or "errors"
        assert re.search(rf": [\d.,k]+ against [\d.,k]+ {re.escape(unit)}", said), said
    assert glance["sentences"][0].startswith(
        "node-http has 3.99× java-tomcat-blocking's throughput [3.98–4.00]: 40k against 10k req/s"
    )


def test_the_first_screen_answers_for_throughput_p99_and_cpu_per_request(tmp_path):
    # The CPU per request has no readings in this fixture: it says why not, in one line.
    tests = [request_test(NODE, r, rps=40_000 + r, p99_ms=2 + 0.01 * r) for r in range(6)]
    tests += [request_test(TOMCAT, r, rps=10_000 + r, p99_ms=9 + 0.01 * r) for r in range(6)]
    for test in tests:
        monitored(test, cpu_percent=90.0 if test.contestant == NODE else 99.0)
    glance = glance_of(store(tmp_path / "lab.db", tests))
    stated = differences(glance)
    assert {"rps", "p99", "cpu_req"} <= set(stated)
    cpu = next(s for s in glance["sentences"] if "server CPU per request" in s)
    # 0.9 s of CPU over 40,000 answers against 0.99 s over 10,000.
    assert re.search(r"\]: 22\.\d against 99(\.\d)? µs", cpu), cpu
    assert glance["not_supported"] == []


def monitored(test, cpu_percent: float, overhang_percent: float = 300.0) -> None:
    """Monitor readings around the engine's one-second run: `cpu_percent` while it ran,
    `overhang_percent` in the half second after its last attempt (a JIT still compiling
    while the window closes)."""
    test.summary.update(started_at_ms=T0_MS + 500, duration_s=1.0)
    test.summary["answered"] = int(test.summary["rps"])
    test.started_at, test.run_info["monitor_t0_s"] = T0_MS / 1000, 0.0
    test.samples = [
        MonitorSample(t=t / 10, cpu_percent=cpu_percent if t <= 15 else overhang_percent)
        for t in range(1, 21)
    ]


def test_cpu_per_request_is_the_engines_window_without_the_overhang(tmp_path):
    test = request_test(NODE, 0, rps=40_000, p99_ms=2)
    monitored(test, cpu_percent=80.0)
    # The kernel's single window reading includes the overhang: not this figure while the
    # monitor's readings cover the engine's window.
    test.run_info["kernel"] = {"server_cpu_ticks": 200, "ticks_per_s": 100}
    db = store(tmp_path / "lab.db", [test])
    (stored,) = load_selected(db, parse_selection(None)).tests
    # 0.8 s of CPU in the engine's second (t 0.5-1.5) over its 40,000 answers: 20 µs each.
    assert cpu_per_request_us(stored) == pytest.approx(20.0)
    (cell,) = [c for c in report_data(db)["cells"] if c["metric"] == "cpu_req"]
    assert (cell["unit"], cell["median"]) == ("µs", pytest.approx(20.0))
    assert "last counted attempt" in cell["window"] and "kernel" in cell["source"]
    # So is the CPU % over the load: 80 %, not the 300 % burnt after the last attempt.
    (cell,) = [c for c in report_data(db)["cells"] if c["metric"] == "cpu"]
    assert cell["median"] == pytest.approx(80.0)
    # Readings that stop before the engine's last attempt leave only the load window's
    # kernel reading: 2 s of CPU, overhang and all.
    stored.samples = stored.samples[:12]
    assert cpu_per_request_us(stored) == pytest.approx(50.0)


def test_tarone_keeps_out_of_the_family_only_what_its_repeat_counts_cannot_decide():
    # Eight figures at 6 against 6 (smallest p 2/924) can each get under 0.05 / 8.
    assert stats.tarone_family([stats.smallest_p(6, 6)] * 8) == (list(range(8)), 8)
    # 4 against 6 (2/210) cannot, with five or more figures beside it.
    smallest = [stats.smallest_p(6, 6)] * 5 + [stats.smallest_p(4, 6)]
    assert stats.tarone_family(smallest) == ([0, 1, 2, 3, 4], 6)
    assert stats.smallest_p(5, 6) == pytest.approx(2 / 462)
    assert stats.smallest_p(3, 3) == pytest.approx(0.1)


def test_a_paired_runs_aa_floor_raises_the_material_difference(tmp_path):
    # Both contestants ran in a paired sitting's arms A and A' (the suite as written, twice):
    # node's A' sits 8 % above its A. Arms are never pooled, so node's arm A is set against
    # Tomcat's arm A, and so on; a difference from Tomcat under node's 8 % is noise, not a
    # finding, however cleanly the repeats separate.
    tests = []
    for r in range(6):
        for arm, node, tomcat in (("A", 10_000, 9_400), ("A'", 10_800, 10_150)):
            for contestant, rps in ((NODE, node), (TOMCAT, tomcat)):
                test = request_test(contestant, r, rps=rps + r, p99_ms=2)
                test.run_info["paired"] = {"arm": arm, "config": "-"}
                tests.append(test)
    db = store(tmp_path / "lab.db", tests)
    rows = compare(db, NODE, TOMCAT, metrics=["rps"])
    assert len(rows) == 2  # one per arm
    for row in rows:
        assert row.judgement.floor == pytest.approx(0.08, abs=0.001)
        assert row.verdict is stats.Verdict.NOT_MATERIAL
        assert row.words.startswith("no material difference (6.") and "under 8%" in row.words
    # The same tests, not from a paired run: no floor but 5 %, and 6.4 % is material.
    for test in tests:
        test.run_info.pop("paired", None)
    plain = compare(store(tmp_path / "plain.db", tests), NODE, TOMCAT, metrics=["rps"])
    assert [(row.judgement.floor, row.verdict) for row in plain] == [(0.05, stats.Verdict.BETTER)]


def test_memory_per_held_connection_is_shown_only_where_connections_are_held(tmp_path):
    new_connection = {**KEEPALIVE, "behaviour": "new-connection"}
    tests = []
    for params in (KEEPALIVE, new_connection):
        for contestant, kib in ((NODE, 20), (TOMCAT, 200)):
            for r in range(6):
                test = request_test(contestant, r, rps=10_000 + 100 * r, p99_ms=2, params=params)
                # What the kernel read: RSS grew by `kib` KiB a socket over the 50 sockets
                # caught open at the last reading (on a new connection per request, whichever
                # were between their request and their close).
                reading = {"kernel_bytes": 4096, "established": 50, "sockets": 60}
                test.run_info["kernel"] = {
                    "peak_rss_bytes": 100 * 2**20 + 50 * kib * 1024 + r,
                    "rss_at_open_bytes": 100 * 2**20,
                    "sockets": {"last": reading, "peak": reading},
                }
                tests.append(test)
    db = store(tmp_path / "lab.db", tests)
    memory = {
        ("new-connection" in c["scenario"], c["contestant"]): c
        for c in report_data(db)["cells"]
        if c["metric"] == "memory"
    }
    for contestant, kib in ((NODE, 20), (TOMCAT, 200)):
        held, closed = memory[(False, contestant)], memory[(True, contestant)]
        assert held["n"] == 6 and kib < held["median"] < kib + 1
        assert "not_applicable" not in held
        assert closed["median"] is None and closed["values"] == []
        assert closed["not_applicable"] == "n/a: no held connections"
    # A verdict on the held connections only: the new-connection cells have no figure.
    (row,) = compare(db, NODE, TOMCAT, metrics=["memory"])
    assert "new-connection" not in row.scenario and row.verdict is stats.Verdict.BETTER
