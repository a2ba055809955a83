"""Runtime signals: the side file a server's runtime writes (`{signals_file}`) is read after
the test and stored as time series; real servers write real GC pauses and loop delays, and a
side file of garbage flags the signal figures only."""

import sys
from pathlib import Path

import hostile_signals
import pytest
from conftest import REFERENCE_SERVER, TESTS, write_manifest
from test_tls import TLS_MANIFEST

from serverlab.contestant.manifest import find
from serverlab.results.records import RecordedTest, StoredSuite
from serverlab.results.report import build_report
from serverlab.results.report.charts.chart import flags_of
from serverlab.results.report.charts.signal_charts import signal_charts
from serverlab.results.report.flags.validity import flags_for
from serverlab.results.store import Store
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.signals import MAX_VALUE, read_signals, row_cap
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.load import load_suite

REPO_CONTESTANTS = Path(__file__).resolve().parents[1] / "contestants"
PAUSE_YOUNG = "GC(0) Pause Young (Normal) (G1 Evacuation Pause)"
JVM_LOG = f"""\
[2026-11-25T18:00:01.500+0000][0.412s][info][gc,init] Heap Region Size: 1M
[2026-11-25T18:00:02.000+0000][1.012s][info][gc,start] {PAUSE_YOUNG}
[2026-11-25T18:00:02.004+0000][1.016s][info][gc      ] {PAUSE_YOUNG} 24M->3M(256M) 4.000ms
[2026-11-25T18:00:03.000+0000][2.012s][info][gc] GC(1) Pause Full (System.gc()) 1G->512M(2G) 250.5ms
"""
STARTED = 1_795_629_600.0  # 2026-11-25T18:00:00Z


def test_json_lines_become_signals_on_the_tests_clock(tmp_path):
    path = tmp_path / "signals.jsonl"
    path.write_text(
        '{"t": 1795629601.25, "kind": "gc_pause", "value": 3.5, "gc": "scavenge", "pid": 7}\n'
        '{"t": 1795629601.5, "kind": "loop_delay", "value": 12, "p99": 11.9, "deep": {"x": 1}}\n'
    )
    read = read_signals(path, STARTED)
    assert read.problem() is None
    pause, delay = read.signals
    assert (pause.t, pause.kind, pause.value, pause.data) == (
        1.25,
        "gc_pause",
        3.5,
        {"gc": "scavenge", "pid": 7},
    )
    assert (delay.kind, delay.value, delay.data) == ("loop_delay", 12.0, {"p99": 11.9})


def test_a_jvm_gc_log_gives_each_pause_with_the_heap_before_and_after(tmp_path):
    path = tmp_path / "signals.jsonl"
    path.write_text(JVM_LOG)
    read = read_signals(path, STARTED)
    assert read.problem() is None
    young, full = read.signals
    assert young.kind == full.kind == "gc_pause"
    assert (young.t, young.value) == (2.0, 4.0)  # the log stamps the end; t is the start
    assert young.data["heap_before"] == 24 << 20 and young.data["heap_after"] == 3 << 20
    assert full.data == {
        "gc": "Pause Full (System.gc())",
        "heap_before": 1 << 30,
        "heap_after": 512 << 20,
        "heap_committed": 2 << 30,
    }


def test_garbage_lines_are_counted_and_the_readable_ones_kept(tmp_path):
    path = tmp_path / "signals.jsonl"
    path.write_bytes(
        b'not json\n{"t": 1795629601, "kind": "gc_pause", "value": 1}\n'
        b'{"t": "soon", "kind": "gc_pause", "value": 1}\n{"t": 1, "kind": "BAD KIND", "value": 1}\n'
        b'{"t": 1, "kind": "x", "value": NaN}\n[1, 2]\n\xff\xfe\n'
    )
    read = read_signals(path, STARTED)
    assert [s.t for s in read.signals] == [1.0]
    assert read.unreadable == 6
    assert read.problem().startswith("6 lines unreadable, first 'not json'")


def test_a_server_without_a_side_file_has_no_signals_and_no_flag(tmp_path):
    read = read_signals(tmp_path / "absent.jsonl", STARTED)
    assert read.signals == [] and read.problem() is None


SUITE = """name = "signals"
repeats = 1
contestants = [{contestants}]

[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 300
emit_interval_ms = 250
ramp_up_s = 1
duration_s = 4
{tunables}"""


def run_suite(tmp_path, contestants: list[str], tunables: str = "") -> list[RecordedTest]:
    path = tmp_path / "suite.toml"
    names = ", ".join(f'"{c}"' for c in contestants)
    path.write_text(SUITE.format(contestants=names, tunables=tunables))
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    return [execute(plan, env) for plan in plan_tests(load_suite(path), find)]


