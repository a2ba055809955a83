"""The report's gRPC section (issue 36), from a real run: go-nethttp (grpc-go) and the
reference gRPC server, unary calls beside GET /perf at the same rate, held Subscribe streams,
stored in SQLite and rendered: each figure with its window and source, its flags with it,
and a verdict only where the repeats support one (one repeat: each headline pair says why
not)."""

import json
import re

import pytest
from conftest import write_manifest
from test_grpc import GRPC_MANIFEST

from serverlab.base.paths import REPO_ROOT
from serverlab.contestant.manifest import find
from serverlab.results.records import EngineInterval, RecordedTest, StoredSuite
from serverlab.results.report import build_report
from serverlab.results.report.builder import report_data
from serverlab.results.store import Store
from serverlab.run.execution.executor import Environment
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.runner import Session, run_suite
from serverlab.run.plan.suite.load import load_suite

SUITE = """name = "grpc-report"
repeats = 1
contestants = ["go-nethttp", "reference-grpc"]

[[scenario]]
name = "unary"
behaviour = "grpc-unary"
pacer = "open"
rate = 200
clients = 2
streams = 2
duration_s = 2
transport = "h2c"

[[scenario]]
name = "perf"
behaviour = "keepalive"
pacer = "open"
rate = 200
clients = 2
duration_s = 2
contestants = ["go-nethttp"]

[[scenario]]
name = "stream"
behaviour = "grpc-stream"
pacer = "users"
clients = 20
ramp_up_s = 0.5
duration_s = 3
emit_interval_ms = 500
transport = "h2c"
"""


@pytest.fixture(scope="module")
def grpc_run(tmp_path_factory):
    """One run for the module's tests: go-nethttp as built (linked into the folder beside
    the reference gRPC server's manifest)."""
    tmp_path = tmp_path_factory.mktemp("grpc-report")
    contestants = tmp_path / "contestants"
    write_manifest(contestants, "reference-grpc", GRPC_MANIFEST)
    (contestants / "go-nethttp").symlink_to(REPO_ROOT / "contestants" / "go-nethttp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SERVERLAB_CONTESTANTS", str(contestants))
        yield _run(tmp_path)


