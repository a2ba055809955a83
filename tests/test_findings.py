"""Issue 32's findings and readable flags: what a contestant's own push tests showed of its
architecture, stated with its figures at a glance, in the summary and in report --json; a
late call that is the server's own fan-out no longer voiding CPU and memory; flags grouped by
kind with their repeats, on every table; completeness over a stated denominator. A real run
of the reference server as a thread-pool server, and tests stored in a real SQLite file."""

import random
import re

from conftest import REFERENCE_MANIFEST, write_manifest
from hdrh.histogram import HdrHistogram
from rich.console import Console
from test_report import engine_interval, recorded
from test_runner import run_in_process

from serverlab.results.records import (
    EmitCycle,
    EngineInterval,
    RecordedTest,
    ServerStats,
    StoredSuite,
)
from serverlab.results.report import build_report, print_summary
from serverlab.results.report.builder import report_data
from serverlab.results.report.figures import push
from serverlab.results.report.flags.groups import repeat_ranges
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.store import Store

# --- a real run ---------------------------------------------------------------------------

POOL = 40
STARVED = """
[[scenario]]
name = "starved"
behaviour = "comet"
pacer = "users"
clients = 60
ramp_up_s = 0.5
duration_s = 4.5
emit_interval_ms = 500
[scenario.tunables.pooled]
fault = "few_threads"
"""


def pooled_manifest(contestants_dir) -> None:
    """The reference server as a thread-pool server: its few_threads pool sized by a
    `threads` tunable, as Tomcat's maxThreads is."""
    text = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "pooled"')
    text = text.replace("--die-after {die_after}", "--die-after {die_after} --threads {threads}")
    text += f'\n[tunables.threads]\ndefault = "{POOL}"\ntype = "int"\nmin = 1\nhelp = "pool"\n'
    write_manifest(contestants_dir, "pooled", text)


def test_a_server_out_of_request_threads_is_a_finding_with_its_figures(contestants_dir, tmp_path):
    # 60 comet streams against 40 request threads: each stream holds its thread until the
    # engine leaves, so the plan's clear waits for the end of the load.
    pooled_manifest(contestants_dir)
    suite = tmp_path / "suite.toml"
    suite.write_text(f'name = "t"\nrepeats = 1\ncontestants = ["pooled"]\n{STARVED}')
    db = tmp_path / "lab.db"
    _, (test,), _ = run_in_process(suite, db)
    assert test.status == "ok", test.validity
    assert test.run_info["request_threads_held"] == POOL
    (clear,) = [c for c in test.run_info["control_calls"] if c["phase"] == "during"]
    registered = push.registered(test)
    assert registered is not None and registered <= POOL
    assert clear["late_ms"] > push.fan_out_ms(test), "the clear waited for a thread"
    (finding,) = report_data(db)["findings"]
    threads = f"pooled (fault=few_threads): all {POOL} request threads held by 60 comet streams"
    waited = r"POST /event/clear waited (\d+ ms|\d\.\d s) \(r1\)"
    subscribers = f"{registered} of 60 subscribers registered by the end of the ramp"
    sentence = finding["sentence"]
    pattern = f"{re.escape(threads)}; {waited}; {re.escape(subscribers)}"
    assert re.fullmatch(pattern, sentence), sentence
    assert finding["request_threads_held"] == POOL
    assert finding["subscribers_registered"] == [registered]
    assert [a["late_ms"] for a in finding["late_calls"][0]["answers"]] == [clear["late_ms"]]
    console = Console(record=True, width=400)
    print_summary(db, None, console=console)
    glance = console.export_text().split("At a glance")[1]
    assert "  starved: No difference" in glance and f"    finding, {sentence}" in glance


# --- stored tests -------------------------------------------------------------------------

