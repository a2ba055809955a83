"""The live page in real headless Chromium during a real short run against the reference
server: its charts and table fill as tests run, a reconnect mid-run loses and repeats no
event, and it fetches nothing but its own stream."""

import json
import socket

from conftest import live_suite
from test_live import page_url, start_run
from test_report_browser import (  # noqa: F401 (chromium: a fixture)
    RENDER_TIMEOUT_S,
    DevTools,
    chromium,
    problems_in,
)

from serverlab.run.plan.live.events import EventLog
from serverlab.run.plan.live.server import LiveServer

RUN_TIMEOUT_S = 120


def test_the_live_page_draws_a_run_as_it_goes_and_resumes_after_a_reconnect(
    contestants_dir,
    tmp_path,
    chromium,  # noqa: F811 (the fixture imported above)
):
    suite = tmp_path / "suite.toml"
    suite.write_text(live_suite(repeats=4, duration_s=3))
    run = start_run(suite, tmp_path / "lab.db", "--live")
    page = DevTools(chromium)
    try:
        url = page_url(run, r"live page: (\S+)")
        for domain in ("Runtime", "Log", "Page", "Network"):
            page.call(f"{domain}.enable")
        page.call("Page.navigate", url=url)
        # The rate chart gets the first test's interval lines while it runs.
        page.wait_for("document.getElementById('rate').data[0].x.length >= 2", RUN_TIMEOUT_S)
        # So does the latency chart: a p50 and a p99 of its own for each interval.
        timed = "document.getElementById('timing').data[{}].y.filter(v => v > 0).length >= 2"
        page.wait_for(timed.format(0) + " && " + timed.format(1), RUN_TIMEOUT_S)
        # Drawn while the run goes on. Not necessarily while its first test does: on a busy
        # machine Chromium may read the first test's lines and its end in one go.
        assert not page.evaluate("window.serverlabLive.ended")
        page.wait_for("window.serverlabLive.done >= 1", RUN_TIMEOUT_S)
        assert not page.evaluate("window.serverlabLive.ended"), "the run outlasts the reconnect"
        page.evaluate("window.serverlabLive.reconnect()")
        page.wait_for("window.serverlabLive.ended", RUN_TIMEOUT_S)
        seen = page.evaluate(
            "JSON.stringify({ids: serverlabLive.received, reconnects: serverlabLive.reconnects,"
            " done: serverlabLive.done, total: serverlabLive.tests.length,"
            " rows: [...document.querySelectorAll('#cells tbody tr')].map(r => r.innerText),"
            " latency: document.getElementById('latency').data[0].x.length,"
            " server: document.getElementById('server').data[0].x.length,"
            " drawn: document.querySelectorAll('div.plot svg.main-svg').length,"
            " progress: document.getElementById('progress').textContent})"
        )
        page.evaluate("0")  # one more round trip collects events still in flight
    finally:
        page.close()
        out, _ = run.communicate(timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, out
    seen = json.loads(seen)
    assert seen["ids"] == list(range(1, len(seen["ids"]) + 1)), "no event lost or repeated"
    assert seen["reconnects"] == 1
    assert seen["done"] == seen["total"] == 4
    assert seen["latency"] == 4, "one p50/p99 point per finished test"
    assert seen["server"] >= 2, "the last test's server CPU and RSS"
    assert seen["drawn"] >= 5
    (row,) = seen["rows"]
    assert row.startswith("fast\treference") and "4 ok" in row
    assert seen["progress"].startswith("run over: 4 of 4 tests done")
    # Its own page and stream only: nothing from elsewhere, no console error.
    origin = url.split("/?")[0] + "/"
    events = [
        e
        for e in page.events
        if not (
            e.get("method") == "Network.requestWillBeSent"
            and e["params"]["request"]["url"].startswith(origin)
        )
    ]
    assert problems_in(events) == []


def test_a_push_runs_cycles_are_drawn_as_they_happen_then_replaced_by_its_emit_records(
    contestants_dir,
    tmp_path,
    chromium,  # noqa: F811 (the fixture imported above)
):
    suite = tmp_path / "suite.toml"
    suite.write_text(live_suite(repeats=1, duration_s=6, push=True))
    run = start_run(suite, tmp_path / "lab.db", "--live")
    page = DevTools(chromium)
    cycles = "JSON.stringify({from: serverlabLive.cyclesFrom, done: serverlabLive.done,"
    cycles += " points: [...serverlabLive.cycles.values()]})"
    try:
        page.call("Page.navigate", url=page_url(run, r"live page: (\S+)"))
        # Cycles 500 ms apart: two of them drawn from interval lines while the test runs.
        page.wait_for("window.serverlabLive && serverlabLive.cycles.size >= 2", RUN_TIMEOUT_S)
        during = json.loads(page.evaluate(cycles))
        page.wait_for("serverlabLive.ended", RUN_TIMEOUT_S)
        after = json.loads(page.evaluate(cycles))
        drawn = page.evaluate("document.getElementById('push').data[0].x.length")
    finally:
        page.close()
        out, _ = run.communicate(timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, out
    assert during["done"] == 0 and during["from"].startswith("so far")
    for point in during["points"]:
        assert 0 < point["completeness"] <= 100 and point["last_delay_ms"] >= 0, point
    assert after["from"].startswith("whole test") and drawn == len(after["points"])
    # The whole test's records hold at least the cycles seen as they happened, as complete.
    final = {(p["event"], p["seq"]): p["completeness"] for p in after["points"]}
    for point in during["points"]:
        assert final[point["event"], point["seq"]] >= point["completeness"], point


def test_the_browser_resumes_a_dropped_stream_from_its_last_event_id(tmp_path, chromium):  # noqa: F811
    """The stream cut from the server's side: Chromium's EventSource reconnects by itself,
    sending Last-Event-ID; were it not honoured, the events from 1 would come again."""
    log = EventLog()
    server = LiveServer(log).start()
    page = DevTools(chromium)
    try:
        page.call("Page.navigate", url=server.url)
        for n in range(20):
            log.add("interval", t=n + 1.0, rps=100.0 + n, events=0, errors=0, open=4)
        page.wait_for("window.serverlabLive && serverlabLive.lastId === 20", RENDER_TIMEOUT_S)
        for stream in list(server.streams):
            stream.shutdown(socket.SHUT_RDWR)
        for n in range(20, 40):
            log.add("interval", t=n + 1.0, rps=100.0 + n, events=0, errors=0, open=4)
        page.wait_for("serverlabLive.lastId === 40", RENDER_TIMEOUT_S)
        log.add("end")
        page.wait_for("serverlabLive.ended", RENDER_TIMEOUT_S)
        seen = page.evaluate(
            "JSON.stringify({ids: serverlabLive.received, reconnects: serverlabLive.reconnects,"
            " points: document.getElementById('rate').data[0].x.length})"
        )
    finally:
        page.close()
        log.close()
        server.stop()
    seen = json.loads(seen)
    assert seen["ids"] == list(range(1, 42))
    assert seen["reconnects"] == 0, "the browser's own reconnect, not the page's"
    assert seen["points"] == 40
