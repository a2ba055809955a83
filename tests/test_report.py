import json
import os
import random
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from rich.console import Console

from serverlab.base.paths import REPO_ROOT
from serverlab.results.records import (
    Crash,
    EmitRecord,
    EngineInterval,
    MonitorSample,
    RecordedTest,
    ServerStats,
    StoredSuite,
)
from serverlab.results.report import SelectionError, build_report, parse_selection, print_summary
from serverlab.results.report.builder import report_data
from serverlab.results.report.cells.formatting import _number, compact_number
from serverlab.results.report.cells.scenarios import scenario_key, scenario_labels
from serverlab.results.report.charts.chart import thinned
from serverlab.results.report.figures.figure import PUSH, REQUESTS
from serverlab.results.report.figures.histogram import (
    HistogramError,
    decode,
    percentile_curve,
    values_at_quantiles,
)
from serverlab.results.report.figures.table import METRICS, socket_memory_mib
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.summary import TERMINAL_METRICS
from serverlab.results.store import Store

EVIL_NAME = '<script>alert("owned")</script>'
# Serialized by the Rust hdrhistogram crate 7.6.0 (the engine's) with V2DeflateSerializer:
# values 100, 200, ..., 100000 once each and 2,000,000 ten times; bounds 1..60e6, 3 digits.
RUST_HISTOGRAM = (
    "HISTFAAAAGx4nO2JsQmAMBBFLz+IBEsNNq4gjmBn7wTiLoKFlWQmcR1HEBJBBAtRQSF3/x//3v2sMzFRWJMbuaWwY"
    "HoqF/eYBaa7HgXaS2pQvKwcGunPV0NZRZyPUkEeFDAzf8gSoN3nJxdeFkOVrO+TPQ0="
)
SECONDS = 10


def encoded_latencies(rng: random.Random, median_us: float, count: int = 2000) -> str:
    histogram = HdrHistogram(1, 60_000_000, 3)
    for _ in range(count):
        histogram.record_value(max(1, int(rng.lognormvariate(0, 0.6) * median_us)))
    return histogram.encode().decode()


def engine_summary(rps: float, median_us: float, errors: int, intended: float | None) -> dict:
    return {
        "type": "summary",
        "requests": int(rps * SECONDS),
        "errors": {"connect": 0, "timeout": errors},
        "duration_s": SECONDS,
        "rps": rps,
        "intended_rate": intended,
        "achieved_rate": rps,
        "latency_us": {
            "p50": median_us,
            "p90": median_us * 2,
            "p99": median_us * 4,
            "p999": median_us * 9,
            "max": median_us * 20,
            "mean": median_us * 1.3,
        },
        "client_cpu_s": 3.2,
    }


def engine_interval(index: int, rps: float, params: dict) -> EngineInterval:
    """An interval line in the engine's format (engine/src/report.rs, IntervalLine)."""
    clients = params.get("clients", 50)
    line = {
        "type": "interval",
        "elapsed_s": index + 1.0,
        "interval_s": 1.0,
        "completed": int(rps),
        "completed_total": int(rps * (index + 1)),
        "ok": int(rps),
        "rps": rps,
        "open_connections": clients,
        "events": clients if params.get("emit_interval_ms") else 0,
    }
    return EngineInterval(index, index + 1.0, line)


def server_stats(rps: float, params: dict, speed: float) -> dict:
    """A GET /stats answer at the end of a test (spec §5)."""
    stats = {"responses": {"total": int(rps * SECONDS)}, "events": {}}
    if params.get("emit_interval_ms"):
        emits = SECONDS
        stats["events"]["e1"] = {
            "interval_ms": params["emit_interval_ms"],
            "emits": emits,
            "max_emit_duration_ms": 40 / speed,
            "total_emit_duration_ms": emits * 20 / speed,
        }
    return stats


