"""A reference implementation of spec/SPEC.md in Python (asyncio + h11), for the tests.

It is correct by default, so that `serverlab verify` passing against it shows the checker
accepts a good server; each `--fault NAME` breaks one rule, so that verify failing on
exactly the matching cases shows the checker can tell the difference.
"""

import argparse
import asyncio
import base64
import binascii
import collections
import contextlib
import email.utils
import hashlib
import json
import os
import re
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http import HTTPStatus
from pathlib import Path

import h11
import reference_syslog
import reference_syslogtls
from reference_framing import Framer, FramingError
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.frames import Frame, Opcode
from websockets.headers import build_extension, parse_extension
from websockets.protocol import Protocol, Side, State
from websockets.utils import accept_key

SPEC_VERSION = "3.4"
LOOPBACK = "127.0.0.1"
PERF_BODY = b"serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
MAX_JSON_BODY = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
EVENT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_EVENTS = 16
REPLAY_BUFFER = 64
MAX_WS_MESSAGE = 65536
DEFAULT_HEARTBEAT_MS = 15000
# OpenSSL 3's SSL_OP_ALLOW_CLIENT_RENEGOTIATION (Python's ssl has no name for it): 3.0 refuses a
# renegotiation started by the client unless it is set.
OP_ALLOW_CLIENT_RENEGOTIATION = 1 << 8
# The late_control fault's delay before a control call is served, and the early_sent fault's
# hold between the stamp and the writes (node-http's corked socket, exaggerated).
LATE_CONTROL_S = 1.0
# The header_timeout defence's limit on a request's header section (and on an idle
# connection's wait for one).
HEADER_TIMEOUT_S = 1.0
# The ws_ping_limit defence's limit: pings a connection may send within a second.
WS_PINGS_PER_S = 50
REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
# The few_threads fault's pool: requests served at once (a comet stream holds one until it ends).
FEW_THREADS = 150
EARLY_SENT_HOLD_S = 0.15
# The slow_first_cycle fault's hold of the first cycle that reaches a subscriber.
SLOW_FIRST_HOLD_S = 0.4
# The slow_above_rate fault's planted knee: GET /perf answers KNEE_DELAY_S late when it
# finds no token in a bucket refilled at KNEE_RATE a second (a server past its capacity,
# planted). See KneeBucket for why a bucket and not a count over the last second.
KNEE_RATE = 150
KNEE_DELAY_S = 0.3
# Traffic begun after KNEE_IDLE_S without arrivals finds KNEE_BURST tokens (a 200 ms
# catch-up burst at the knee's rate); tokens earned under the rate build up to a second's.
KNEE_BURST = 30
KNEE_IDLE_S = 0.5
# The slow_above_subscribers fault's planted push knee: a cycle to more than this many
# subscribers is written KNEE_DELAY_S late (a fan-out past its capacity, planted).
KNEE_SUBSCRIBERS = 50
POSITION = re.compile(r"^[A-Za-z0-9_.-]{1,64}:(0|[1-9][0-9]{0,15})$")
NO_DATA = object()  # a timed emit: its deliveries carry no `data` field
DATA_OPCODES = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
FAULTS = {
    "none": "a correct server",
    "no_date_perf": "GET /perf answers without a Date header",
    "timestamp_shape": "GET /timestamp leaves out offset_ms",
    "no_longpoll_timeout": "a long poll is never answered when its duration passes",
    "traversal": "/files joins the path naively: .., absolute paths and links get out",
    "crash_on_bad_json": "the process exits on malformed JSON",
    "fanout_place": "every delivery says place 1",
    "accept_oversize": "JSON bodies over 64 KiB are accepted",
    "syslog_newline_only": "TCP syslog ignores octet counting",
    "syslog_lax_parse": "syslog parse mode takes any message with a PRI as parsed",
    "no_seq": "deliveries leave out response.event.seq",
    "split_lines": "each comet line is written in two chunks",
    "header_400": "an oversize header section gets 400 instead of 431",
    "sse_no_id": "SSE event messages carry no id line",
    "sse_no_replay": "Last-Event-ID is checked but nothing is replayed",
    "sse_no_heartbeat": "SSE streams get no heartbeats",
    "ws_no_echo": "WebSocket echo messages are not answered",
    "ws_accept_oversize": "WebSocket messages over 64 KiB are accepted",
    "ws_deflate": "permessage-deflate is accepted when offered",
    "ws_version_400": "a wrong Sec-WebSocket-Version gets 400 instead of 426",
    "keep_gone": "subscribers whose client left stay listed and counted",
    "lax_framing": "requests are framed like the servers of issue 13 (tests/reference_framing.py)",
    "overstrict_framing": "legal framings are refused (tests/reference_framing.py)",
    "double_framing": "GET /perf answers with both Content-Length and Transfer-Encoding",
    "nagle_split": "GET /perf writes its head and body apart with Nagle on: the body waits for "
    "the client's delayed ACK of the head (~40 ms)",
    "old_spec_version": "GET /stats says spec_version 1.0, the MAJOR before this one",
    "late_control": "POST /logging, /event/set and /event/clear are served 1 s late",
    "early_sent": "sent is stamped when a cycle starts, and its writes are held 150 ms after",
    "few_threads": "150 requests are served at once, a stream holding its place until it ends; "
    "more wait unanswered, as in a thread pool's queue",
    "slow_first_cycle": "the first cycle that reaches a subscriber is written 400 ms late",
    "slow_above_rate": f"GET /perf answers {KNEE_DELAY_S * 1000:g} ms late past a token bucket "
    f"of {KNEE_RATE} a second (bursts of {KNEE_BURST} after an idle {KNEE_IDLE_S:g} s)",
    "slow_above_subscribers": f"a cycle to more than {KNEE_SUBSCRIBERS} subscribers is written "
    f"{KNEE_DELAY_S * 1000:g} ms late",
    # Not a fault: a defence against slowloris and idle connections (issue 35).
    "header_timeout": f"a request's header section not whole within {HEADER_TIMEOUT_S:g} s "
    "gets 408 and a close",
    # Not a fault: a defence against a WebSocket ping flood (issue 35).
    "ws_ping_limit": f"a WebSocket that sends more than {WS_PINGS_PER_S} pings within a second "
    "is closed with 1008",
    # Not a fault: places numbered in two shares as two workers would (spec §6 "Workers").
    "two_workers": "places count per share of two, and /stats says places are per worker",
    "shares_unsaid": "places count per share of two, and /stats does not say so",
    # TLS (spec §12), on --tls-port:
    "tls11": "TLS 1.0 and 1.1 are accepted (OpenSSL's security level 0)",
    "tls_cbc": "TLS 1.2 suites with CBC and an HMAC are accepted",
    "alpn_h2": "ALPN offers and picks h2, which this server does not speak",
    "no_close_notify": "TLS connections end with a bare TCP close, no close_notify",
    "tls_renegotiation": "a renegotiation started by the client is accepted",
    # Syslog over TLS (spec §15), on --syslog-tls (tests/reference_syslogtls.py):
    **reference_syslogtls.FAULTS,
}
# After a refusal, how long unread input is drained so that the close does not turn into a
# reset that could destroy the answer.
LINGER_S = 1.0
ROUTES = {
    "/perf": ("GET",),
    "/upload": ("POST",),
    "/timestamp": ("GET",),
    "/logging": ("POST",),
    "/stats": ("GET",),
    "/event/set": ("POST",),
    "/event/clear": ("POST",),
    "/push": ("POST",),
    "/sse": ("GET",),
    "/ws": ("GET",),
}