def stored_run(tmp_path, monkeypatch, contestant: str, tunables="") -> tuple[Path, RecordedTest]:
    """One short push test of a real contestant, committed and read back."""
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(REPO_CONTESTANTS))
    (test,) = run_suite(tmp_path, [contestant], tunables)
    assert test.status == "ok", test.validity
    assert "signals_unreadable" not in test.validity
    db = tmp_path / "lab.db"
    with Store(db) as store:
        run = store.start_run(store.add_suite(StoredSuite("s", "s.toml", "0" * 64)), {})
        test.run_id = run.id
        store.commit_test(test)
        (stored,) = store.tests()
        store.load_details(stored)
    lasted = stored.ended_at - stored.started_at
    assert all(0 <= s.t <= lasted for s in stored.signals)
    return db, stored


@pytest.mark.parametrize(
    ("contestant", "delay_kind", "heap_kind"),
    [
        ("node-http", "loop_delay", "heap_used"),  # bytes
        ("go-nethttp", "sched_latency", "heap_used"),  # bytes
        ("ruby-eventmachine", "loop_delay", "heap_live_slots"),  # objects
    ],
)
def test_a_real_push_run_stores_gc_pauses_and_loop_delays_with_sane_values(
    tmp_path, monkeypatch, contestant, delay_kind, heap_kind
):
    db, stored = stored_run(tmp_path, monkeypatch, contestant)
    kinds = {
        kind: [s for s in stored.signals if s.kind == kind]
        for kind in ("gc_pause", delay_kind, heap_kind)
    }
    assert all(kinds.values()), {k: len(v) for k, v in kinds.items()}
    assert all(0 <= s.value < 5000 for s in kinds["gc_pause"])  # ms
    assert all(0 <= s.value < 5000 for s in kinds[delay_kind])  # ms
    assert all(1000 < s.value < 4 << 30 for s in kinds[heap_kind])
    # Ten samples a second over the test's load, give or take a loaded machine.
    assert len(kinds[heap_kind]) > 5 * (stored.summary["duration_s"])
    the_report_overlays_them_on_emit_durations_and_cpu(db, stored, tmp_path)


def test_a_real_jvm_push_run_stores_its_gc_pauses_with_the_heap_before_and_after(
    tmp_path, monkeypatch
):
    # A small heap, so that a test of seconds has young collections to log.
    small = 'tunables.java-netty = { xmx = "48m" }\n'
    db, stored = stored_run(tmp_path, monkeypatch, "java-netty", small)
    pauses = [s for s in stored.signals if s.kind == "gc_pause"]
    assert pauses and {s.kind for s in stored.signals} == {"gc_pause"}
    assert all(0 < s.value < 5000 for s in pauses)  # ms
    for pause in pauses:
        heap = pause.data
        assert 0 <= heap["heap_after"] <= heap["heap_committed"] <= 48 << 20, heap
        assert heap["heap_before"] > 0 and pause.data["gc"].startswith("Pause")


def the_report_overlays_them_on_emit_durations_and_cpu(db, stored, tmp_path):
    emit_chart, cpu_chart = signal_charts("s1-", [stored])
    names = [trace["name"] for trace in emit_chart.figure["data"]]
    assert f"{stored.contestant} r1 GC pause (ms)" in names
    assert f"{stored.contestant} r1 emit cycle, longest delivery (ms)" in names
    axes = {trace.get("yaxis", "y") for trace in cpu_chart.figure["data"]}
    assert axes == {"y", "y2"}  # CPU on the left, pauses and delay on the right
    cycles = next(t for t in emit_chart.figure["data"] if "emit cycle" in t["name"])
    # On the monitor's clock: the cycles fall inside the test, after the monitor started.
    lasted = stored.ended_at - stored.started_at
    assert all(-1 < x < lasted for x in cycles["x"]), cycles["x"]
    html = build_report(db, None, tmp_path / "report.html").read_text()
    assert "Emit duration and runtime pauses over time" in html
    assert "Server CPU with GC pauses and loop delay" in html


# The reference server, started after its side file has been filled with garbage.
GARBLE = f"""#!/bin/sh
printf 'garbage\\n{{"t": "x"}}\\n' > "$1"
shift
exec {sys.executable} {REFERENCE_SERVER} "$@"
"""
GARBAGE_MANIFEST = """
name = "garbled"
language = "python"
architecture = "asyncio event loop"
implements = ["perf", "files", "upload", "control", "push", "sse", "websocket", "syslog"]
version = "true"
start = "sh {script} {{signals_file}} --port {{port}} --syslog-port {{syslog_port}} \
--docroot {{docroot}} --name {{name}} --host {{host}}"
ready = "/stats"
ready_timeout_s = 15
"""