def recorded(run_id, scenario, params, contestant, repeat, rng, **overrides) -> RecordedTest:
    """A test as the runner would store it, with figures that differ by contestant."""
    speed = 2.0 if contestant == "node-http" else 1.0
    rps = 9000 * speed * rng.uniform(0.95, 1.05)
    median_us = 400 / speed * rng.uniform(0.9, 1.1)
    engine_cpu = overrides.pop("engine_cpu", 45.0)
    test = RecordedTest(
        run_id=run_id,
        permutation_key=f"{scenario}|{contestant}|{sorted(params.items())}|",
        scenario=scenario,
        contestant=contestant,
        repeat_index=repeat,
        status="ok",
        started_at=1_763_780_000.0 + 20 * repeat,
        ended_at=1_763_780_000.0 + 20 * repeat + SECONDS + 2,
        params=params,
        tunables={"threads": "200"} if contestant.startswith("java") else {},
        summary=engine_summary(rps, median_us, repeat % 2, intended=None),
        intervals=[engine_interval(i, rps, params) for i in range(SECONDS)],
        samples=[
            MonitorSample(
                t=i / 10,
                cpu_percent=80 / speed + rng.uniform(-5, 5),
                rss_bytes=int((60 + i / 5) * 2**20 * (3 - speed)),
                threads=1 if speed == 2 else 210,
                fds=60,
                ctx_switches=100,
                processes=1,
                system_cpu_percent=60.0,
                system_mem_used_bytes=4 * 2**30,
                engine_cpu_percent=engine_cpu,
            )
            for i in range(SECONDS * 10)
        ],
        histograms={"latency_us": encoded_latencies(rng, median_us)},
        server_stats=[ServerStats(SECONDS + 0.5, server_stats(rps, params, speed))],
    )
    if params.get("emit_interval_ms"):
        test.emits = [
            EmitRecord("e1", seq, place, 200, place * 0.05 / speed, 1000 * seq, 1000 * seq + place)
            for seq in range(1, SECONDS)
            for place in range(1, 201)
        ]
        received = (SECONDS - 1) * params.get("clients", 200)
        test.summary["events"] = {"received": received, "lost": 0, "duplicated": 0}
        test.summary["event_delay_us"] = {"p50": 2000 / speed, "p99": 9000 / speed}
        # The server counts a few deliveries more than arrived when it keeps dead subscribers.
        extra = 0 if speed == 2 else 30
        start = {"responses": {"push": 0}}
        end = {**test.server_stats[0].stats, "responses": {"push": received + extra}}
        test.server_stats = [ServerStats(0.5, start, "start"), ServerStats(SECONDS + 0.5, end)]
    for name, value in overrides.items():
        setattr(test, name, value)
    return test


def fill_realistic_db(db_path: Path, odd_contestant: str = "go-nethttp", repeats: int = 4) -> Path:
    """A quick-suite database: two scenarios x three contestants x four repeats (or
    `repeats`), with a crash, a test without monitor samples, a generator-bound test and a
    missing histogram."""
    rng = random.Random(4)
    scenarios = {
        "keepalive": {"behaviour": "keepalive", "pacer": "closed", "clients": 50},
        "longpoll": {"behaviour": "longpoll", "clients": 200, "emit_interval_ms": 1000},
    }
    with Store(db_path) as store:
        suite = store.add_suite(
            StoredSuite("quick", "suites/quick.toml", "c0ffee" * 10 + "beef", 0.2)
        )
        labels = {"node-http": "single event loop"}
        machine = {"kernel": "6.1.0-28-amd64", "cpu_count": 2, "contestant_architectures": labels}
        run = store.start_run(suite, machine)
        for repeat in range(repeats):
            for scenario, params in scenarios.items():
                for contestant in ("node-http", "java-tomcat-blocking", odd_contestant):
                    store.commit_test(recorded(run.id, scenario, params, contestant, repeat, rng))
        java = "java-tomcat-blocking"
        crashed = recorded(run.id, "longpoll", scenarios["longpoll"], java, repeats, rng)
        crashed.status, crashed.summary, crashed.intervals = "crashed", None, []
        crashed.crash = Crash(time=3.5, exit_code=None, signal=9, oom=True)
        crashed.samples = crashed.samples[:35]
        store.commit_test(crashed)
        store.commit_test(
            recorded(
                run.id, "keepalive", scenarios["keepalive"], "node-http", repeats, rng, samples=[]
            )
        )
        store.commit_test(
            recorded(
                run.id,
                "keepalive",
                scenarios["keepalive"],
                "java-tomcat-blocking",
                repeats,
                rng,
                engine_cpu=97.0,
                histograms={},
            )
        )
        store.finish_run(run.id, "finished")
    return db_path


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    db = fill_realistic_db(folder / "lab.db", odd_contestant=EVIL_NAME)
    out = build_report(db, None, folder / "out" / "report.html")
    return out.read_text(encoding="utf-8")


def figure_data(html: str) -> str:
    pattern = r'<script type="application/json" id="figure-data">(.*?)</script>'
    match = re.search(pattern, html, re.S)
    assert match, "the figure data block is missing"
    return match.group(1)


def test_report_is_one_self_contained_file(report_html):
    assert "<script src" not in report_html
    assert "<link" not in report_html
    assert "Plotly" in report_html and len(report_html) > 3_000_000