class BadRequest(Exception):
    def __init__(self, status: int, reason: str, extra=()):
        super().__init__(reason)
        self.status, self.reason, self.extra = status, reason, extra


# A clock set this far off (--clock-skew-ms), for every time the server states: its
# /timestamp and its events' stamps, as a host whose clock is wrong would state them.
CLOCK_SKEW_MS = 0


def now_ms() -> int:
    return time.time_ns() // 1_000_000 + CLOCK_SKEW_MS


class Counters:
    def __init__(self, name: str):
        self.name = name
        self.started = time.monotonic()
        self.connections_open = self.connections_total = 0
        self.requests_total = 0
        self.responses_total = self.responses_push = self.responses_timeouts = 0
        self.syslog_received = self.syslog_bytes = self.syslog_tcp = 0
        # Spec §7.1, kept in parse mode only.
        self.syslog_parse = dict.fromkeys(
            ("parsed", "malformed", "rfc3164", "sd_elements", "msg_bytes"), 0
        )
        self.sse = dict.fromkeys(
            ("total", "deliveries", "replayed", "gaps", "heartbeats", "timeouts"), 0
        )
        self.ws = dict.fromkeys(("open", "total", "deliveries", "echoes", "publishes"), 0)


class PushRequest:
    """One subscriber: a long poll, a comet or SSE stream, or a WebSocket subscription."""

    def __init__(self, connection, body: dict, open_count: int, kind: str):
        self.connection = connection
        self.body = body
        self.kind = kind
        self.events = body["events"]
        self.created = now_ms()
        self.start = open_count
        self.done = asyncio.get_running_loop().create_future()
        self.positions: dict[str, int] = {}  # SSE: the newest seq sent per event

    def answer_shape(self, response: dict, open_count: int) -> dict:
        sent = now_ms()
        return {
            "response": response,
            "request": self.body,
            "timings": {"duration": sent - self.created, "sent": sent, "created": self.created},
            "connections": {"start": self.start, "finish": open_count},
        }


