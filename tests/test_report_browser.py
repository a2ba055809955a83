"""The generated report in real headless Chromium, driven over the DevTools protocol: every
chart renders, nothing is fetched from the network, and the console stays free of errors."""

import base64
import json
import os
import signal
import struct
import subprocess
import time
import urllib.request
import zlib
from contextlib import contextmanager
from pathlib import Path

import pytest
import websocket
from test_report import EVIL_NAME, fill_realistic_db

from serverlab.results.report import build_report

CHROMIUM = "/usr/bin/chromium"
STARTUP_TIMEOUT_S = 30
RENDER_TIMEOUT_S = 40
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


class DevTools:
    """A minimal DevTools protocol client on one page: commands, and the events seen."""

    def __init__(self, ws_url: str):
        self.socket = websocket.create_connection(
            ws_url, timeout=RENDER_TIMEOUT_S, suppress_origin=True
        )
        self.events: list[dict] = []
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {expression}")

    def close(self):
        self.socket.close()


@contextmanager
def launched_chromium(profile: Path):
    """Headless Chromium with its DevTools port on loopback; yields the page's socket URL."""
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield _page_socket_url(profile / "DevToolsActivePort", process)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture
def chromium(tmp_path):
    with launched_chromium(tmp_path / "profile") as page_url:
        yield page_url


def _page_socket_url(port_file: Path, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not port_file.exists() or not port_file.read_text().strip():
        assert process.poll() is None, "chromium exited at start"
        assert time.monotonic() < deadline, "chromium did not open its DevTools port"
        time.sleep(0.1)
    port = int(port_file.read_text().split()[0])
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
            pages = [t for t in json.load(answer) if t["type"] == "page"]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        assert time.monotonic() < deadline, "chromium opened no page"
        time.sleep(0.1)


def problems_in(events: list[dict]) -> list[str]:
    problems = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            problems.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append(f"console.{params['type']}: {params.get('args')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            problems.append(f"log: {params['entry'].get('text')}")
        elif method == "Page.javascriptDialogOpening":
            problems.append(f"dialog opened: {params.get('message')}")
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(LOCAL_SCHEMES):
                problems.append(f"network request: {url}")
    return problems


def test_report_renders_every_chart_offline_without_console_errors(tmp_path, chromium):
    db = fill_realistic_db(tmp_path / "lab.db", odd_contestant=EVIL_NAME)
    report = build_report(db, None, tmp_path / "report.html")
    page = DevTools(chromium)
    try:
        for domain in ("Runtime", "Log", "Page", "Network"):
            page.call(f"{domain}.enable")
        page.call("Page.navigate", url=report.as_uri())
        rendered = page.wait_for(
            "document.body && (document.body.getAttribute('data-charts-rendered')"
            " || document.body.getAttribute('data-charts-failed') && 'failed')",
            RENDER_TIMEOUT_S,
        )
        plots = page.evaluate("document.querySelectorAll('div.plot').length")
        drawn = page.evaluate("document.querySelectorAll('div.plot svg.main-svg').length")
        traced = page.evaluate(
            "[...document.querySelectorAll('div.plot')]"
            ".filter(p => p.querySelector('g.trace, g.point, path.js-line')).length"
        )
        shows_name = page.evaluate(f"document.body.innerText.includes({json.dumps(EVIL_NAME)})")
        injected = page.evaluate("document.querySelectorAll('script:not([type])').length")
        page.evaluate("0")  # one more round trip collects events still in flight
    finally:
        page.close()

    assert rendered == str(plots), f"charts rendered: {rendered}"
    # Two scenarios: eight charts for the long poll (a push test has no requests/s chart),
    # seven for keep-alive (no emitter there), and three in the transport section: memory
    # and the delays. No event was lost in any test, so that chart is one sentence instead;
    # these stored tests have no emit window, so the window's figures (completeness, CPU
    # per 1,000 events) have no value and draw no chart.
    assert plots == 18
    assert drawn >= plots
    assert traced == plots
    assert shows_name, "the hostile contestant name is shown as text"
    assert injected == 2, "only the report's own two scripts exist"
    assert problems_in(page.events) == []


def open_at_1300_px(page: DevTools, report: Path, selector: str) -> None:
    """The report in a 1300 x 900 window, once the element `selector` is there."""
    page.call(
        "Emulation.setDeviceMetricsOverride",
        width=1300,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    page.call("Page.enable")
    page.call("Page.navigate", url=report.as_uri())
    page.wait_for(f"document.querySelector({json.dumps(selector)}) !== null", RENDER_TIMEOUT_S)


# Twelve repeats make every interval a digit wider ("n=12"): real suites' summaries spilled
# out of the window there while the four-repeat one fitted.
@pytest.mark.parametrize("repeats", [4, 12])
def test_the_summary_reads_at_1300_px_without_breaking_contestant_names(
    tmp_path, chromium, repeats
):
    db = fill_realistic_db(tmp_path / "lab.db", "java-virtual-threads", repeats)
    report = build_report(db, None, tmp_path / "report.html")
    page = DevTools(chromium)
    try:
        open_at_1300_px(page, report, "table.summary")
        lines_per_name = page.evaluate(
            "[...document.querySelectorAll('table.summary .name')]"
            ".map(n => [n.textContent, n.getClientRects().length])"
        )
        overflow = page.evaluate(
            "(() => { const box = document.querySelector('table.summary').parentElement;"
            " return box.scrollWidth - box.clientWidth; })()"
        )
    finally:
        page.close()
    assert lines_per_name and all(lines == 1 for _, lines in lines_per_name), lines_per_name
    assert {name for name, _ in lines_per_name} >= {"java-virtual-threads", "node-http"}
    assert overflow <= 0, f"the summary is {overflow} px wider than the page"


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, the kind Chromium
    captures: its IDAT chunks inflated and each row's filter undone (PNG spec, section 9)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, header = 8, b"", None
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height, depth, colour = header
    assert depth == 8 and colour in (2, 6)
    step = 3 if colour == 2 else 4
    raw, rows, previous = zlib.decompress(idat), [], bytearray(width * step)
    stride = width * step + 1
    for y in range(height):
        kind, line = raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride])
        for x in range(len(line)):
            left = line[x - step] if x >= step else 0
            up, corner = previous[x], previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - corner
                near = min((abs(guess - v), i) for i, v in enumerate((left, up, corner)))[1]
                line[x] = (line[x] + (left, up, corner)[near]) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(r[i : i + 3]) for r in rows for i in range(0, len(r), step)]