def test_report_has_every_chart_kind_per_scenario(report_html):
    for chart in ("lat", "pct", "cpu", "rss", "conn", "resp", "emit", "cycle"):
        assert f'data-chart="s2-{chart}"' in report_html
        assert f'id="s2-{chart}"' in report_html
    # The long-poll scenario has no requests/s: a push test's events/s are its plan's.
    assert 'data-chart="s2-rps"' not in report_html
    assert 'id="s1-rps"' in report_html
    # The keep-alive scenario has no emitter: the emit charts say so instead of drawing.
    assert 'id="s1-emit"' not in report_html
    assert "No chart: no emit records" in report_html


def test_contestant_strings_are_escaped(report_html):
    assert EVIL_NAME not in report_html
    assert "&lt;script&gt;alert(" in report_html
    assert "<script>alert" not in figure_data(report_html)
    assert "</script" not in figure_data(report_html)


def summary_tables(html: str) -> list[str]:
    """The HTML summary's tables: the request scenarios', then the push scenarios'."""
    return re.findall(r'<table class="summary">(.*?)</table>', html, re.S)


def test_summary_table_has_medians_intervals_and_flags(report_html):
    tables = summary_tables(report_html)
    # Keep-alive's three contestants, then long poll's: each kind with its own figures.
    assert [table.count("<tr>") for table in tables] == [1 + 3, 1 + 3]
    assert "latency p99" in tables[0] and "delivery delay" not in tables[0]
    assert "delivery delay p99" in tables[1] and "latency p99" not in tables[1]
    summary = "".join(tables)
    median_cell = (
        r'<b>[\d,]+</b><br><span class="meta"><span class="keep">\[[\d,]+, [\d,]+\]</span>'
        r' <span class="keep">n=\d'
    )
    assert re.search(median_cell, summary)
    # The intervals' real coverage is said once, above the table, not in every cell.
    # (A flag's text, in its cell's hover title and in the flags column, may hold a %.)
    bodies = "".join(table.split("</thead>")[1] for table in tables)
    figures = re.sub(r'<td>.*?</td>| title="[^"]*"', "", bodies)
    assert "%" not in figures
    intro = report_html[: report_html.index('<table class="summary">')]
    assert "n=4: 87.5%" in intro and "n=5: 93.8%" in intro
    assert "crashed (at 3.5 s, signal 9, out of memory) (r5)" in summary
    # A kind with a size says it over its repeats (serverlab.results.report.flags.groups).
    assert "generator bound: r5, 97 % engine CPU" in summary
    assert "errors: r2, r4, 1 error (timeout)" in summary
    assert "1 crashed, 4 ok" in summary
    # The architecture label is the one the run recorded.
    assert "<em>single event loop</em>" in summary


def test_labels_runs_did_not_record_come_from_the_fallback_given(tmp_path):
    with Store(tmp_path / "lab.db") as store:
        run = store.start_run(store.add_suite(StoredSuite("q", "q.toml", "2" * 64)), {})
        rng = random.Random(3)
        store.commit_test(
            recorded(run.id, "fast", {"behaviour": "keepalive"}, "go-nethttp", 0, rng)
        )
    html = build_report(
        tmp_path / "lab.db", None, tmp_path / "r.html", {"go-nethttp": "goroutines"}
    )
    assert "<em>goroutines</em>" in html.read_text()


def test_the_crash_and_the_missing_samples_are_flagged_on_the_figures(report_html):
    longpoll = report_html[report_html.index('<section id="s2">') :]
    cpu_card = longpoll[longpoll.index('data-chart="s2-cpu"') :]
    cpu_card = cpu_card[: cpu_card.index("</div>\n")]
    assert "java-tomcat-blocking r5: crashed" in cpu_card


def test_a_partial_database_still_reports(tmp_path):
    with Store(tmp_path / "lab.db") as store:
        run = store.start_run(store.add_suite(StoredSuite("q", "q.toml", "0" * 64)), {})
        store.commit_test(
            RecordedTest(
                run_id=run.id,
                permutation_key="p",
                scenario="comet",
                contestant="node-http",
                repeat_index=0,
                status="crashed",
                started_at=0.0,
                ended_at=1.0,
                crash=Crash(time=0.5, exit_code=1),
            )
        )
    html = build_report(tmp_path / "lab.db", "latest", tmp_path / "r.html").read_text()
    assert "crashed (at 0.5 s, exit code 1)" in html
    assert figure_data(html) == "{}"
    assert html.count("No chart:") == 9