class PushHub:
    """The seed 004 Event Manager and Request Manager."""

    def __init__(self, counters: Counters, faults: set[str]):
        self.counters, self.faults = counters, faults
        self.subscribers: dict[str, list[PushRequest]] = {}
        self.open: list[PushRequest] = []
        self.emitters: dict[str, asyncio.Task] = {}
        self.stats: dict[str, dict] = {}
        self.history: dict[str, collections.deque] = {}  # the SSE replay buffer per event
        self.slowed: set[str] = set()  # events whose first cycle slow_first_cycle held

    def entry(self, name: str) -> dict:
        return self.stats.setdefault(
            name,
            {
                "interval_ms": 0,
                "active": False,
                "emits": 0,
                "last_seq": 0,
                "deliveries": 0,
                "last_emit_duration_ms": 0,
                "max_emit_duration_ms": 0,
                "total_emit_duration_ms": 0,
            },
        )

    def last_seq(self, name: str) -> int:
        return self.stats.get(name, {}).get("last_seq", 0)

    def set(self, name: str, interval_ms: int) -> bool:
        replaced = name in self.emitters
        if replaced:
            self.emitters.pop(name).cancel()
        self.entry(name).update(interval_ms=interval_ms, active=True)
        self.emitters[name] = asyncio.create_task(self._emit_loop(name, interval_ms))
        return replaced

    def clear(self, name: str | None) -> list[str]:
        names = sorted(self.emitters) if name is None else [name]
        for each in names:
            self.emitters.pop(each).cancel()
            self.stats[each]["active"] = False
        return names

    async def _emit_loop(self, name: str, interval_ms: int) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due = max(due + interval_ms / 1000, loop.time())
            await asyncio.sleep(due - loop.time())
            self._emit(name)

    def publish(self, name: str, data) -> tuple[int, int]:
        """A publish cycle (spec §11): one emit cycle now; its (seq, total)."""
        self.entry(name)
        return self._emit(name, data)

    def _emit(self, name: str, data=NO_DATA) -> tuple[int, int]:
        entry = self.stats[name]
        entry["emits"] += 1
        entry["last_seq"] += 1
        created = now_ms()
        self.history.setdefault(name, collections.deque(maxlen=REPLAY_BUFFER)).append(
            (entry["last_seq"], created, data)
        )
        snapshot = list(self.subscribers.get(name, []))
        held = []
        # slow_first_cycle: a cold server's first cycle (a ramp's), the later ones prompt.
        hold_s = EARLY_SENT_HOLD_S
        slow_first = snapshot and "slow_first_cycle" in self.faults and name not in self.slowed
        if slow_first:
            self.slowed.add(name)
            hold_s = SLOW_FIRST_HOLD_S
        crowded = "slow_above_subscribers" in self.faults and len(snapshot) > KNEE_SUBSCRIBERS
        if crowded:
            hold_s = KNEE_DELAY_S
        for share in self._shares(snapshot):
            for place, request in enumerate(share, 1):
                shown_place = 1 if "fanout_place" in self.faults else place
                # `sent` is stamped immediately before the write that hands it to the kernel.
                event = self.event(name, entry["last_seq"], created, data, len(share), shown_place)
                if "early_sent" in self.faults or slow_first or crowded:
                    held.append((request, {"event": event}))
                else:
                    self._deliver(request, {"event": event})
        if held:
            # Stamped now, written later: the stamps claim a delay the clients never see.
            asyncio.get_running_loop().call_later(hold_s, self._deliver_all, held)
        duration = now_ms() - created
        entry["deliveries"] += len(snapshot)
        entry["last_emit_duration_ms"] = duration
        entry["max_emit_duration_ms"] = max(entry["max_emit_duration_ms"], duration)
        entry["total_emit_duration_ms"] += duration
        return entry["last_seq"], len(snapshot)

    def _deliver_all(self, held: list) -> None:
        for request, response in held:
            self._deliver(request, response)

    def _shares(self, snapshot: list) -> list[list]:
        """The snapshot as one share, or dealt into two as round-robin would deal them."""
        if self.faults & {"two_workers", "shares_unsaid"}:
            return [share for share in (snapshot[0::2], snapshot[1::2]) if share]
        return [snapshot]

    def event(self, name: str, seq: int, created: int, data, total: int, place: int) -> dict:
        sent = created if "early_sent" in self.faults else now_ms()
        event = {
            "name": name,
            "seq": seq,
            "timings": {"duration": sent - created, "sent": sent, "created": created},
            "connections": {"total": total, "place": place},
        }
        if "no_seq" in self.faults:
            del event["seq"]
        if data is not NO_DATA:
            event["data"] = data
        return event

    def _deliver(self, request: PushRequest, response: dict) -> None:
        document = request.answer_shape(response, len(self.open))
        if request.kind == "longpoll":
            self.counters.responses_push += 1
            self.leave(request)
            request.connection.send_json(200, document)
            request.done.set_result(None)
        elif request.kind == "comet":
            self.counters.responses_push += 1
            request.connection.send_line(document)
        elif request.kind == "sse":
            self.counters.sse["deliveries"] += 1
            request.connection.send_sse_event(request, document)
        else:
            self.counters.ws["deliveries"] += 1
            request.connection.ws_send(document)

    def replay(self, request: PushRequest, name: str, after: int) -> None:
        """Sends an SSE stream what it missed of `name` after seq `after` (spec §10)."""
        newest = self.last_seq(name)
        buffered = [entry for entry in self.history.get(name, ()) if entry[0] > after]
        next_seq = buffered[0][0] if buffered else newest + 1
        if after == newest or "sse_no_replay" in self.faults:
            return
        if next_seq > after + 1 or after > newest:
            request.positions[name] = next_seq - 1
            self.counters.sse["gaps"] += 1
            gap = {"gap": {"name": name, "after": after, "next": next_seq}}
            request.connection.send_sse("gap", gap, request)
        for seq, created, data in buffered:
            event = {**self.event(name, seq, created, data, 1, 1), "replayed": True}
            request.positions[name] = seq
            self.counters.sse["replayed"] += 1
            document = request.answer_shape({"event": event}, len(self.open))
            request.connection.send_sse_event(request, document)

    @property
    def open_push(self) -> int:
        return sum(1 for request in self.open if request.kind in ("longpoll", "comet"))

    def register(self, connection, body: dict, kind: str) -> PushRequest:
        request = PushRequest(connection, body, len(self.open) + 1, kind)
        self.open.append(request)
        for name in request.events:
            self.subscribers.setdefault(name, []).append(request)
        return request

    def leave(self, request: PushRequest) -> None:
        if request in self.open:
            self.open.remove(request)
        for name in request.events:
            listed = self.subscribers.get(name, [])
            if request in listed:
                listed.remove(request)

    def time_out(self, request: PushRequest) -> None:
        if request.done.done():
            return
        document = request.answer_shape({"timeout": True}, len(self.open))
        self.leave(request)
        if request.kind == "longpoll":
            self.counters.responses_timeouts += 1
            request.connection.send_json(200, document)
        elif request.kind == "comet":
            self.counters.responses_timeouts += 1
            request.connection.send_line(document)
            request.connection.end_body()
        else:
            self.counters.sse["timeouts"] += 1
            request.connection.send_sse("timeout", document)
            request.connection.end_body()
        request.done.set_result(None)