def test_the_at_a_glance_block_is_at_the_top_and_reads_on_screen(tmp_path, chromium):
    db = fill_realistic_db(tmp_path / "lab.db", repeats=6)
    report = build_report(db, None, tmp_path / "report.html")
    page = DevTools(chromium)
    try:
        open_at_1300_px(page, report, "#glance")
        box = page.evaluate(
            "(() => { const r = document.querySelector('#glance').getBoundingClientRect();"
            " return [r.x, r.y, r.width, r.height]; })()"
        )
        summary_top = page.evaluate(
            "document.querySelector('table.summary').getBoundingClientRect().y"
        )
        lines = page.evaluate(
            "[...document.querySelectorAll('#glance > ul > li')].map(l => l.innerText)"
        )
        x, y, width, height = box
        shot = page.call(
            "Page.captureScreenshot",
            format="png",
            clip={"x": x, "y": y, "width": width, "height": height, "scale": 1},
        )
    finally:
        page.close()
    # Above the summary, inside the first screen a reader sees.
    assert y + height <= 900 and y + height < summary_top
    assert [line.split(":")[0] for line in lines] == ["keepalive", "longpoll"]
    # A long poll is judged on its event delay, never on a rate the plan sets.
    assert "node-http has 0.50× java-tomcat-blocking (threads=200)'s delivery delay p50" in lines[1]
    shot_width, shot_height, pixels = png_pixels(base64.b64decode(shot["data"]))
    assert (shot_width, shot_height) == (round(width), round(height))
    # Drawn, not blank: the block's pale blue fills most of it, and dark text sits on it.
    background = sum(1 for p in pixels if p == bytes((0xF5, 0xF9, 0xFF)))
    dark = sum(1 for p in pixels if max(p) < 100)
    assert background > 0.5 * len(pixels)
    assert dark > 0.005 * len(pixels), f"{dark} dark pixels of {len(pixels)}"