T0 = 1_700_000_000_000  # the engine's start, Unix ms
LONGPOLL = {
    "behaviour": "longpoll",
    "clients": 1000,
    "ramp_up_s": 1.0,
    "duration_s": 4.0,
    "emit_interval_ms": 1000,
    "longpoll_duration_ms": 30000,
}


def delays(ms: float, count: int) -> str:
    histogram = HdrHistogram(1, 60_000_000, 3)
    histogram.record_value(int(ms * 1000), count)
    return histogram.encode().decode()


def held(
    contestant: str,
    repeat: int,
    registered: int = 1000,
    late_ms: float = 20.0,
    fan_out_ms: float = 370.0,
    after_stop: int = 0,
    silent: bool = False,
) -> RecordedTest:
    """A long-poll test of 1,000 clients, window T0+1 s to T0+4 s: a ramp cycle, three in the
    window (the first reaching `registered` subscribers, each fanned out over `fan_out_ms`),
    the clear `late_ms` after its due time, `after_stop` cycles the server created after the
    stop (seen by no client, counted in its /stats), /stats unanswered after the load when
    `silent`; a thread-pool server (java-*) with its 1,000 request threads held."""
    test = recorded(1, "longpoll-1s", LONGPOLL, contestant, repeat, random.Random(repeat))
    test.tunables = {}
    test.intervals = [EngineInterval(0, 1.0, {"open_connections": 998, "rps": 0.0})]
    rows = [(1, 500, 400)] + [(seq, seq * 1000 - 1000, registered) for seq in (2, 3, 4)]
    rows[2:] = [(seq, at, 1000) for seq, at, _ in rows[2:]]
    test.cycles = [
        EmitCycle(event="e1", seq=seq, created_ms=T0 + at, received=n, total=n,
                  delay_histogram=delays(fan_out_ms / 2, n), first_arrival_ms=T0 + at + 1,
                  last_arrival_ms=T0 + at + fan_out_ms, drain_samples=0)
        for seq, at, n in rows
    ]  # fmt: skip
    test.run_info["emit_window"] = {"start_ms": T0 + 1000.0, "stop_ms": T0 + 4000.0}
    test.run_info["control_calls"] = [
        {"method": "POST", "path": "/event/clear", "phase": "during", "due_ms": T0 + 4000.0,
         "status": 200, "late_ms": late_ms},
    ]  # fmt: skip
    start = ServerStats(0.5, {"events": {}, "responses": {"push": 0}}, "start")
    end = {"events": {"e1": {"last_seq": 4 + after_stop}}, "responses": {"push": 3400}}
    test.server_stats = [start] + ([] if silent else [ServerStats(9.0, end, "end")])
    if silent:
        test.validity["stats_unreadable"] = "GET /stats unanswered for 15 s after the load"
        test.run_info["stats_unanswered_s"] = 15.0
    if contestant.startswith("java"):
        test.run_info["request_threads_held"] = 1000
    return test


def stored(tmp_path, tests: list[RecordedTest]):
    db = tmp_path / "lab.db"
    with Store(db) as store:
        run = store.start_run(store.add_suite(StoredSuite("quick", "q.toml", "5" * 64)), {})
        for test in tests:
            test.run_id = run.id
            store.commit_test(test)
        store.finish_run(run.id, "finished")
    return db


TOMCAT = "java-tomcat-blocking"