class HttpConnection:
    """One client connection: h11 parsing, routing, and the answers."""

    def __init__(self, server: "ReferenceServer", reader, writer):
        self.server, self.reader, self.writer = server, reader, writer
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.framer = Framer(
            lax=server.has_fault("lax_framing"), overstrict=server.has_fault("overstrict_framing")
        )
        self.peer = writer.get_extra_info("peername")[0]

    # -- writing -----------------------------------------------------------------------
    def send_head(self, status: int, content_type: str, length: int | None, extra=()) -> None:
        headers = [("Content-Type", content_type), *extra]
        if not (self.server.has_fault("no_date_perf") and self.target == "/perf"):
            headers.append(("Date", email.utils.formatdate(usegmt=True)))
        if length is not None:
            headers.append(("Content-Length", str(length)))
        self.server.counters.responses_total += 1
        self.writer.write(self.h11.send(h11.Response(status_code=status, headers=headers)))

    def send(self, status: int, body: bytes, content_type: str, extra=()) -> None:
        if self.server.has_fault("double_framing") and self.target == "/perf" and status == 200:
            return self.send_double_framed(body, content_type)
        if self.server.has_fault("nagle_split") and self.target == "/perf":
            self.nagle_on()
        self.send_head(status, content_type, len(body), extra)
        self.writer.write(self.h11.send(h11.Data(data=body)) if body else b"")
        self.writer.write(self.h11.send(h11.EndOfMessage()))

    def nagle_on(self) -> None:
        """The nagle_split fault: asyncio's TCP_NODELAY off, so that the body's write, a small
        segment after the head's still unacked one, is held until the client ACKs the head;
        a client waiting for the whole answer sends nothing before, and delays that ACK."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)

    def send_double_framed(self, body: bytes, content_type: str) -> None:
        """Content-Length and chunked at once, written by hand: h11 would never send both."""
        self.h11.send(h11.Response(status_code=200, headers=[("Content-Length", str(len(body)))]))
        self.h11.send(h11.Data(data=body))
        self.h11.send(h11.EndOfMessage())
        self.server.counters.responses_total += 1
        self.writer.write(
            f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
            f"Date: {email.utils.formatdate(usegmt=True)}\r\nContent-Length: {len(body)}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n".encode()
            + body
            + b"\r\n0\r\n\r\n"
        )

    def send_json(self, status: int, document) -> None:
        self.send(status, json.dumps(document).encode(), "application/json")

    def send_error(self, status: int, reason: str, extra=()) -> None:
        self.send(status, json.dumps({"error": reason}).encode(), "application/json", extra)

    def send_line(self, document) -> None:
        line = json.dumps(document).encode() + b"\n"
        pieces = [line[:10], line[10:]] if self.server.has_fault("split_lines") else [line]
        for piece in pieces:
            self.writer.write(self.h11.send(h11.Data(data=piece)))

    def end_body(self) -> None:
        self.writer.write(self.h11.send(h11.EndOfMessage()))

    def send_sse(self, event: str | None, document, request: PushRequest | None = None) -> None:
        """One SSE message: its type, data, and the stream's position as its id."""
        lines = [f"event: {event}"] if event else []
        if request is not None:
            lines.append("id: " + ",".join(f"{n}:{request.positions[n]}" for n in request.events))
        if document is not None:
            lines.append("data: " + json.dumps(document))
        self.writer.write(self.h11.send(h11.Data(data=("\n".join(lines) + "\n\n").encode())))

    def send_sse_event(self, request: PushRequest, document: dict) -> None:
        event = document["response"]["event"]
        request.positions[event["name"]] = event.get("seq", 0)
        with_id = None if self.server.has_fault("sse_no_id") else request
        self.send_sse(None, document, with_id)

    # -- reading -----------------------------------------------------------------------
    async def next_event(self):
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.framer.error:
                raise self.framer.error
            data = await self.reader.read(65536)
            if not data:
                self.h11.receive_data(b"")  # the client closed
            elif framed := self.framer.feed(data):
                self.h11.receive_data(framed)

    async def read_body(self, limit: int | None, sink=None) -> bytes:
        """The request body; over `limit` bytes is a 413. `sink` receives it piece by piece."""
        parts, size = [], 0
        while True:
            event = await self.next_event()
            if isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            if not isinstance(event, h11.Data):
                raise BadRequest(400, "incomplete request body")
            size += len(event.data)
            if limit is not None and size > limit:
                raise BadRequest(413, "request body over 64 kib")
            if sink:
                sink(event.data)
            else:
                parts.append(event.data)

    async def read_json(self) -> dict:
        declared = dict(self.request.headers).get(b"content-length")
        limit = None if self.server.has_fault("accept_oversize") else MAX_JSON_BODY
        if declared and limit is not None and int(declared) > limit:
            raise BadRequest(413, "request body over 64 kib")
        body = await self.read_body(limit)
        if not body.strip():
            return {}
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            if self.server.has_fault("crash_on_bad_json"):
                os._exit(3)
            raise BadRequest(400, "malformed json") from None
        if not isinstance(document, dict):
            raise BadRequest(400, "expected a json object")
        return document

    # -- the connection's life ---------------------------------------------------------
    async def serve(self) -> None:
        counters = self.server.counters
        counters.connections_open += 1
        counters.connections_total += 1
        try:
            while await self.serve_one():
                self.h11.start_next_cycle()
        except FramingError as refusal:
            await self.refuse(refusal)
        except (ConnectionError, h11.LocalProtocolError):
            pass
        finally:
            counters.connections_open -= 1
            if self.server.has_fault("no_close_notify"):
                self.writer.transport.abort()  # the socket closed under TLS: no alert
            self.writer.close()

    async def serve_one(self) -> bool:
        """Answers one request; False when the connection is to be closed."""
        limit = HEADER_TIMEOUT_S if self.server.has_fault("header_timeout") else None
        try:
            async with asyncio.timeout(limit):
                event = await self.next_event()
        except TimeoutError:
            self.writer.write(REQUEST_TIMEOUT)
            return False
        except h11.RemoteProtocolError as error:
            if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                self.target = ""
                self.send_error(error.error_status_hint, "malformed request")
            return False
        if not isinstance(event, h11.Request):
            return False
        self.request = event
        close_after = self.framer.close_after.popleft() if self.framer.close_after else False
        self.server.counters.requests_total += 1
        if sum(len(name) + len(value) + 4 for name, value in event.headers) > MAX_HEADER_BYTES:
            self.target = ""
            status = 400 if self.server.has_fault("header_400") else 431
            self.send_error(status, "header section over 64 kib")
            return False
        self.target = event.target.decode("latin-1").split("?")[0]
        if self.server.logging:
            print(f"{event.method.decode()} {event.target.decode('latin-1')}", file=sys.stderr)
        try:
            async with self.server.request_thread:
                await self.route(event.method.decode(), event.target.decode("latin-1"))
        except BadRequest as bad:
            self.send_error(bad.status, bad.reason, bad.extra)
            if self.h11.their_state is not h11.DONE:
                return False
        except h11.RemoteProtocolError:
            self.send_error(400, "malformed request")
            return False
        await self.writer.drain()
        done = self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE
        return done and not close_after

    async def refuse(self, refusal: FramingError) -> None:
        """Answers a framing refusal (unless an answer has begun), then lingers and closes."""
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self.server.counters.responses_total += 1
            self.writer.write(refusal_response(refusal))
        await self.writer.drain()
        self.writer.write_eof()
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(LINGER_S):
                while await self.reader.read(65536):
                    pass

    async def route(self, method: str, target: str) -> None:
        path, _, query = target.partition("?")
        if path.startswith("/files/"):
            return await self.check_method(method, ("GET",), self.files(path))
        if path not in ROUTES:
            await self.read_body(MAX_JSON_BODY)
            raise BadRequest(404, "not found")
        if path in ("/logging", "/event/set", "/event/clear") and not self.peer.startswith("127."):
            raise BadRequest(403, "control endpoints answer loopback clients only")
        handler = getattr(self, path.strip("/").replace("/", "_"))
        return await self.check_method(method, ROUTES[path], handler(query))

    async def check_method(self, method: str, allowed, handler) -> None:
        if method not in allowed:
            handler.close()
            await self.read_body(MAX_JSON_BODY)
            self.send_error(405, "method not allowed", [("Allow", ", ".join(allowed))])
            return
        await handler

    # -- endpoints ---------------------------------------------------------------------
    async def perf(self, query: str) -> None:
        await self.read_body(0)
        if self.server.has_fault("slow_above_rate") and self.server.perf_rate.over():
            await asyncio.sleep(KNEE_DELAY_S)
        self.send(200, PERF_BODY, "text/plain")

    async def upload(self, query: str) -> None:
        digest, size = hashlib.sha256(), 0

        def sink(data: bytes) -> None:
            nonlocal size
            digest.update(data)
            size += len(data)

        await self.read_body(None, sink)
        self.send_json(200, {"bytes": size, "sha256": digest.hexdigest()})

    async def timestamp(self, query: str) -> None:
        await self.read_body(0)
        values = urllib.parse.parse_qs(query).get("client")
        if values and not values[0].isdigit():
            raise BadRequest(400, "client is not a non-negative integer")
        server = now_ms()
        client = int(values[0]) if values else None
        answer = {
            "server": server,
            "client": client,
            "offset_ms": None if client is None else server - client,
        }
        if self.server.has_fault("timestamp_shape"):
            del answer["offset_ms"]
        self.send_json(200, answer)

    async def late(self) -> None:
        """The late_control fault: a control call served a second late, as by a server whose
        request threads are all held."""
        if self.server.has_fault("late_control"):
            await asyncio.sleep(LATE_CONTROL_S)

    async def logging(self, query: str) -> None:
        await self.late()
        enabled = (await self.read_json()).get("enabled")
        if not isinstance(enabled, bool):
            raise BadRequest(400, "enabled must be true or false")
        self.server.logging = enabled
        self.send_json(200, {"enabled": enabled})

    async def stats(self, query: str) -> None:
        await self.read_body(0)
        self.send_json(200, self.server.stats_document())

    async def event_set(self, query: str) -> None:
        await self.late()
        body = await self.read_json()
        name, interval = body.get("name"), body.get("interval_ms")
        if not isinstance(name, str) or not EVENT_NAME.match(name):
            raise BadRequest(400, "bad event name")
        if not is_int(interval) or not 10 <= interval <= 3_600_000:
            raise BadRequest(400, "interval_ms must be an integer from 10 to 3600000")
        replaced = self.server.hub.set(name, interval)
        self.send_json(200, {"name": name, "interval_ms": interval, "replaced": replaced})

    async def event_clear(self, query: str) -> None:
        await self.late()
        name = (await self.read_json()).get("name")
        if name is not None and name not in self.server.hub.emitters:
            raise BadRequest(404, "unknown event")
        self.send_json(200, {"cleared": self.server.hub.clear(name)})

    async def push(self, query: str) -> None:
        body = validate_push(await self.read_json())
        hub = self.server.hub
        request = hub.register(self, body, body["type"])
        loop = asyncio.get_running_loop()
        duration = body.get("duration_ms")
        never = body["type"] == "longpoll" and self.server.has_fault("no_longpoll_timeout")
        timer = (
            None
            if duration is None or never
            else loop.call_later(duration / 1000, hub.time_out, request)
        )
        if body["type"] == "comet":
            self.send_head(200, "application/x-ndjson", None)
        try:
            await self.hold(request)
        finally:
            if timer:
                timer.cancel()

    async def sse(self, query: str) -> None:
        await self.read_body(0)
        body = sse_request(query)
        named = parse_position(dict(self.request.headers).get(b"last-event-id", b""))
        hub = self.server.hub
        self.send_head(200, "text/event-stream", None, [("Cache-Control", "no-cache")])
        self.server.counters.sse["total"] += 1
        request = hub.register(self, body, "sse")
        request.positions = {name: named.get(name, hub.last_seq(name)) for name in request.events}
        for name in request.events:
            if name in named:
                hub.replay(request, name, named[name])
        self.send_sse(None, None, request)  # the opening message: the position, no data
        loop = asyncio.get_running_loop()
        duration = body.get("duration_ms")
        timer = duration and loop.call_later(duration / 1000, hub.time_out, request)
        beats = asyncio.ensure_future(self.heartbeats(request, body.get("heartbeat_ms")))
        try:
            await self.hold(request)
        finally:
            beats.cancel()
            if timer:
                timer.cancel()

    async def heartbeats(self, request: PushRequest, interval_ms: int | None) -> None:
        interval_ms = DEFAULT_HEARTBEAT_MS if interval_ms is None else interval_ms
        if not interval_ms or self.server.has_fault("sse_no_heartbeat"):
            return
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += interval_ms / 1000
            await asyncio.sleep(due - loop.time())
            if request.done.done():
                return
            self.writer.write(self.h11.send(h11.Data(data=b": heartbeat\n\n")))
            self.server.counters.sse["heartbeats"] += 1

    async def hold(self, request: PushRequest) -> None:
        """Waits until the request is done or its client leaves."""
        closed = asyncio.ensure_future(self.reader.read(1))
        await asyncio.wait([request.done, closed], return_when=asyncio.FIRST_COMPLETED)
        if not request.done.done():
            if not self.server.has_fault("keep_gone"):
                self.server.hub.leave(request)
            raise ConnectionError("the push client went away")
        await self.stop_watching(closed)

    async def ws(self, query: str) -> None:
        await self.read_body(0)
        headers = dict(self.request.headers)
        accept = check_upgrade(headers, self.server.has_fault("ws_version_400"))
        answer = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", accept),
        ]
        offer = headers.get(b"sec-websocket-extensions", b"").decode("latin-1")
        extension = None
        if offer and self.server.has_fault("ws_deflate"):
            params = dict(parse_extension(offer)).get("permessage-deflate", [])
            accepted, extension = ServerPerMessageDeflateFactory().process_request_params(
                params, []
            )
            answer.append(
                ("Sec-WebSocket-Extensions", build_extension([(extension.name, accepted)]))
            )
        self.writer.write(self.h11.send(h11.InformationalResponse(status_code=101, headers=answer)))
        self.server.counters.responses_total += 1
        await WebSocketSession(self, extension).run(self.h11.trailing_data[0])

    async def stop_watching(self, closed: asyncio.Future) -> None:
        """Ends the disconnect watch; a byte it read belongs to the next request."""
        closed.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            early = await closed
            self.h11.receive_data(early)

    async def files(self, path: str) -> None:
        await self.read_body(0)
        relative = urllib.parse.unquote(path[len("/files/") :])
        root = self.server.docroot
        if self.server.has_fault("traversal"):
            target = Path(os.path.join(root, relative))
        else:
            target = safe_path(root, relative)
        if not target.is_file():
            raise BadRequest(404, "not found")
        self.send(200, target.read_bytes(), "application/octet-stream")