def _run(tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    suite = load_suite(path)
    db = tmp_path / "lab.db"
    with Store(db) as store:
        env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
        outcome = run_suite(Session(suite, plan_tests(suite, find), store, env))
        tests = store.tests([outcome.run_id])
    html = build_report(db, "all", tmp_path / "r.html").read_text()
    return tests, html, report_data(db, "all")["grpc"]


def _section(html: str) -> str:
    start = html.index('<section id="grpc">')
    return html[start : html.index("</section>", start)]


def test_the_grpc_section_sets_each_contestants_calls_beside_get_perf_with_window_and_source(
    grpc_run,
):
    tests, html, data = grpc_run
    assert sorted(t.status for t in tests) == ["ok"] * 5, [(t.key, t.validity) for t in tests]
    section = _section(html)
    assert "Which architecture serves gRPC best" in section
    unary = {(r["protocol"], r["contestant"]): r for r in data["unary"]}
    assert set(unary) == {
        ("gRPC Perf over h2c", "go-nethttp"),
        ("gRPC Perf over h2c", "reference-grpc"),
        ("GET /perf over HTTP/1.1", "go-nethttp"),
    }
    for row in unary.values():
        assert row["load"] == "200/s offered" and row["tests"] == 1
        # Real figures: calls answered near the offered rate, CPU per call above zero.
        assert 150 <= float(row["rps"]["median"].replace(",", "")) <= 210, row
        assert float(row["cpu_req"]["median"].replace(",", "")) > 0, row
        assert float(row["p50"]["median"]) <= float(row["p99"]["median"]), row
    (knee_note,) = re.findall(r"No gRPC unary capacity search ran[^<]*", section)
    assert "fixed rates" in knee_note
    # Each figure says its window and source where it is shown.
    figures = data["figures"]
    for name in ("cpu_req", "memory", "delay_p99"):
        assert figures[name]["window"] and figures[name]["source"]
        assert f"{figures[name]['window']}; {figures[name]['source']}" in section.replace(
            "&#39;", "'"
        )
    streams = {r["contestant"]: r for r in data["streams"]}
    assert set(streams) == {"go-nethttp", "reference-grpc"}
    for row in streams.values():
        assert row["load"] == "20 subscribers" and row["protocol"] == "gRPC Subscribe over h2c"
        assert float(row["memory"]["median"].replace(",", "")) > 0, row
        assert float(row["delay_p50"]["median"]) <= float(row["delay_p99"]["median"]), row


def test_one_repeat_gives_no_grpc_verdict_and_each_headline_pair_says_why_not_by_the_verdict_rules(
    grpc_run,
):
    _, html, data = grpc_run
    families = {family["load"]: family for family in data["verdicts"]}
    assert set(families) == {
        "200/s offered, gRPC Perf over h2c",
        "20 subscribers, gRPC Subscribe over h2c",
    }
    for family in families.values():
        assert family["supported"] == []
        assert len(family["not_supported"]) == 2, family  # two headline figures, one pair
        # Why not, by the verdict rules: one repeat a side, or (on a busy machine) flagged.
        reasons = ("too few repeats", "flagged")
        assert all(any(r in line for r in reasons) for line in family["not_supported"]), family
        assert all("no architecture is supported as best" in line for line in family["best"])
    section = _section(html)
    assert section.count("Not supported:") == 4
    assert json.dumps(data)  # report --json carries the section as data


def unary_test(contestant: str, repeat: int, cpu_s: float, p99_us: int) -> RecordedTest:
    """A stored gRPC unary test at 1,000/s for 2 s: its answers, latency and the kernel's
    CPU ticks of the server over its window (the figures the section reads)."""
    return RecordedTest(
        run_id=None,
        permutation_key=f"unary|{contestant}|",
        contestant=contestant,
        repeat_index=repeat,
        status="ok",
        started_at=1_763_780_000.0 + repeat,
        ended_at=1_763_780_002.0 + repeat,
        scenario="unary",
        params={"behaviour": "grpc-unary", "pacer": "open", "rate": 1000, "transport": "h2c"},
        tunables={},
        validity={},
        summary={
            "requests": 2000,
            "answered": 2000,
            "ok": 2000,
            "errors": {},
            "rps": 1000.0,
            "duration_s": 2.0,
            "latency_us": {"p50": p99_us // 4, "p99": p99_us},
            "valid": True,
        },
        run_info={"kernel": {"server_cpu_ticks": round(cpu_s * 100), "ticks_per_s": 100}},
        intervals=[
            EngineInterval(i, 0.5 * (i + 1), {"rps": 1000.0, "interval_s": 0.5}) for i in range(4)
        ],
    )


def test_a_contestant_serves_grpc_best_only_where_supported_better_than_every_other(tmp_path):
    # Six repeats each: go-nethttp's CPU per call is half java-netty's and a third of
    # node-http's every time; p99 is the same 2 ms (give or take) on all three.
    tests = [
        unary_test(name, r, cpu * (1 + r / 100), 2000 + 10 * r)
        for name, cpu in (("go-nethttp", 0.2), ("java-netty", 0.4), ("node-http", 0.6))
        for r in range(6)
    ]
    with Store(tmp_path / "lab.db") as store:
        suite = store.add_suite(StoredSuite("grpc", "suites/grpc.toml", "ab" * 32, 1.0))
        run = store.start_run(suite, {"cpu_count": 2})
        for test in tests:
            test.run_id = run.id
            store.commit_test(test)
        store.finish_run(run.id, "finished")
    data = report_data(tmp_path / "lab.db", "all")["grpc"]
    (family,) = data["verdicts"]
    cpu, p99 = family["best"]
    assert cpu.startswith("server CPU per request: go-nethttp serves best"), cpu
    assert p99.startswith("latency p99: no architecture is supported as best"), p99
    assert any(line.startswith("go-nethttp has 0.50× java-netty's") for line in family["supported"])
    assert any("latency p99" in line for line in family["not_supported"]), family