def test_threads_held_a_silent_stats_a_waiting_clear_and_few_subscribers_are_one_finding(
    tmp_path,
):
    tomcat = [
        held(TOMCAT, r, registered=n, late_ms=late, after_stop=1, silent=True)
        for r, n, late in ((0, 552, 2100.0), (1, 605, 2000.0), (2, 580, 2300.0))
    ]
    node = [held("node-http", r) for r in range(3)]
    db = stored(tmp_path, tomcat + node)
    sentence = (
        "java-tomcat-blocking: all 1,000 request threads held by 1,000 long polls; GET /stats "
        "unanswered for 15 s after the load (r1–r3); POST /event/clear waited 2.0–2.3 s "
        "(r1–r3); 552–605 of 1,000 subscribers registered by the end of the ramp (median 580 "
        "over 3 repeats)"
    )
    (finding,) = report_data(db)["findings"]
    assert finding["sentence"] == sentence
    assert finding["subscribers_registered"] == [552, 605, 580]
    assert finding["stats_unanswered"] == ["r1", "r2", "r3"]
    assert [a["late_ms"] for a in finding["late_calls"][0]["answers"]] == [2100, 2000, 2300]
    console = Console(record=True, width=400)
    print_summary(db, None, console=console)
    text = console.export_text()
    assert f"    finding, {sentence}." in text.split("At a glance")[1]
    assert "finding, node-http" not in text
    html = build_report(db, None, tmp_path / "report.html").read_text()
    glance = html[html.index('<section class="glance"') : html.index("</section>")]
    assert f'<li class="finding" data-contestant="{TOMCAT}">Finding, {sentence}.</li>' in glance
    summary = html[html.index('<table class="summary">') :]
    assert '<div class="finding">Finding: all 1,000 request threads held' in summary


def test_a_clear_late_by_the_servers_own_fan_out_is_a_finding_and_voids_no_cpu_or_memory(
    tmp_path,
):
    # r1: 218 ms late, no later than its 370 ms fan-out, and no cycle after the stop.
    # r2: as late, but the server created a cycle after the stop: that one is control-late.
    fan_out = held(TOMCAT, 0, late_ms=218.0)
    beyond = held(TOMCAT, 1, late_ms=218.0, after_stop=1)
    assert push.late_within_fan_out(fan_out) and not push.late_within_fan_out(beyond)
    assert "control-late" not in {f.code for f in validity_flags(fan_out)}
    (late,) = [f for f in validity_flags(beyond) if f.code == "control-late"]
    assert late.touches("cpu") and late.touches("rss")
    db = stored(tmp_path, [fan_out, beyond])
    data = report_data(db)
    flags = {c["metric"]: c["flags"] for c in data["cells"]}
    for metric in ("cpu", "rss"):
        assert [(f["code"], f["repeats"]) for f in flags[metric]] == [("control-late", ["r2"])]
    (finding,) = data["findings"]
    assert (
        "POST /event/clear answered 218 ms late, behind its own fan-out (up to 370 ms; r1)"
        in (finding["sentence"])
    )
    assert "POST /event/clear waited 218 ms (r2)" in finding["sentence"]
    # Alone, the fan-out's test is flagged on no figure at all.
    db = stored(tmp_path / "alone", [held(TOMCAT, 0, late_ms=218.0)])
    assert not [c for c in report_data(db)["cells"] if c["flags"]]


def busy(test: RecordedTest, percent: float) -> RecordedTest:
    test.validity["machine_busy"] = f"{percent:.0f} % of a core"
    test.run_info["kernel"] = {"other_cpu_percent": percent, "server_cpu_percent": 80.0}
    return test


def rising(repeat: int, change: float) -> RecordedTest:
    """A keep-alive test whose rate rises by `change` from the first half to the second."""
    params = {"behaviour": "keepalive", "clients": 50}
    test = recorded(1, "keepalive", params, "node-http", repeat, random.Random(repeat))
    rates = [8000.0, 8000.0, 8000.0 * (1 + change), 8000.0 * (1 + change)]
    test.intervals = [engine_interval(i, rate, params) for i, rate in enumerate(rates)]
    test.summary["errors"] = {"timeout": 0, "connect": 0}
    return test