def refusal_response(refusal: FramingError) -> bytes:
    """The answer to a refused framing, written by hand: h11 cannot answer a request head
    it never saw."""
    body = json.dumps({"error": refusal.reason}).encode()
    head = (
        f"HTTP/1.1 {refusal.status} {HTTPStatus(refusal.status).phrase}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_push(body: dict) -> dict:
    kind, events, duration = body.get("type"), body.get("events"), body.get("duration_ms")
    if kind not in ("longpoll", "comet"):
        raise BadRequest(400, "type must be longpoll or comet")
    if not isinstance(events, list) or len(events) > 16:
        raise BadRequest(400, "events must be a list of at most 16 names")
    if not all(isinstance(name, str) and EVENT_NAME.match(name) for name in events):
        raise BadRequest(400, "bad event name")
    if duration is None and kind == "longpoll":
        raise BadRequest(400, "a long poll needs duration_ms")
    if duration is not None and (not is_int(duration) or not 1 <= duration <= 3_600_000):
        raise BadRequest(400, "duration_ms must be an integer from 1 to 3600000")
    return body


def check_upgrade(headers: dict[bytes, bytes], version_400: bool) -> str:
    """The Sec-WebSocket-Accept of a valid upgrade (spec §11); 400 or 426 otherwise."""
    if headers.get(b"upgrade", b"").lower() != b"websocket":
        raise BadRequest(400, "a websocket upgrade is required")
    if b"upgrade" not in {t.strip().lower() for t in headers.get(b"connection", b"").split(b",")}:
        raise BadRequest(400, "connection: upgrade is required")
    version = headers.get(b"sec-websocket-version")
    if version is None:
        raise BadRequest(400, "sec-websocket-version is required")
    if version != b"13":
        status = 400 if version_400 else 426
        raise BadRequest(status, "sec-websocket-version 13 only", [("Sec-WebSocket-Version", "13")])
    key = headers.get(b"sec-websocket-key", b"")
    try:
        raw = base64.b64decode(key, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 16:
        raise BadRequest(400, "sec-websocket-key is not 16 bytes in base64")
    return accept_key(key.decode())


class WebSocketSession:
    """One upgraded connection (spec §11). websockets' sans-I/O protocol does the framing
    (pongs, the close handshake, 1002 and 1009); the messages and 1003/1007/1008 are ours."""

    def __init__(self, connection: HttpConnection, extension):
        self.connection = connection
        self.server = connection.server
        limit = None if self.server.has_fault("ws_accept_oversize") else MAX_WS_MESSAGE
        self.protocol = Protocol(Side.SERVER, state=State.OPEN, max_size=limit)
        self.protocol.extensions = [extension] if extension else []
        self.fragments: list[Frame] = []
        self.subscription: PushRequest | None = None
        self.pings: collections.deque[float] = collections.deque()

    async def run(self, data: bytes) -> None:
        counters = self.server.counters.ws
        counters["open"] += 1
        counters["total"] += 1
        try:
            if data:
                self.protocol.receive_data(data)
            while True:
                for frame in self.protocol.events_received():
                    self.take(frame)
                if self.flush():
                    break
                data = await self.connection.reader.read(65536)
                if not data:
                    self.protocol.receive_eof()
                    break
                self.protocol.receive_data(data)
            await self.linger()
        finally:
            counters["open"] -= 1
            if self.subscription and not self.server.has_fault("keep_gone"):
                self.server.hub.leave(self.subscription)

    def flush(self) -> bool:
        """Writes what the protocol has to send; True once it asks to close TCP."""
        eof = False
        for data in self.protocol.data_to_send():
            if data:
                self.connection.writer.write(data)
            eof = eof or not data
        return eof

    async def linger(self) -> None:
        """Reads what the client still sends (its close frame) before TCP closes: closing
        with unread bytes resets the connection, which can lose our close frame."""
        loop = asyncio.get_running_loop()
        end = loop.time() + 2
        with contextlib.suppress(TimeoutError, ConnectionError):
            while loop.time() < end and await asyncio.wait_for(
                self.connection.reader.read(65536), 0.2
            ):
                pass

    def ws_send(self, document) -> None:
        if self.protocol.state is State.OPEN:
            self.protocol.send_text(json.dumps(document).encode())
            self.flush()

    def take(self, frame: Frame) -> None:
        if frame.opcode is Opcode.PING and self.server.has_fault("ws_ping_limit"):
            return self.limit_pings()
        if self.protocol.state is not State.OPEN or frame.opcode not in DATA_OPCODES:
            return  # pings, pongs and closes are the protocol's
        self.fragments.append(frame)
        if not frame.fin:
            return
        opcode, payload = self.fragments[0].opcode, b"".join(f.data for f in self.fragments)
        self.fragments = []
        if opcode is Opcode.BINARY:
            return self.protocol.fail(1003, "binary messages are not accepted")
        try:
            message = json.loads(payload.decode("utf-8"))
        except UnicodeDecodeError:
            return self.protocol.fail(1007, "invalid utf-8")
        except json.JSONDecodeError:
            return self.protocol.fail(1008, "a message is one json object")
        kind = message.get("type") if isinstance(message, dict) else None
        handler = {"echo": self.echo, "subscribe": self.subscribe, "publish": self.publish}
        problem = handler[kind](message) if kind in handler else "unknown message type"
        if problem:
            self.protocol.fail(1008, problem)

    def limit_pings(self) -> None:
        """The ws_ping_limit defence: a ping past WS_PINGS_PER_S within a second closes the
        connection with 1008 (the protocol has answered it already)."""
        now = time.monotonic()
        self.pings.append(now)
        while now - self.pings[0] >= 1.0:
            self.pings.popleft()
        if len(self.pings) > WS_PINGS_PER_S and self.protocol.state is State.OPEN:
            self.protocol.fail(1008, f"more than {WS_PINGS_PER_S} pings a second")

    def echo(self, message: dict) -> None:
        if not self.server.has_fault("ws_no_echo"):
            self.server.counters.ws["echoes"] += 1
            self.ws_send({"type": "echo", "data": message.get("data")})

    def subscribe(self, message: dict) -> str | None:
        events = message.get("events")
        if self.subscription:
            return "subscribed already"
        if not (
            isinstance(events, list)
            and 1 <= len(events) <= MAX_EVENTS
            and len(set(map(str, events))) == len(events)
            and all(isinstance(name, str) and EVENT_NAME.match(name) for name in events)
        ):
            return "events must be 1 to 16 distinct event names"
        self.ws_send({"type": "subscribed", "events": events})
        self.subscription = self.server.hub.register(self, message, "websocket")
        return None

    def publish(self, message: dict) -> str | None:
        name = message.get("event")
        if not isinstance(name, str) or not EVENT_NAME.match(name):
            return "publish needs an event name"
        self.server.counters.ws["publishes"] += 1
        seq, total = self.server.hub.publish(name, message.get("data"))
        self.ws_send({"type": "published", "event": name, "seq": seq, "total": total})
        return None


def sse_request(query: str) -> dict:
    """The `request` of an SSE stream's deliveries, from its query (spec §10); 400 if bad."""
    try:
        # Empty parts (`a=1&&b=2`) are ignored (spec §10); a part without `=` is not a pair.
        parts = [part for part in query.split("&") if part]
        pairs = urllib.parse.parse_qsl(
            "&".join(parts), keep_blank_values=True, strict_parsing=bool(parts)
        )
    except ValueError:
        raise BadRequest(400, "malformed query") from None
    params = dict(pairs)
    if len(params) != len(pairs):
        raise BadRequest(400, "a parameter is given twice")
    names = params.get("events", "").split(",")
    if not all(EVENT_NAME.match(name) for name in names) or len(set(names)) != len(names):
        raise BadRequest(400, "events must be distinct event names")
    if len(names) > MAX_EVENTS:
        raise BadRequest(400, "at most 16 events")
    body = {"type": "sse", "events": names}
    for key, low in (("heartbeat_ms", 10), ("duration_ms", 1)):
        if key in params:
            value = int(params[key]) if re.fullmatch(r"[0-9]{1,9}", params[key]) else -1
            if not (low <= value <= 3_600_000 or (key == "heartbeat_ms" and value == 0)):
                raise BadRequest(400, f"{key} is out of range")
            body[key] = value
    return body


def parse_position(header: bytes) -> dict[str, int]:
    """A Last-Event-ID in the `name:seq,...` form of spec §10; 400 if malformed."""
    if not header:
        return {}
    pairs = header.decode("latin-1").split(",")
    if not all(POSITION.match(pair) for pair in pairs):
        raise BadRequest(400, "malformed last-event-id")
    named = {name: int(seq) for name, seq in (pair.split(":") for pair in pairs)}
    if len(named) != len(pairs) or max(named.values()) > 2**53 - 1:
        raise BadRequest(400, "malformed last-event-id")
    return named


def safe_path(root: Path, relative: str) -> Path:
    """The file below `root`, or a 403 for anything that could leave it."""
    if (
        relative.startswith("/")
        or "\\" in relative
        or "\x00" in relative
        or ".." in relative.split("/")
    ):
        raise BadRequest(403, "path outside the document root")
    target = (root / relative).resolve()
    if not target.is_relative_to(root.resolve()):
        raise BadRequest(403, "path outside the document root")
    return target


class SyslogTcp(asyncio.Protocol):
    def __init__(self, server: "ReferenceServer"):
        self.server, self.buffer = server, b""

    def connection_made(self, transport) -> None:
        self.server.counters.syslog_tcp += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.buffer and (message := self.next_message()) is not None:
            if message:
                self.server.count_syslog(message)

    def next_message(self) -> bytes | None:
        """The next complete message (b"" for an empty line), or None if more must come."""
        octets = self.buffer[:1] in b"123456789" and not self.server.has_fault(
            "syslog_newline_only"
        )
        if octets:
            space = self.buffer.find(b" ")
            if space < 0:
                return None
            end = space + 1 + int(self.buffer[:space])
            if len(self.buffer) < end:
                return None
            message, self.buffer = self.buffer[space + 1 : end], self.buffer[end:]
            return message
        newline = self.buffer.find(b"\n")
        if newline < 0:
            return None
        message, self.buffer = self.buffer[:newline], self.buffer[newline + 1 :]
        return message


class SyslogUdp(asyncio.DatagramProtocol):
    def __init__(self, server: "ReferenceServer"):
        self.server = server

    def datagram_received(self, data: bytes, addr) -> None:
        message = data[:-1] if data.endswith(b"\n") else data
        if message:
            self.server.count_syslog(message)


class KneeBucket:
    """The slow_above_rate fault's planted capacity: a token bucket refilled at KNEE_RATE a
    second; each arrival takes a token, and one that finds none is over the knee.

    Not a count over the last second: the engine paces open-loop and catches up after a
    stall, so a 35 ms stall of a noisy machine at 145 a second put more than 150 into one
    second, and CI's capacity searches found 135 and 140 for a knee at 150. A bucket earns
    during the stall what the catch-up spends, as long as the rate stays under the knee.
    Where a stall can still cross it is a step's start: the engine's schedule runs while
    its connections open, and a slow start goes out as one burst (CI once saw a gRPC step at
    140 a second fail with 15 tokens, likely so). So that a search step still crosses the knee
    within the step above it, traffic begun after an idle KNEE_IDLE_S (the search settles
    1 s before each step) starts with KNEE_BURST tokens, and the debt an overload runs up
    is bounded as well, so that the server recovers within KNEE_BURST / KNEE_RATE of the
    load falling back under it."""

    def __init__(self):
        self.tokens, self.last = float(KNEE_BURST), -KNEE_IDLE_S

    def over(self) -> bool:
        now = time.monotonic()
        if now - self.last >= KNEE_IDLE_S:
            self.tokens = KNEE_BURST
        else:
            self.tokens = min(KNEE_RATE, self.tokens + (now - self.last) * KNEE_RATE)
        self.last = now
        self.tokens = max(-KNEE_BURST, self.tokens - 1)
        return self.tokens < 0


class ReferenceServer:
    def __init__(
        self,
        name: str,
        docroot: Path,
        faults: set[str],
        syslog_mode: str = "count",
        threads: int = FEW_THREADS,
    ):
        self.counters = Counters(name)
        self.syslog_mode = syslog_mode
        self.docroot = docroot
        self.faults = faults
        self.logging = False
        self.hub = PushHub(self.counters, faults)
        self.perf_rate = KneeBucket()
        few = "few_threads" in faults
        self.request_thread = asyncio.Semaphore(threads) if few else contextlib.nullcontext()

    def has_fault(self, fault: str) -> bool:
        return fault in self.faults

    def count_syslog(self, message: bytes) -> None:
        self.counters.syslog_received += 1
        self.counters.syslog_bytes += len(message)
        if self.syslog_mode == "parse":
            self.parse_syslog(message)

    def parse_syslog(self, message: bytes) -> None:
        counts = self.counters.syslog_parse
        parsed = reference_syslog.parse(message)
        if parsed is None and self.has_fault("syslog_lax_parse") and message.startswith(b"<"):
            # What a server that only looks for a PRI would count: every message parsed.
            parsed = reference_syslog.Parsed(0, None, None, None, None, None, 0, b"")
        if parsed is None:
            counts["malformed"] += 1
            return
        counts["parsed"] += 1
        counts["rfc3164"] += parsed.rfc3164
        counts["sd_elements"] += parsed.sd_elements
        counts["msg_bytes"] += len(parsed.msg)

    def stats_document(self) -> dict:
        c = self.counters
        workers = {"count": 2, "places": "per_worker"} if self.has_fault("two_workers") else {}
        return {
            **({"workers": workers} if workers else {}),
            "spec_version": "1.0" if self.has_fault("old_spec_version") else SPEC_VERSION,
            "server": c.name,
            "uptime_ms": int((time.monotonic() - c.started) * 1000),
            "connections": {"open": c.connections_open, "total": c.connections_total},
            "requests": {"total": c.requests_total, "open_push": self.hub.open_push},
            "responses": {
                "total": c.responses_total,
                "push": c.responses_push,
                "timeouts": c.responses_timeouts,
            },
            "events": self.hub.stats,
            "syslog": {
                "received": c.syslog_received,
                "bytes": c.syslog_bytes,
                "tcp_connections": c.syslog_tcp,
                "mode": self.syslog_mode,
                **c.syslog_parse,
            },
            "sse": {"open": self.open_count("sse"), **c.sse},
            "websocket": {**c.ws, "subscribers": self.open_count("websocket")},
        }

    def open_count(self, kind: str) -> int:
        return sum(1 for request in self.hub.open if request.kind == kind)

    def tls_context(self, cert: str, key: str) -> ssl.SSLContext:
        """TLS 1.2 and 1.3, AEAD suites, ALPN http/1.1, as spec §12 asks; or a fault."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
        if self.has_fault("tls11"):
            context.minimum_version = ssl.TLSVersion.TLSv1
            context.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20:ECDHE+AES:@SECLEVEL=0")
        if self.has_fault("tls_cbc"):
            context.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20:ECDHE+AES")
        if self.has_fault("tls_renegotiation"):
            context.options |= OP_ALLOW_CLIENT_RENEGOTIATION
        context.set_alpn_protocols(
            ["h2", "http/1.1"] if self.has_fault("alpn_h2") else ["http/1.1"]
        )
        return context

    async def run(
        self, port: int, syslog_port: int | None, host: str = LOOPBACK, tls=None, syslog_tls=None
    ) -> None:
        """`tls`, `syslog_tls`: (port, cert file, key file) to serve HTTPS or RFC 5425 syslog
        on as well, or None."""

        async def on_connection(reader, writer):
            await HttpConnection(self, reader, writer).serve()

        # Loopback always; a lab or cluster host's address too, when given one ({host}).
        hosts = [LOOPBACK] if host == LOOPBACK else [LOOPBACK, host]
        http = await asyncio.start_server(on_connection, hosts, port)
        if tls:
            context = self.tls_context(tls[1], tls[2])
            secure = await asyncio.start_server(on_connection, hosts, tls[0], ssl=context)
            await secure.start_serving()
        if syslog_tls:
            await reference_syslogtls.listen(self, hosts, *syslog_tls)
        if syslog_port:
            loop = asyncio.get_running_loop()
            for address in hosts:
                await loop.create_server(lambda: SyslogTcp(self), address, syslog_port)
                await loop.create_datagram_endpoint(
                    lambda: SyslogUdp(self), local_addr=(address, syslog_port)
                )
        async with http:
            await http.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--syslog-port", type=int)
    parser.add_argument("--docroot", type=Path, required=True)
    parser.add_argument("--name", default="reference")
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS))
    parser.add_argument("--crash-at-start", action="store_true")
    parser.add_argument("--syslog-mode", choices=("count", "parse"), default="count")
    parser.add_argument("--host", default=LOOPBACK, help="an address to listen on besides loopback")
    parser.add_argument(
        "--clock-skew-ms", type=int, default=0, help="state every time this far off (ms)"
    )
    parser.add_argument(
        "--die-after", type=float, default=0.0, help="SIGKILL itself after this many seconds"
    )
    parser.add_argument(
        "--threads", type=int, default=FEW_THREADS, help="the few_threads fault's pool size"
    )
    parser.add_argument("--tls", nargs=3, metavar=("PORT", "CERT", "KEY"), help="serve HTTPS too")
    parser.add_argument(
        "--syslog-tls", nargs=3, metavar=("PORT", "CERT", "KEY"), help="serve RFC 5425 syslog too"
    )
    args = parser.parse_args()
    if args.die_after > 0:
        # A crash mid-test, as an out-of-memory kill would look: no goodbye, no cleanup.
        killer = threading.Timer(args.die_after, os.kill, (os.getpid(), signal.SIGKILL))
        killer.daemon = True
        killer.start()
    if args.crash_at_start:
        print("reference server: crashing at start as asked", file=sys.stderr)
        sys.exit(7)
    global CLOCK_SKEW_MS
    CLOCK_SKEW_MS = args.clock_skew_ms
    faults = set(args.fault) - {"none"}
    server = ReferenceServer(args.name, args.docroot, faults, args.syslog_mode, args.threads)
    with contextlib.suppress(KeyboardInterrupt):
        tls, syslog_tls = (
            (int(given[0]), given[1], given[2]) if given else None
            for given in (args.tls, args.syslog_tls)
        )
        asyncio.run(server.run(args.port, args.syslog_port, args.host, tls, syslog_tls))


if __name__ == "__main__":
    main()
