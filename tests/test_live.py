"""The live page of a run: its event log and side file, its server (loopback, token, resume
from Last-Event-ID, the generator's CPUs), and `serverlab watch` on a real run."""

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from conftest import live_suite

from serverlab.results.records import EngineInterval, MonitorSample, RecordedTest
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.live.events import EventLog
from serverlab.run.plan.live.feed import LiveFeed, interval_point
from serverlab.run.plan.live.server import LiveServer

SERVERLAB = str(Path(sys.executable).parent / "serverlab")


@pytest.fixture
def page():
    log = EventLog()
    server = LiveServer(log).start()
    yield server
    log.close()
    server.stop()


def get(url: str, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_live_page_serves_nothing_without_its_token(page):
    base = f"http://127.0.0.1:{page.port}"
    wrong = page.token[:-1] + ("A" if page.token[-1] != "A" else "B")
    for path in (
        "/",
        "/events",
        "/?token=",
        f"/?token={wrong}",
        f"/events?token={wrong}",
        f"/other?token={page.token}",
        f"/{page.token}",
    ):
        assert get(base + path) == (404, b""), path
    status, body = get(page.url)
    assert status == 200 and b"EventSource" in body
    assert page.token.encode() not in body, "the page reads its token from its URL"


def test_the_live_page_listens_on_loopback_only(page):
    (listening,) = [
        c
        for c in psutil.Process().net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == page.port
    ]
    assert listening.laddr.ip == "127.0.0.1"
    # Another address of this machine (127.0.0.2 is one, on lo) does not reach it.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", page.port), timeout=5)


def read_stream(port: int, token: str, last_event_id: int | None, count: int) -> list[int]:
    """The ids of the first `count` events of a raw event stream."""
    header = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET /events?token={token} HTTP/1.1\r\nHost: x\r\n{header}\r\n".encode())
        text, ids = b"", []
        while len(ids) < count:
            chunk = conn.recv(65536)
            assert chunk, f"the stream ended after ids {ids}"
            text += chunk
            ids = [int(i) for i in re.findall(rb"\nid: (\d+)\n", text)]
    return ids


def test_a_stream_resumes_after_its_last_event_id_losing_and_repeating_nothing(page):
    for n in range(5):
        page.log.add("interval", t=n)
    assert read_stream(page.port, page.token, None, 5) == [1, 2, 3, 4, 5]
    assert read_stream(page.port, page.token, 2, 3) == [3, 4, 5]
    # One that comes back with everything waits for the next event, and gets it alone.
    threading.Timer(0.5, page.log.add, ["interval"], {"t": 5}).start()
    assert read_stream(page.port, page.token, 5, 1) == [6]


def test_the_pages_threads_run_on_the_generators_cpus():
    engine = Pinning.default().engine
    log = EventLog()
    server = LiveServer(log, cpus=engine).start()
    feed = LiveFeed(log, cpus=engine)
    try:
        feed.begin([], 0)  # made into an event on the feed's thread, once it is pinned
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(f"GET /events?token={server.token} HTTP/1.1\r\n\r\n".encode())
            text = b""
            while b"id: 1" not in text:
                text += conn.recv(65536)
            threads = [t for t in threading.enumerate() if "process_request" in t.name]
            threads += [server._thread, feed._thread]
            assert len(threads) >= 3
            for thread in threads:
                status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
                (allowed,) = re.findall(r"Cpus_allowed_list:\s*(\S+)", status)
                assert _cpus(allowed) == _cpus(engine), thread.name
    finally:
        feed.end()
        server.stop()


def _cpus(listed: str) -> set[int]:
    """A CPU list as the kernel or Pinning writes it ("0-1", "0,1") as a set."""
    cpus = set()
    for part in listed.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _recorded(intervals: int, samples: int) -> RecordedTest:
    return RecordedTest(
        run_id=1,
        permutation_key="k",
        contestant="reference",
        repeat_index=0,
        status="ok",
        started_at=1000.0,
        ended_at=1010.0,
        scenario="fast",
        params={"behaviour": "keepalive"},
        summary={"rps": 10.0, "latency_us": {"p50": 500, "p99": 900}},
        intervals=[
            EngineInterval(i, i + 1.0, {"elapsed_s": i + 1.0, "rps": 10.0 + i, "errors": {}})
            for i in range(intervals)
        ],
        samples=[
            MonitorSample(t=i * 0.1, cpu_percent=50.0, rss_bytes=2**20) for i in range(samples)
        ],
    )


def test_a_test_whose_lines_came_from_elsewhere_sends_its_recorded_ones_once(tmp_path):
    """A --ray run's generators return their lines at the end, merged: the feed sends those
    when the test finishes; a local test's lines came as it ran and are not sent again."""
    log = EventLog(sink=tmp_path / "live.jsonl")
    feed = LiveFeed(log, cpus=None, run_id=lambda: 7)
    plan = type(
        "Plan",
        (),
        {
            "scenario": "fast",
            "contestant": "reference",
            "repeat": 0,
            "params": {"behaviour": "keepalive"},
            "tunables": {},
            "estimate_s": 10.0,
            "budget_s": 20.0,
        },
    )()
    feed.begin([plan], 0)
    feed.test_started(0, plan)
    feed.test_finished(_recorded(intervals=3, samples=25))  # nothing streamed: a spread test
    feed.test_started(0, plan)
    feed.interval({"elapsed_s": 1.0, "rps": 5.0, "errors": {"connect": 2}})
    feed.test_finished(_recorded(intervals=3, samples=25))
    feed.end()
    events = [json.loads(json.loads(line)["event"]) for line in (tmp_path / "live.jsonl").open()]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "begin" and events[0]["run_id"] == 7 and kinds[-1] == "end"
    spread, local = [e for e in events if e["kind"] == "finished"]
    assert [p["rps"] for p in spread["intervals"]] == [10.0, 11.0, 12.0]
    assert local["intervals"] == []
    assert [e["errors"] for e in events if e["kind"] == "interval"] == [2]
    # 2.5 s of samples at 10 Hz, one a second: the spread test's server figures.
    assert kinds[: kinds.index("finished")].count("sample") == 3
    assert [e["kind"] for e in events].count("cells") == 2


def start_run(suite: Path, db: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [SERVERLAB, "run", str(suite), "--db", str(db), "--skip-verify", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def page_url(process: subprocess.Popen, pattern: str) -> str:
    """The URL a command prints, read from its output as it comes."""
    for line in process.stdout:
        found = re.search(pattern, line)
        if found:
            return found.group(1)
    raise AssertionError(f"no line matched {pattern}: exit {process.wait()}")


def stream_until_end(url: str, events: list[dict] | None = None) -> list[dict]:
    """The page's events until the stream ends, appended to `events` as they come."""
    events = [] if events is None else events
    with urllib.request.urlopen(url.replace("/?", "/events?"), timeout=60) as answer:
        for line in answer:
            if line.startswith(b"id: "):
                events.append({"id": int(line[4:])})
            elif line.startswith(b"data: ") and events:
                events[-1].update(json.loads(line[6:]))
    return events


def test_watch_attaches_to_a_run_going_in_another_process_and_shows_it_whole(
    contestants_dir, tmp_path
):
    suite = tmp_path / "suite.toml"
    suite.write_text(live_suite(repeats=3, duration_s=2))
    db = tmp_path / "lab.db"
    run = start_run(suite, db)
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "work").glob("*/live.jsonl")):
            assert time.monotonic() < deadline and run.poll() is None, "the run wrote no events"
            time.sleep(0.1)
        time.sleep(3)  # into the run: watch starts late, and still gets it from its start
        watch = subprocess.Popen(
            [SERVERLAB, "watch", "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        events = stream_until_end(page_url(watch, r"live page (\S+)"))
        out, _ = watch.communicate(timeout=30)
    finally:
        run.wait(timeout=120)
    assert watch.returncode == 0 and "has ended" in out
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    assert kinds.count("started") == kinds.count("finished") == 3
    assert kinds.count("interval") >= 3
    assert len(events[-2]["rows"]) == 1 and events[-2]["rows"][0]["counts"] == "3 ok"


def test_watch_without_a_run_going_says_so_in_one_line(contestants_dir, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text(live_suite(repeats=1, duration_s=1))
    db = tmp_path / "lab.db"
    assert start_run(suite, db).wait(timeout=120) == 0
    done = subprocess.run(
        [SERVERLAB, "watch", "--db", str(db)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"serverlab: error: no run is going in {db}"]


def test_a_live_port_in_use_is_one_line_and_runs_nothing(contestants_dir, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text(live_suite(repeats=1, duration_s=1))
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = start_run(suite, tmp_path / "lab.db", "--live", str(port))
        out, _ = run.communicate(timeout=120)
    assert run.returncode == 2, out
    assert out.strip().splitlines()[-1] == (
        f"serverlab: error: the live page cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    with sqlite3.connect(tmp_path / "lab.db") as db:
        assert db.execute("SELECT count(*) FROM tests").fetchone() == (0,)


def test_ctrl_c_with_the_live_page_open_is_as_quiet_as_without(contestants_dir, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text(live_suite(repeats=4, duration_s=2))
    run = start_run(suite, tmp_path / "lab.db", "--live")
    url = page_url(run, r"live page: (\S+)")
    events: list[dict] = []
    reader = threading.Thread(target=stream_until_end, args=(url, events), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any(e.get("kind") == "finished" for e in events):
        assert time.monotonic() < deadline, "no test finished"
        time.sleep(0.1)
    run.send_signal(signal.SIGINT)
    out, _ = run.communicate(timeout=60)
    reader.join(timeout=10)
    assert run.returncode == 130, out
    assert "Traceback" not in out and "interrupted" in out
    assert events[-1]["kind"] == "end", "the page is told the run is over"
    assert [e["kind"] for e in events].count("finished") < 4, "it was stopped mid-run"


def test_a_capacity_searchs_steps_follow_one_another_on_the_rate_chart(tmp_path):
    log = EventLog(sink=tmp_path / "live.jsonl")
    feed = LiveFeed(log, cpus=None)
    for elapsed in (1.0, 2.0, 3.0, 1.0, 2.0, 1.0):  # three engine runs, each from 0
        feed.interval({"elapsed_s": elapsed, "rps": 10.0, "errors": {}})
    feed.end()
    events = [json.loads(json.loads(line)["event"]) for line in (tmp_path / "live.jsonl").open()]
    assert [e["t"] for e in events if e["kind"] == "interval"] == [1, 2, 3, 4, 5, 6]


def test_an_interval_point_carries_its_intervals_percentiles_in_ms_and_none_where_it_had_none():
    line = {
        "elapsed_s": 2.0,
        "rps": 40.0,
        "errors": {},
        "latency_p50_us": 2500,
        "latency_p99_us": 9000,
        "event_delay_p50_us": None,
        "event_delay_p99_us": None,
    }
    point = interval_point(line)
    assert (point["latency_p50_ms"], point["latency_p99_ms"]) == (2.5, 9.0)
    assert (point["delay_p50_ms"], point["delay_p99_ms"]) == (None, None)


def test_a_push_tests_cycles_add_up_over_its_interval_lines_and_start_again_with_the_next(
    tmp_path,
):
    log = EventLog(sink=tmp_path / "live.jsonl")
    feed = LiveFeed(log, cpus=None)
    plan = type(
        "Plan",
        (),
        {
            "scenario": "c",
            "contestant": "reference",
            "repeat": 0,
            "params": {"behaviour": "comet"},
            "tunables": {},
            "estimate_s": 1.0,
            "budget_s": 2.0,
        },
    )()

    def tick(seq, received, delay_us):
        return {
            "event": "e1",
            "seq": seq,
            "total": 4,
            "received": received,
            "created_ms": 1000 * seq,
            "max_delay_us": delay_us,
        }

    feed.test_started(0, plan)
    feed.interval({"elapsed_s": 1.0, "errors": {}, "cycles": [tick(1, 3, 2000)]})
    feed.interval({"elapsed_s": 2.0, "errors": {}, "cycles": [tick(1, 1, 9000), tick(2, 2, 500)]})
    feed.interval({"elapsed_s": 3.0, "errors": {}})  # an interval that received nothing
    feed.test_started(0, plan)
    feed.interval({"elapsed_s": 1.0, "errors": {}, "cycles": [tick(1, 1, 1000)]})
    feed.end()
    events = [json.loads(json.loads(line)["event"]) for line in (tmp_path / "live.jsonl").open()]
    drawn = [
        [(c["seq"], c["completeness"], c["last_delay_ms"]) for c in e["cycles"]]
        for e in events
        if e["kind"] == "interval"
    ]
    assert drawn == [
        [(1, 75.0, 2.0)],
        [(1, 100.0, 9.0), (2, 50.0, 0.5)],  # seq 1 so far: 3 + 1 of 4, its longest delay
        [],
        [(1, 25.0, 1.0)],  # the next test's own
    ]