def test_selection_narrows_to_contestants_and_runs(tmp_path):
    db = fill_realistic_db(tmp_path / "lab.db")
    html = build_report(db, ["run:1", "node-http"], tmp_path / "r.html").read_text()
    assert "java-tomcat-blocking r1" not in html
    assert "node-http r1" in html
    with pytest.raises(SelectionError, match="no run 7"):
        build_report(db, "run:7", tmp_path / "r.html")
    with pytest.raises(SelectionError, match="no tests match"):
        build_report(db, "contestant:nobody", tmp_path / "r.html")
    with pytest.raises(SelectionError, match="unknown selection term"):
        parse_selection("runs:1")


def test_a_database_without_runs_is_a_clear_error(tmp_path):
    Store(tmp_path / "lab.db").close()
    with pytest.raises(SelectionError, match="holds no runs yet"):
        build_report(tmp_path / "lab.db", None, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_histogram_written_by_the_rust_crate_decodes_to_its_percentiles():
    histogram = decode(RUST_HISTOGRAM)
    assert histogram.get_total_count() == 1010
    # The values the Rust crate itself reported for these quantiles.
    quantiles = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0]
    expected = [100, 50527, 90943, 100031, 2000895, 2000895]
    assert values_at_quantiles(histogram, quantiles) == expected
    curve = percentile_curve(RUST_HISTOGRAM, scale=1 / 1000)
    assert curve.values[curve.quantiles.index(0.5)] == pytest.approx(50.527)


def test_a_broken_histogram_is_a_histogram_error():
    with pytest.raises(HistogramError):
        decode("HISTFAAAAGx4nO2J-not-base64")


def test_runner_validity_flags_and_rate_shortfall_are_reported():
    rng = random.Random(1)
    test = recorded(1, "open", {"pacer": "open"}, "node-http", 0, rng)
    test.summary["intended_rate"] = 20000.0
    test.validity = {
        "fd_exhaustion": "EMFILE at 12,000 connections",
        "engine_cpu_median_percent": 45.5,
        "engine_stderr": "panicked " * 100,
    }
    texts = [flag.text for flag in validity_flags(test)]
    assert not any("engine cpu median" in t for t in texts), "a number is not a flag"
    assert any(t.startswith("engine stderr: panicked") and len(t) <= 160 for t in texts)
    assert any(t.startswith("achieved") and "of intended 20,000/s" in t for t in texts)
    assert "fd exhaustion: EMFILE at 12,000 connections" in texts


def test_a_spinning_engine_is_not_flagged_for_its_spinning():
    rng = random.Random(2)
    test = recorded(1, "seq", {"pacer": "sequential"}, "node-http", 0, rng, engine_cpu=99.0)
    codes = [flag.code for flag in validity_flags(test)]
    assert "generator-bound" in codes
    # Two thirds of its CPU was spinning: its work was a third of a core.
    test.summary.update(client_cpu_s=3.0, spin_cpu_s=2.0)
    assert "generator-bound" not in [flag.code for flag in validity_flags(test)]
    # Spinning a tenth of it leaves 89 %: still short of saturation.
    test.summary.update(client_cpu_s=3.0, spin_cpu_s=0.03)
    assert "generator-bound" in [flag.code for flag in validity_flags(test)]


def test_a_latency_near_the_engines_floor_is_flagged():
    rng = random.Random(2)
    test = recorded(1, "seq", {"pacer": "sequential"}, "node-http", 0, rng)
    test.summary["latency_us"]["p50"] = 90.0
    test.summary["floor_us"] = 50.0
    flags = [f for f in validity_flags(test) if f.code == "engine-floor"]
    assert [f.text for f in flags] == ["latency p50 90 µs within 2x the engine's floor (50 µs)"]
    test.summary["latency_us"]["p50"] = 101.0
    assert not [f for f in validity_flags(test) if f.code == "engine-floor"]
    test.summary["floor_us"] = None
    test.summary["latency_us"]["p50"] = 10.0
    assert not [f for f in validity_flags(test) if f.code == "engine-floor"]


