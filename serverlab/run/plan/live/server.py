"""The live page's HTTP server: 127.0.0.1 only, and nothing without the run's token.

`/?token=T` is the page (one file: plotly inlined, as the report has it), `/events?token=T`
the event stream (server-sent events, `id:` the event's number). A stream resumes after the
browser's `Last-Event-ID` header, or after `last=N` in its URL (the page's own reconnect).
Any other request, or one without the token, gets an empty 404. Its threads run on the
generator's CPUs: the serving thread pins itself, and each connection's thread inherits it."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

import plotly.offline

from serverlab.run.plan.live.events import EventLog
from serverlab.run.plan.live.feed import pin_thread

LOOPBACK = "127.0.0.1"
# A comment line this often keeps proxies from closing an idle stream and finds gone pages.
KEEPALIVE_S = 15.0
RETRY_MS = 1000


@cache
def page_html() -> bytes:
    page = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
    # The library goes in as the page's first script, so the page fetches nothing.
    return page.replace("/*PLOTLY*/", plotly.offline.get_plotlyjs(), 1).encode()


class LiveError(Exception):
    """The live page cannot be served, or `watch` has no run to show: one line for people."""


class LiveServer:
    def __init__(self, log: EventLog, port: int = 0, cpus: str | None = None):
        self.log = log
        self.cpus = cpus
        self.token = secrets.token_urlsafe(24)
        try:
            self.httpd = ThreadingHTTPServer((LOOPBACK, port), _handler(self))
        except OSError as error:
            raise LiveError(
                f"the live page cannot listen on {LOOPBACK}:{port}: {error.strerror}"
            ) from None
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._serve, name="serverlab-live", daemon=True)
        self.streams: set = set()  # the open event streams' sockets

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/?token={self.token}"

    def start(self) -> LiveServer:
        self._thread.start()
        return self

    def _serve(self) -> None:
        pin_thread(self.cpus)
        self.httpd.serve_forever(poll_interval=0.5)

    def drain(self, wait_s: float) -> None:
        """Waits up to `wait_s` for the open streams to have sent everything and closed."""
        deadline = time.monotonic() + wait_s
        while self.streams and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def allowed(self, query: dict) -> bool:
        given = (query.get("token") or [""])[0]
        return secrets.compare_digest(given.encode(), self.token.encode())


def _handler(live: LiveServer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            # A page that goes away resumes from its last id when it comes back.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer()

        def _answer(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if not live.allowed(query) or url.path not in ("/", "/events"):
                self._nothing()
            elif url.path == "/":
                self._page()
            else:
                self._stream(_resume_from(self.headers.get("Last-Event-ID"), query))

        def _nothing(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _page(self) -> None:
            body = page_html()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Referrer-Policy", "no-referrer")  # the token stays here
            self.end_headers()
            self.wfile.write(body)

        def _stream(self, last: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            live.streams.add(self.connection)
            try:
                self.wfile.write(f"retry: {RETRY_MS}\n\n".encode())
                while True:
                    events, gone = live.log.after(last, KEEPALIVE_S)
                    if gone:
                        self.wfile.write(b'data: {"kind":"gap"}\n\n')
                    for event_id, text in events:
                        self.wfile.write(f"id: {event_id}\ndata: {text}\n\n".encode())
                        last = event_id
                    if not events:
                        if live.log.closed:
                            return
                        self.wfile.write(b": waiting\n\n")
                    self.wfile.flush()
            finally:
                live.streams.discard(self.connection)

        def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
            pass  # the terminal shows the run's progress, not each request

    return Handler


def _resume_from(header: str | None, query: dict) -> int:
    """The last event the page has: the browser's Last-Event-ID, else the page's `last`."""
    for given in (header, (query.get("last") or [None])[0]):
        if given and given.isdigit():
            return int(given)
    return 0