def test_a_flag_is_grouped_by_kind_with_its_repeats_and_the_range_of_its_sizes(tmp_path):
    tests = [rising(r, c) for r, c in enumerate((0.17, 0.25, 0.33, 0.40, 0.55, 0.72))]
    busy(tests[1], 20.4), busy(tests[2], 58.0)
    db = stored(tmp_path, tests)
    grouped = ["machine busy: r2, r3, 20 % to 58 % of a core used by others"]
    grouped += ["not steady: r1–r6, +17 % to +72 %"]
    data = report_data(db)
    assert [f["text"] for f in data["flags"]] == grouped
    assert data["flags"][1]["sizes"] == [17.0, 25.0, 33.0, 40.0, 55.0, 72.0]
    console = Console(record=True, width=400)
    print_summary(db, None, console=console)
    text = console.export_text()
    for line in grouped:
        assert f"  keepalive, node-http: {line}\n" in text
    html = build_report(db, None, tmp_path / "report.html").read_text()
    summary = html[html.index('<table class="summary">') : html.index("</table>")]
    assert all(f"<div>{line}</div>" in summary for line in grouped)
    # One line per kind in the flags column (each repeat's own text is in the cells' hover).
    column = re.sub(r' title="[^"]*"', "", summary)
    assert "request rate +17.0%" not in column and column.count("not steady") == 1
    assert repeat_ranges([0, 1, 2, 4, 5]) == "r1–r3, r5, r6" and repeat_ranges([3]) == "r4"


def test_the_transports_table_carries_its_flags_on_the_figures_they_touch(tmp_path):
    tests = [busy(held("node-http", 0), 40.0), held("node-http", 1, silent=True)]
    html = build_report(stored(tmp_path, tests), None, tmp_path / "report.html").read_text()
    table = html[html.index('<table class="transports">') :]
    table = table[: table.index("</table>")]
    assert "<th>flags</th>" in table
    (row,) = re.findall(r"<tr><td>longpoll</td>(.*?)</tr>", table, re.S)
    assert "<div>machine busy: r1, 40 % of a core used by others</div>" in row
    assert "<div>stats unreadable: GET /stats unanswered for 15 s after the load (r2)</div>" in row
    marks = re.findall(r'<td class="num" data-flags="([^"]*)">', row)
    # One per figure: machine-busy on them all, the silent /stats on the one that reads it.
    assert len(marks) == 13 and all("machine-busy" in m for m in marks)
    assert [m for m in marks if "stats-unreadable" in m] == ["machine-busy stats-unreadable"]


def test_completeness_is_over_the_plans_clients_and_never_above_100_percent(tmp_path):
    # The engine saw 998 connections open at the ramp's end; every cycle reached 1,000.
    test = held("node-http", 0)
    assert push.admitted(test) == 998
    assert [share for _, share in push.completeness(test)] == [1.0, 1.0, 1.0]
    # A duplicate delivery is one more received, not more of the plan's clients reached.
    test.cycles[1].received = 1003
    test.cycles[2].received = 990
    assert push.worst_completeness_percent(test) == 99.0
    assert max(share for _, share in push.completeness(test)) == 1.0
    html = build_report(stored(tmp_path, [test]), None, tmp_path / "r.html").read_text()
    assert "<th>worst in-window cycle: received ÷ the plan&#39;s clients (%)</th>" in html


def test_connects_still_pending_at_the_end_are_timeouts_in_the_errors_column(tmp_path):
    # The engine counts a connect still pending when the run ends as a timeout.
    params = {"behaviour": "new-connection", "clients": 50, "duration_s": 2.0}
    test = recorded(1, "new-connections", params, "node-http", 0, random.Random(3))
    test.summary["errors"] = {"timeout": 41, "connect": 0}
    db = stored(tmp_path, [test])
    data = report_data(db)
    (errors,) = [c for c in data["cells"] if c["metric"] == "errors"]
    assert errors["values"] == [41.0]
    assert [f["text"] for f in data["flags"]] == ["errors: r1, 41 errors (timeout)"]
    html = build_report(db, None, tmp_path / "report.html").read_text()
    assert re.search(r'data-metric="errors" data-n="1" data-flags="[^"]*"><b>41</b>', html)