def test_without_emit_records_the_emit_charts_use_the_servers_and_engines_figures(tmp_path):
    rng = random.Random(7)
    params = {"behaviour": "comet", "clients": 300, "emit_interval_ms": 500}
    with Store(tmp_path / "lab.db") as store:
        run = store.start_run(store.add_suite(StoredSuite("q", "q.toml", "1" * 64)), {})
        for contestant in ("node-http", "go-nethttp"):
            for repeat in range(3):
                test = recorded(run.id, "comet", params, contestant, repeat, rng)
                test.emits = []
                store.commit_test(test)
    html = build_report(tmp_path / "lab.db", None, tmp_path / "r.html").read_text()
    assert "Emit duration (the server&#39;s own figures)" in html
    assert "Events delivered per emit cycle (estimated)" in html
    assert 'id="s1-emit"' in html and 'id="s1-cycle"' in html
    figures = json.loads(figure_data(html))
    mean_bars = figures["s1-emit"]["data"][0]
    assert mean_bars["x"] == ["node-http", "go-nethttp"]
    # total_emit_duration_ms / emits: 20 ms at speed 1, 10 ms at node-http's speed 2.
    assert mean_bars["y"] == [10.0, 20.0]
    # 300 events a second with an emit every 0.5 s: 150 deliveries a cycle.
    assert set(figures["s1-cycle"]["data"][0]["y"]) == {150.0}