def test_a_side_file_of_garbage_flags_the_signal_figures_only(tmp_path, monkeypatch):
    root = tmp_path / "contestants"
    script = tmp_path / "garble.sh"
    script.write_text(GARBLE)
    write_manifest(root, "garbled", GARBAGE_MANIFEST.format(script=script))
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(root))
    (test,) = run_suite(tmp_path, ["garbled"])
    assert test.status == "ok", test.validity
    assert test.signals == []
    assert "2 lines unreadable, first 'garbage'" in test.validity["signals_unreadable"]
    assert "signals-unreadable" in [f.code for f in flags_for(test, "gc_pause")]
    assert "signals-unreadable" not in [f.code for f in flags_for(test, "rps")]
    assert "signals-unreadable" not in [f.code for f in flags_for(test, "cpu")]
    assert "signals-unreadable" not in [flag.code for _, flag in flags_of([test])]
    assert signal_charts("s1-", [test]) == []  # nothing readable: no overlay, no crash


def test_a_deep_line_a_date_that_does_not_exist_and_a_huge_number_are_unreadable_lines(
    tmp_path,
):
    path = tmp_path / "signals.jsonl"
    path.write_bytes(hostile_signals.hostile_lines(STARTED + 1))
    read = read_signals(path, STARTED, lasted_s=2)
    assert [(s.t, s.value) for s in read.signals] == [(1.0, 1.0), (1.5, 2.0)]
    assert read.unreadable == 3
    assert read.problem().startswith('3 lines unreadable, first \'{"t": 1795629601')


def test_a_flood_keeps_a_capped_number_of_rows_spread_over_the_whole_file(tmp_path):
    path = tmp_path / "signals.jsonl"
    path.write_bytes(hostile_signals.flood(STARTED))
    read = read_signals(path, STARTED, lasted_s=1.0)
    assert read.lines > 200_000 and len(read.signals) <= row_cap(1.0) == 2_100
    assert len(read.signals) > 2_000
    # Every n-th line: the rows still span the writer's whole second.
    assert read.signals[0].t == 0.0 and read.signals[-1].t > 0.99
    assert all(len(s.data["note"]) == MAX_VALUE for s in read.signals)
    problem = read.problem()
    assert f"{read.lines:,} lines, over the cap of 2,100 rows for this test" in problem
    assert f"{len(read.signals)} values over {MAX_VALUE} characters, cut" in problem


def test_a_line_longer_than_the_cap_is_unreadable_and_the_next_one_read(tmp_path):
    path = tmp_path / "signals.jsonl"
    long = b'{"t": 1795629601, "kind": "gc_pause", "value": 1, "x": "' + b"y" * (1 << 20)
    path.write_bytes(long + b'"}\n{"t": 1795629602, "kind": "gc_pause", "value": 2}\n')
    read = read_signals(path, STARTED)
    assert [s.value for s in read.signals] == [2.0] and read.unreadable == 1


HOSTILE_MANIFEST = TLS_MANIFEST.replace(
    'start = "',
    f'start = "{sys.executable} {TESTS / "hostile_signals.py"} {{signals_file}} {{kind}} && exec ',
).replace('name = "reference-tls"', 'name = "hostile"')
SHORT_SUITE = """name = "hostile"
repeats = 1
contestants = ["hostile"]

[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 2
duration_s = 1
"""


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("lines", "3 lines unreadable"),
        ("flood", "lines, over the cap of"),
    ],
)
def test_a_hostile_side_file_is_a_flag_on_its_test_and_leaves_no_key_behind(
    tmp_path, monkeypatch, kind, said
):
    root = tmp_path / "contestants"
    write_manifest(root, "hostile", HOSTILE_MANIFEST.replace("{kind}", kind))
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(root))
    suite = tmp_path / "suite.toml"
    suite.write_text(SHORT_SUITE)
    (plan,) = plan_tests(load_suite(suite), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(plan, env)
    assert test.status == "ok", test.validity
    assert test.summary["answered"] > 0
    assert said in test.validity["signals_unreadable"]
    assert len(test.signals) <= row_cap(test.ended_at - test.started_at)
    assert not list(tmp_path.rglob("server.key")), "no key outlives its test"
    db = tmp_path / "lab.db"
    with Store(db) as store:
        run = store.start_run(store.add_suite(StoredSuite("s", "s.toml", "0" * 64)), {})
        test.run_id = run.id
        store.commit_test(test)
    # 64 MiB of lines became some thousands of rows: a database and a report of a few MiB.
    assert db.stat().st_size < 8 << 20
    assert "signals-unreadable" in [f.code for f in flags_for(test, "gc_pause")]
    assert build_report(db, None, tmp_path / "report.html").is_file()