class FixedBody(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"x" * 84

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_the_engines_histogram_decodes_to_the_engines_own_percentiles():
    # The engine is built by `make build`; SERVERLAB_ENGINE points elsewhere if wanted.
    engine = (
        os.environ.get("SERVERLAB_ENGINE") or REPO_ROOT / "engine/target/release/serverlab-load"
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), FixedBody)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/perf"
        out = subprocess.run(
            [str(engine), url, "-c", "2", "-d", "1s", "-t", "1", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        server.shutdown()
        server.server_close()
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["type"] == "summary" and summary["requests"] > 0
    histogram = decode(summary["histogram"])
    own = summary["latency_us"]
    assert histogram.get_total_count() == own["count"]
    quantiles = [0.5, 0.9, 0.99, 0.999, 1.0]
    expected = [own[name] for name in ("p50", "p90", "p99", "p999", "max")]
    assert values_at_quantiles(histogram, quantiles) == expected


def test_the_terminal_summary_fits_120_columns_with_a_row_per_scenario_and_contestant(tmp_path):
    db = fill_realistic_db(tmp_path / "lab.db")
    console = Console(record=True, width=120)
    print_summary(db, None, console=console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    # Whole words in every cell: names and figures are never cut in two.
    assert "…" not in text
    table = text.split("\n  keepalive, ")[0]
    assert table.count("java-tomcat-blocking") == 2 and table.count("go-nethttp") == 2
    assert "generator-bound" in table
    assert "17.2k" in text and "n=5" in text and "n=5: 93.8%" in text
    assert "crashed (at 3.5 s, signal 9, out of memory)" in " ".join(text.split())


def test_long_lines_are_thinned_by_averaging_buckets():
    x = [i / 10 for i in range(6000)]
    y = [float(i % 4) for i in range(6000)]
    thin_x, thin_y = thinned(x, y, limit=1500)
    assert len(thin_x) == len(thin_y) == 1500
    assert thin_x[0] == pytest.approx(0.15) and set(thin_y) == {1.5}
    assert thinned([1.0], [2.0]) == ([1.0], [2.0])


def test_comet_figures_have_no_events_per_second_nor_request_latency_but_a_delivery_delay():
    from serverlab.results.records import RecordedTest
    from serverlab.results.report.figures.table import METRICS_BY_NAME

    summary = {
        "rps": 0.0,
        "duration_s": 4.0,
        "events": {"received": 2000},
        "latency_us": {"p50": 0, "p99": 0},
        "event_delay_us": {"p50": 3000, "p99": 9000},
    }
    common = dict(permutation_key="k", contestant="c", repeat_index=0, status="ok")
    comet = RecordedTest(
        run_id=1, started_at=0, ended_at=1, summary=summary, params={"behaviour": "comet"}, **common
    )
    plain = RecordedTest(
        run_id=1,
        started_at=0,
        ended_at=1,
        summary=summary,
        params={"behaviour": "keepalive"},
        **common,
    )
    names = ("rps", "p50", "p99", "delay_p50", "delay_p99")
    of = {name: METRICS_BY_NAME[name].of for name in names}
    assert [of[n](comet) for n in names] == [None, None, None, 3.0, 9.0]
    assert [of[n](plain) for n in names] == [0.0, 0.0, 0.0, None, None]


GROUPED = """name = "g"
repeats = 2
contestants = ["reference"]

[links.slow]
rate_mbit = 50

[[scenario]]
name = "primed"
behaviour = "keepalive"
clients = 2
duration_s = 1
priming_runs = 1
link = "slow"
"""


def test_a_permutations_repeats_make_one_row_whatever_happened_when_they_ran(
    contestants_dir, tmp_path
):
    """A real run: every repeat got its own namespace and priming outcome, stored beside
    the test; the report still has one row for the permutation, over both repeats."""
    suite = tmp_path / "g.toml"
    suite.write_text(GROUPED)
    serverlab = str(Path(sys.executable).parent / "serverlab")
    db = tmp_path / "lab.db"
    subprocess.run(
        [serverlab, "run", str(suite), "--db", str(db), "--skip-verify"],
        check=True,
        capture_output=True,
    )
    with Store(db) as store:
        tests = store.tests()
    assert [t.status for t in tests] == ["ok", "ok"], [t.validity for t in tests]
    namespaces = {t.run_info["namespace"] for t in tests}
    assert len(namespaces) == 2 and all(t.run_info["priming"] for t in tests)
    html = build_report(db, None, tmp_path / "r.html").read_text()
    summary = html[html.index('<table class="summary">') :]
    summary = summary[: summary.index("</table>")]
    assert summary.count("<tr>") == 1 + 1
    # One per metric a keep-alive test has: all but the CPU per delivered event (push).
    assert summary.count("n=2") == 9
    nav = html[html.index("<nav>") : html.index("</nav>")]
    assert ">primed</a>" in nav and "{" not in nav and "priming" not in nav


def steady_test(rates: list[float], last_line_s: float = 1.0) -> RecordedTest:
    """A keep-alive test whose engine interval lines have the given rates; the last line
    lasts `last_line_s` (a run's final line is usually cut short)."""
    params = {"behaviour": "keepalive", "clients": 50}
    test = recorded(1, "keepalive", params, "node-http", 0, random.Random(5))
    test.intervals = [engine_interval(i, rate, params) for i, rate in enumerate(rates)]
    test.intervals[-1].data["interval_s"] = last_line_s
    return test


def test_a_request_rate_that_rises_across_the_window_is_flagged_not_steady(tmp_path):
    # 8,000/s then 9,500/s: +18.8 % from the first half to the second.
    rising = steady_test([8000, 8000, 9500, 9500])
    (flag,) = [f for f in validity_flags(rising) if f.code == "not-steady"]
    assert flag.text == "not steady: request rate +18.8% from the first to the second half"
    # Rate and latency carry it; CPU and RSS, figures of the window they cover, do not.
    assert flag.figures == {"rps", "p50", "p99"}
    # Within 10 %, and a short last line that would have looked like a collapse: steady.
    steady = steady_test([9000, 9100, 9300, 9200, 800], last_line_s=0.1)
    assert not [f for f in validity_flags(steady) if f.code == "not-steady"]
    with Store(tmp_path / "lab.db") as store:
        run = store.start_run(store.add_suite(StoredSuite("q", "q.toml", "4" * 64)), {})
        rising.run_id = run.id
        store.commit_test(rising)
    data = report_data(tmp_path / "lab.db")
    flagged = {c["metric"]: [f["code"] for f in c["flags"]] for c in data["cells"]}
    assert flagged["rps"] == flagged["p99"] == ["not-steady"]
    assert flagged["cpu"] == flagged["rss"] == []


def test_lines_after_the_planned_duration_do_not_count_against_steadiness():
    # A demo's new-connection run: 2 s planned, then two more lines while the engine waited
    # for its last 42 connections (SYNs retransmitted after the accept queue overflowed).
    waiting = steady_test([5600, 5540, 8, 0])
    waiting.params["duration_s"] = 2.0
    assert not [f for f in validity_flags(waiting) if f.code == "not-steady"]
    # The same lines inside a 4 s plan are a collapse, and flagged.
    waiting.params["duration_s"] = 4.0
    (flag,) = [f for f in validity_flags(waiting) if f.code == "not-steady"]
    assert flag.text == "not steady: request rate -99.9% from the first to the second half"


def test_the_engines_read_delay_above_a_quarter_of_latency_p99_is_flagged():
    test = steady_test([9000] * 4)
    test.summary["latency_us"]["p99"] = 2000.0
    test.summary["notice_us"] = {"p50": 40, "p99": 600, "count": 2000}
    (flag,) = [f for f in validity_flags(test) if f.code == "engine-floor"]
    assert flag.text == (
        "engine read delay p99 600 µs is 30% of latency p99 (2,000 µs; over 25% measures the "
        "engine)"
    )
    assert flag.figures == {"p50", "p99"}
    test.summary["notice_us"]["p99"] = 500
    assert not [f for f in validity_flags(test) if f.code == "engine-floor"]


def test_a_few_errors_qualify_no_figure_and_many_qualify_every_other_one():
    test = steady_test([9000] * 4)
    test.summary["errors"] = {"timeout": 3}
    (few,) = [f for f in validity_flags(test) if f.code == "errors"]
    assert few.figures == frozenset()
    test.summary["errors"] = {"timeout": test.summary["requests"] // 10}
    (many,) = [f for f in validity_flags(test) if f.code == "errors"]
    assert many.figures == {m.name for m in METRICS} - {"errors"}


def test_a_chart_whose_every_value_is_zero_is_one_sentence(report_html):
    card = report_html[report_html.index('data-chart="transports-lost"') :]
    card = card[: card.index("</div>")]
    assert '<p class="zero">no event lost in any test</p>' in card
    assert 'id="transports-lost"' not in card
    assert "transports-lost" not in json.loads(figure_data(report_html))


def html_cells(html: str) -> dict:
    """(scenario, contestant, metric) -> (median, interval text, n, flag codes) from the
    HTML summary table."""
    bodies = [table.split("<tbody>")[1] for table in summary_tables(html)]
    cells = {}
    for row in re.findall(r"<tr>(.*?)</tr>", "".join(bodies), re.S):
        scenario = re.search(r'<a href="#s\d+">(.*?)</a>', row).group(1)
        contestant = re.search(r'<span class="name">(.*?)</span>', row).group(1)
        pattern = (
            r'data-metric="(\w+)" data-n="(\d+)" data-flags="([^"]*)"><b>(.*?)</b>.*?'
            r'<span class="meta">(.*?)</span></td>'
        )
        for metric, n, flags, median, detail in re.findall(pattern, row, re.S):
            text = re.sub(r"<[^>]+>", "", detail)  # the interval and its n, each kept whole
            cells[(scenario, contestant, metric)] = (median, text, int(n), flags.split())
    return cells


def terminal_rows(text: str, scenarios: set[str]) -> dict:
    """(scenario, contestant) -> (medians with "!" when flagged, the n's) from the
    terminal table: a row's first line starts with its scenario, later lines do not."""
    rows, current = {}, None
    for line in text.split("\n  keepalive, ")[0].splitlines():
        words = line.split()
        if words and words[0] in scenarios:
            current = (words[0], words[1])
            rows[current] = ([], [])
            medians = rows[current][0]
            for word in words[2:]:
                if word == "!":
                    medians[-1] += " !"
                elif re.fullmatch(r"[\d.,]+[kM]?|-", word):
                    medians.append(word)
        if current:
            rows[current][1].extend(int(n) for n in re.findall(r"\bn=(\d+)\b", line))
    return rows


def test_json_the_terminal_table_and_the_html_show_the_same_cells(tmp_path):
    db = fill_realistic_db(tmp_path / "lab.db")
    serverlab = str(Path(sys.executable).parent / "serverlab")
    out = subprocess.run(
        [serverlab, "report", "--json", "--db", str(db)], check=True, capture_output=True
    )
    data = json.loads(out.stdout)
    html = build_report(db, None, tmp_path / "r.html").read_text()
    console = Console(record=True, width=200)
    print_summary(db, None, console=console)
    shown = html_cells(html)
    printed = console.export_text()
    terminal = terminal_rows(printed, {"keepalive", "longpoll"})
    assert len(data["cells"]) == 2 * 3 * len(METRICS)
    # The HTML shows a scenario's figures of its kind (request or push); the others, which
    # its tests have not by design, are the JSON's only, with no value.
    assert len(shown) == 3 * len([m for m in METRICS if m.applies_to != PUSH]) + 3 * len(
        [m for m in METRICS if m.applies_to != REQUESTS]
    )
    for cell in data["cells"]:
        key = (cell["scenario"], cell["contestant"], cell["metric"])
        if key not in shown:
            assert cell["n"] == 0, key
            continue
        median, detail, n, codes = shown[key]
        assert n == cell["n"] and codes == [f["code"] for f in cell["flags"]]
        if cell["n"] == 0:
            # A figure no test of the cell measured (socket memory in this fixture) is blank.
            assert (median, detail, cell["median"]) == ("-", "", None)
            continue
        assert median == _number(cell["median"])
        low, high = cell["interval"]["low"], cell["interval"]["high"]
        assert detail == f"[{_number(low)}, {_number(high)}] n={n}"
    for (scenario, contestant), (medians, ns) in terminal.items():
        mine = [
            c
            for c in data["cells"]
            if (c["scenario"], c["contestant"]) == (scenario, contestant)
            and c["metric"] in TERMINAL_METRICS
        ]
        # A figure the cell has not (long poll's requests/s) prints "-".
        expected = [
            ("-" if c["median"] is None else compact_number(c["median"]))
            + (" !" if c["flags"] else "")
            for c in mine
        ]
        assert medians == expected and ns == [c["n"] for c in mine if c["n"]]
    # Each cell has its own n: node-http's fifth keep-alive repeat has no monitor samples,
    # so its CPU figure stands on four repeats beside a throughput on five.
    node = {
        c["metric"]: c["n"]
        for c in data["cells"]
        if (c["scenario"], c["contestant"]) == ("keepalive", "node-http")
    }
    assert (node["rps"], node["cpu"]) == (5, 4)
    assert shown[("keepalive", "node-http", "cpu")][2] == 4
    # The at-a-glance lines are the JSON's, word for word, on the terminal as in the HTML.
    said = " ".join(printed.split())
    for glance in data["at_a_glance"]:
        line = "; ".join(glance["sentences"])
        assert f"{glance['scenario']}: {line}" in said
        assert html.count(line.replace("'", "&#39;")) == 1
    # The generator-bound repeat qualifies every figure of its row, in all three.
    blocking = [c for c in data["cells"] if c["contestant"] == "java-tomcat-blocking"]
    assert {bool(c["flags"]) for c in blocking if c["scenario"] == "keepalive"} == {True}
    assert len(terminal) == 6


def test_at_a_glance_states_only_supported_differences_as_ratios(tmp_path):
    db = fill_realistic_db(tmp_path / "lab.db", repeats=6)
    html = build_report(db, None, tmp_path / "r.html").read_text()
    glance = html[html.index('id="glance"') : html.index("</section>")]
    assert html.index('id="glance"') < html.index('<table class="summary">')
    longpoll = re.search(r'<li data-scenario="longpoll">(.*?)</li>', glance, re.S).group(1)
    # node-http is twice as fast in the fixture, six repeats against six, fully separated:
    # half the event delay (long poll has no throughput: its events/s are the plan's).
    ratio = re.search(
        r"node-http has ([\d.]+)× java-tomcat-blocking \(threads=200\)&#39;s delivery delay p50 "
        r"\[([\d.]+)–([\d.]+)\]",
        longpoll,
    )
    assert ratio, longpoll
    assert float(ratio.group(2)) <= float(ratio.group(1)) <= float(ratio.group(3))
    assert 0.45 < float(ratio.group(1)) < 0.55
    assert "throughput" not in longpoll
    # Its keep-alive figures have a flagged repeat (generator-bound): it leaves them, the
    # six others decide, and each sentence names what it left out.
    data = report_data(db)
    (keepalive,) = [g for g in data["at_a_glance"] if g["scenario"] == "keepalive"]
    said = [s for s in keepalive["sentences"] if "java-tomcat-blocking" in s]
    dropped = "6 of 7; java-tomcat-blocking generator-bound r7)"
    assert said and all(s.endswith(dropped) for s in said)
    stated = [d for g in data["at_a_glance"] for d in g["differences"]]
    assert stated and all(d["adjusted_p"] < 0.05 for d in stated)
    # Four repeats a side can support nothing: said in words, not left blank.
    few = build_report(fill_realistic_db(tmp_path / "four.db"), None, tmp_path / "f.html")
    text = few.read_text()
    assert "No difference is supported by the data (18 figures:" in text


def test_a_parameter_only_some_cells_have_stays_out_of_the_other_cells_labels():
    def cell(**params):
        return RecordedTest(1, "k", "c", 0, "ok", 0.0, 1.0, scenario="tax", params=params)

    clear = cell(transport="clear", clients=10)
    tls = cell(transport="tls", tls_key="ecdsa-p256", clients=10)
    rsa = cell(transport="tls", tls_key="rsa-2048", clients=10)
    labels = scenario_labels([clear, tls, rsa])
    assert labels[scenario_key(clear)] == "tax (transport=clear)"
    assert labels[scenario_key(tls)] == "tax (tls_key=ecdsa-p256, transport=tls)"
    assert labels[scenario_key(rsa)] == "tax (tls_key=rsa-2048, transport=tls)"


def test_a_socket_reading_taken_only_after_the_engine_stopped_is_not_the_socket_figure():
    rng = random.Random(7)
    test = recorded(1, "keepalive", {"behaviour": "keepalive"}, "node-http", 0, rng)
    reading = {"kernel_bytes": 3 * 1024 * 1024, "sockets": 12}
    test.run_info["kernel"] = {"sockets": {"last": reading, "peak": reading}}
    assert socket_memory_mib(test) == 3.0
    late = {**reading, "after_engine_stop": True}
    test.run_info["kernel"] = {"sockets": {"last": late, "peak": late}}
    assert socket_memory_mib(test) is None
