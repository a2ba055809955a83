"""The engine's abuse behaviours (issue 35) against real servers, their bytes read on the wire.

Each test puts a relay between the real engine binary and a real server (the reference
server, tests/reference_server.py, or its HTTP/2 sibling, tests/reference_h2.py): the relay
passes every byte on and records what the engine wrote on each connection, so that the test
asserts the attack as the server received it, and the engine's own count of its cost
(connections, streams, bytes) against the wire's."""

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import hpack
import pytest
from hyperframe.frame import (
    ContinuationFrame,
    Frame,
    HeadersFrame,
    RstStreamFrame,
    SettingsFrame,
)
from websockets import frames as ws
from websockets.streams import StreamReader

from serverlab.base.ports import free_port, port_open
from serverlab.base.tlskeys import make_key_material
from serverlab.run.execution.engine import engine_binary

TESTS = Path(__file__).resolve().parent
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CANCEL = 0x8


@dataclass
class Capture:
    """One relayed connection: what the engine wrote, and whether the engine ended it."""

    sent: bytearray = field(default_factory=bytearray)
    received: bytearray = field(default_factory=bytearray)
    client_closed: bool = False


@contextmanager
def server(*args: str, script: str = "reference_server.py") -> Iterator[int]:
    """A reference server on a free port, until the block ends; its port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(TESTS / script), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while not port_open(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def relay(upstream: int) -> Iterator[tuple[int, list[Capture]]]:
    """A loopback relay to `upstream`: its port, and a capture per connection it relayed."""
    listener = socket.create_server(("127.0.0.1", 0))
    captures: list[Capture] = []
    threads: list[threading.Thread] = []

    def pump(source: socket.socket, sink: socket.socket, capture: Capture, up: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                (capture.sent if up else capture.received).extend(data)
                sink.sendall(data)
            capture.client_closed |= up
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            capture = Capture()
            captures.append(capture)
            upstream_conn = socket.create_connection(("127.0.0.1", upstream))
            for args in (
                (client, upstream_conn, capture, True),
                (upstream_conn, client, capture, False),
            ):
                thread = threading.Thread(target=pump, args=args, daemon=True)
                thread.start()
                threads.append(thread)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1], captures
    finally:
        listener.close()
        for thread in threads:
            thread.join(timeout=5)


def run_engine(*args: str) -> dict:
    """The engine run to its end: its summary line."""
    done = subprocess.run(
        [str(engine_binary()), *args, "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def errors(summary: dict) -> dict:
    return {kind: n for kind, n in summary["errors"].items() if n}


def relayed(captures: list[Capture]) -> list[Capture]:
    """The captures once the relay has seen every connection end (the engine's close at its
    run's end reaches the relay a moment later)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(c.client_closed for c in captures):
        time.sleep(0.02)
    return captures


def h2_server():
    """tests/reference_h2.py, not yet started, and its h2c port."""
    return server("--h2c-port", str(h2c := free_port()), script="reference_h2.py"), h2c


# -- slowloris --------------------------------------------------------------------------


def test_slowloris_trickles_one_new_header_line_per_interval_and_never_ends_the_head(tmp_path):
    with server("--docroot", str(tmp_path)) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/perf", "--slowloris-every", "100ms", "-c", "3", "-d", "1s"
        )
        relayed(captures)
    head = f"GET /perf HTTP/1.1\r\nHost: 127.0.0.1:{via}\r\nUser-Agent: serverlab-load/".encode()
    assert len(captures) == summary["connections_opened"] == 3
    for capture in captures:
        sent = bytes(capture.sent)
        assert sent.startswith(head), sent[:80]
        assert b"\r\n\r\n" not in sent  # the header section is never ended
        lines = sent.split(b"\r\n")[3:-1]  # after the request line, Host and User-Agent
        # One line per 100 ms of a 1 s run: never more than the schedule has, and some.
        assert 1 <= len(lines) <= 10, lines
        assert lines == [f"X-a-{n}: {n}".encode() for n in range(1, len(lines) + 1)]
    assert summary["bytes_written"] == sum(len(c.sent) for c in captures)
    # Every connection was held to the run's end: none ended, none failed.
    assert (summary["requests"], errors(summary)) == (0, {})


def test_a_servers_header_timeout_ends_each_slowloris_connection_with_its_408_timed(tmp_path):
    with server("--docroot", str(tmp_path), "--fault", "header_timeout") as port:
        summary = run_engine(
            f"http://127.0.0.1:{port}/perf", "--slowloris-every", "100ms", "-c", "2", "-d", "2.5s"
        )
    # The reference server's limit is 1 s: each connection is answered 408 after it, and
    # its slot opens the next at once.
    assert summary["status"]["4xx"] == summary["answered"] == summary["requests"] >= 2
    assert errors(summary) == {"status": summary["answered"]}
    assert summary["latency_us"]["min"] >= 1_000_000
    assert summary["connections_opened"] > 2


# -- idle -------------------------------------------------------------------------------


def test_idle_connections_are_opened_and_left_without_a_byte(tmp_path):
    with server("--docroot", str(tmp_path)) as port, relay(port) as (via, captures):
        summary = run_engine(f"http://127.0.0.1:{via}/", "--idle", "-c", "5", "-d", "0.5s")
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == 5
    assert [bytes(c.sent) for c in captures] == [b""] * 5
    assert (summary["bytes_written"], summary["requests"], errors(summary)) == (0, 0, {})


def test_an_idle_connection_the_server_times_out_counts_as_its_answer(tmp_path):
    with server("--docroot", str(tmp_path), "--fault", "header_timeout") as port:
        summary = run_engine(f"http://127.0.0.1:{port}/", "--idle", "-c", "2", "-d", "1.6s")
    assert summary["status"]["4xx"] == summary["answered"] == 2
    assert summary["latency_us"]["min"] >= 1_000_000


# -- HTTP/2 Rapid Reset (CVE-2023-44487) ------------------------------------------------


def frames(sent: bytes) -> list[Frame]:
    """The client's frames after its preface, decoded by hyperframe."""
    assert sent.startswith(PREFACE), sent[:30]
    data, found = memoryview(sent)[len(PREFACE) :], []
    while len(data) >= 9:
        frame, length = Frame.parse_frame_header(data[:9])
        if len(data) < 9 + length:
            break  # cut by the run's end
        frame.parse_body(data[9 : 9 + length])
        found.append(frame)
        data = data[9 + length :]
    return found


def request_headers(authority: str) -> list[tuple[str, str]]:
    return [(":method", "GET"), (":scheme", "http"), (":path", "/perf"), (":authority", authority)]


def streams(capture: Capture, authority: str) -> list[int]:
    """The connection's streams, checked to be each one HEADERS of a whole GET request then
    its RST_STREAM(CANCEL), in order; SETTINGS (the opening one, and acknowledgements of
    the server's) are the only other frames."""
    decoder = hpack.Decoder()
    rest = [f for f in frames(bytes(capture.sent)) if not isinstance(f, SettingsFrame)]
    opened = []
    for headers, reset in zip(rest[::2], rest[1::2], strict=False):
        assert isinstance(headers, HeadersFrame), headers
        assert {"END_HEADERS", "END_STREAM"} <= headers.flags, headers
        assert decoder.decode(headers.data) == request_headers(authority)
        assert isinstance(reset, RstStreamFrame), reset
        assert (reset.stream_id, reset.error_code) == (headers.stream_id, CANCEL)
        opened.append(headers.stream_id)
    assert len(rest) == 2 * len(opened), rest[-1:]  # the run never ends between the two
    assert opened == list(range(1, 2 * len(opened), 2))
    return opened


def test_rapid_reset_sends_headers_then_rst_stream_per_stream_at_the_planned_rate():
    served, h2c = h2_server()
    with served, relay(h2c) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/perf",
            *("--rapid-reset", "200", "--streams-per-connection", "10000"),
            *("-c", "1", "-d", "1s"),
        )
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == 1
    opened = streams(captures[0], f"127.0.0.1:{via}")
    assert summary["streams_opened"] == len(opened)
    # Stream k goes k / 200 s into the connection: at most 201 in a 1 s run. At least half
    # of them, on a machine busy enough to delay the engine's timer by as much.
    assert 100 <= len(opened) <= 201, len(opened)
    # The server never cut the attack: the connection was held to the run's end.
    assert errors(summary) == {}


def test_rapid_reset_closes_each_connection_after_its_streams_and_opens_the_next():
    served, h2c = h2_server()
    with served, relay(h2c) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/perf",
            *("--rapid-reset", "1000", "--streams-per-connection", "20"),
            *("-c", "1", "-d", "0.5s"),
        )
        relayed(captures)
    counts = [len(streams(c, f"127.0.0.1:{via}")) for c in captures]
    assert len(counts) == summary["connections_opened"] >= 2
    # Every connection but the one the run's end cut carried its 20 streams and was ended
    # by the engine; each of those is one answered attempt.
    assert counts[:-1] == [20] * (len(counts) - 1) and counts[-1] <= 20
    assert summary["answered"] == summary["requests"] >= len(counts) - 1
    assert summary["streams_opened"] == sum(counts)
    assert all(c.client_closed for c in captures)


# -- HTTP/2 CONTINUATION flood (CVE-2024-27316) -----------------------------------------


def test_a_continuation_flood_opens_one_header_block_and_never_ends_it():
    served, h2c = h2_server()
    with served, relay(h2c) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/perf",
            *("--continuation-flood", "20", "--frame-bytes", "1024", "-c", "1", "-d", "1s"),
        )
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == summary["streams_opened"] == 1
    sent = frames(bytes(captures[0].sent))
    # Its SETTINGS, its acknowledgements of the server's (reference_h2.py sends two), then
    # the request's HEADERS, which ends the stream but not the header block, and
    # CONTINUATION frames of it alone.
    at = next(i for i, f in enumerate(sent) if not isinstance(f, SettingsFrame))
    assert at >= 2 and [f.flags for f in sent[:at]] == [set()] + [{"ACK"}] * (at - 1)
    headers, continuations = sent[at], sent[at + 1 :]
    assert isinstance(headers, HeadersFrame), headers
    assert (headers.stream_id, headers.flags) == (1, {"END_STREAM"})
    # One frame per 50 ms of a 1 s run: never more than the schedule has, and some.
    assert 1 <= len(continuations) <= 21, len(continuations)
    for frame in continuations:
        assert isinstance(frame, ContinuationFrame), frame
        assert (frame.stream_id, frame.flags, len(frame.data)) == (1, set(), 1024)
    block = headers.data + b"".join(f.data for f in continuations)
    fields = hpack.Decoder().decode(block)
    assert fields[:4] == request_headers(f"127.0.0.1:{via}")
    assert fields[4:] == [("x-a", "v" * 58)] * 16 * len(continuations)
    # The server holds a block of fewer than 64 frames: the connection lasted the run.
    assert errors(summary) == {}


def test_a_server_that_caps_a_header_blocks_frames_ends_each_flood_with_goaway():
    # The h2 library ends a connection whose header block passes 64 CONTINUATION frames
    # with GOAWAY: at 1000 frames a second, within ~65 ms of each connection's start.
    served, h2c = h2_server()
    with served:
        summary = run_engine(
            f"http://127.0.0.1:{h2c}/perf", "--continuation-flood", "1000", "-c", "1", "-d", "1s"
        )
    assert errors(summary) == {"h2_goaway": summary["requests"]}
    assert summary["requests"] >= 2
    # Each attempt is one connection and, once its preface is through, one stream. The run's
    # end cuts the one attempt under way, unfinished (not a request) and, when the cut falls
    # between its connect and its HEADERS (2 runs in 40), without a stream yet.
    assert summary["connections_opened"] == summary["started"] <= summary["requests"] + 1
    assert summary["requests"] <= summary["streams_opened"] <= summary["started"]


# -- TLS handshake flood ----------------------------------------------------------------


def records(data: bytes) -> list[tuple[int, bytes]]:
    """TLS records (RFC 8446 §5.1) as (content type, fragment), the last one whole."""
    found = []
    while len(data) >= 5:
        length = int.from_bytes(data[3:5], "big")
        found.append((data[0], data[5 : 5 + length]))
        data = data[5 + length :]
    return found


HANDSHAKE, CLIENT_HELLO, SERVER_HELLO = 22, 1, 2


@pytest.mark.parametrize("abandon", ["server-hello", "finished"])
def test_a_handshake_flood_leaves_each_full_handshake_where_it_was_planned(tmp_path, abandon):
    keys = make_key_material(tmp_path, "ecdsa-p256")
    tls = free_port()
    args = ("--docroot", str(tmp_path), "--tls", str(tls), str(keys.cert), str(keys.key))
    with server(*args), relay(tls) as (via, captures):
        summary = run_engine(
            f"https://127.0.0.1:{via}/",
            *("--handshake-flood", abandon, "--tls-ca", str(keys.ca_cert), "--tls-resume", "off"),
            *("-R", "20", "-d", "1s"),
        )
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == summary["answered"] >= 10
    assert errors(summary) == {}
    for capture in captures:
        sent, answer = records(bytes(capture.sent)), records(bytes(capture.received))
        assert (sent[0][0], sent[0][1][0]) == (HANDSHAKE, CLIENT_HELLO)
        assert (answer[0][0], answer[0][1][0]) == (HANDSHAKE, SERVER_HELLO)
        # After the ServerHello the engine writes nothing: no Finished, no alert; after the
        # Finished, its flight (TLS 1.3: encrypted, type 23 after an optional CCS) went.
        if abandon == "server-hello":
            assert len(sent) == 1, [kind for kind, _ in sent]
        else:
            assert any(kind == 23 for kind, _ in sent[1:]), [kind for kind, _ in sent]
    # Full handshakes only: every one finished is counted, none resumed.
    finished = summary["answered"] if abandon == "finished" else 0
    assert (summary["tls_handshakes"], summary["tls_resumed"]) == (finished, 0)


# -- HPACK bomb -------------------------------------------------------------------------


def test_an_hpack_bomb_stores_one_field_and_references_it_in_every_request():
    served, h2c = h2_server()
    with served, relay(h2c) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/perf",
            *("--hpack-bomb", "20", "--references", "10", "--bomb-streams-per-connection", "5"),
            *("-c", "1", "-d", "1s"),
        )
        relayed(captures)
    assert errors(summary) == {}
    sent = [f for c in captures for f in frames(bytes(c.sent)) if isinstance(f, HeadersFrame)]
    assert len(sent) == summary["streams_opened"] >= 5
    stored = ("x-b", "b" * 4000)
    for capture in captures:
        decoder = hpack.Decoder()  # a table per connection, as the server's
        decoder.max_header_list_size = 1 << 20
        for k, headers in enumerate(
            f for f in frames(bytes(capture.sent)) if isinstance(f, HeadersFrame)
        ):
            assert (headers.stream_id, headers.flags) == (2 * k + 1, {"END_HEADERS", "END_STREAM"})
            fields = decoder.decode(headers.data)
            assert fields[:4] == request_headers(f"127.0.0.1:{via}")
            # The first request stores the field (and references it); every one references
            # it 10 times at one byte each.
            assert fields[4:] == [stored] * (11 if k == 0 else 10)
            # One byte a reference: past the stored field (~4 KB) and the request's own ~40
            # bytes, the block holds no more than the 10 bytes of references.
            assert len(headers.data) < (4020 if k == 0 else 0) + 40 + 10
    # 5 streams a connection at 20 a second: every connection but the last was closed by
    # the engine after its fifth.
    assert summary["answered"] == summary["requests"] >= 1


def test_a_server_that_caps_its_header_list_ends_an_hpack_bomb_with_goaway():
    # The hpack library refuses a header list over 64 KiB; 1000 references are ~4 MB.
    served, h2c = h2_server()
    with served:
        summary = run_engine(
            f"http://127.0.0.1:{h2c}/perf",
            *("--hpack-bomb", "50", "--references", "1000", "-c", "1", "-d", "0.5s"),
        )
    assert errors(summary) == {"h2_goaway": summary["requests"]}
    assert summary["requests"] >= 1


# -- WebSocket: oversized message, endless fragments, ping flood -------------------------

MESSAGE_LIMIT = 65536  # the reference server's (tests/reference_server.py, MAX_WS_MESSAGE)
TOO_BIG = 1009
POLICY_VIOLATION = 1008


def upgraded(data: bytes) -> bytes:
    """What follows an HTTP/1.1 upgrade's head (the request's or the 101 answer's)."""
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith((b"GET /ws HTTP/1.1\r\n", b"HTTP/1.1 101 ")), head[:40]
    return rest


def ws_frames(data: bytes, *, mask: bool) -> list[ws.Frame]:
    """The whole WebSocket frames in `data`, decoded by websockets' parser (which refuses a
    client frame that is not masked, and a server frame that is); a frame cut by the run's
    end is left out."""
    reader = StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    found = []
    while True:
        try:
            next(ws.Frame.parse(reader.read_exact, mask=mask, max_size=None))
        except StopIteration as parsed:
            found.append(parsed.value)
        except EOFError:
            return found


def server_close_code(capture: Capture) -> int | None:
    """The code of the server's close frame on this connection, if it sent one (none on a
    connection the run's end cut before the server's answer). A close the relay passed on
    just before the run's end may not have been read by the engine: that connection, cut,
    is no request, so a run of one client has up to one close more than requests."""
    if not capture.received:
        return None
    closes = [
        f
        for f in ws_frames(upgraded(bytes(capture.received)), mask=False)
        if f.opcode is ws.Opcode.CLOSE
    ]
    return ws.Close.parse(closes[0].data).code if closes else None


def test_an_oversized_message_announces_its_length_and_trickles_masked_payload_at_the_rate(
    tmp_path,
):
    # A server without a message limit waits for the payload: the connection lasts the run.
    args = ("--docroot", str(tmp_path), "--fault", "ws_accept_oversize")
    with server(*args) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/ws",
            *("--ws-oversized", str(1 << 30), "--ws-trickle", "1000", "-c", "2", "-d", "1s"),
        )
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == 2
    for capture in captures:
        sent = upgraded(bytes(capture.sent))
        # One text frame, FIN set, masked, its 64-bit length 2^30, then its mask key.
        assert sent[:2] == bytes([0x81, 0x80 | 127]), sent[:2]
        assert int.from_bytes(sent[2:10], "big") == 1 << 30
        mask, payload = sent[10:14], sent[14:]
        assert bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) == b"x" * len(payload)
        # Byte k goes k / 1000 s into the message: at most 1001 in a 1 s run. At least half
        # of them, on a machine busy enough to delay the engine's timer by as much.
        assert 500 <= len(payload) <= 1001, len(payload)
    assert summary["bytes_written"] == sum(len(c.sent) for c in captures)
    assert (summary["requests"], errors(summary)) == (0, {})


def test_a_servers_message_limit_closes_an_oversized_announcement_with_1009_at_its_header(
    tmp_path,
):
    with server("--docroot", str(tmp_path)) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/ws",
            *("--ws-oversized", str(MESSAGE_LIMIT + 1), "-R", "10", "-d", "1s"),
        )
        relayed(captures)
    assert errors(summary) == {"closed": summary["requests"]}
    # Nothing but the header went (no trickle), and the header alone brought the close: on
    # every connection but the one the run's end may have cut.
    closed = [c for c in captures if server_close_code(c) == TOO_BIG]
    codes = [server_close_code(c) for c in captures]
    assert summary["requests"] <= len(closed) <= summary["requests"] + 1, codes
    assert len(closed) >= len(captures) - 1, codes
    assert summary["requests"] >= 5
    assert len(captures) == summary["connections_opened"]
    for capture in closed:
        sent = upgraded(bytes(capture.sent))
        assert (sent[:2], int.from_bytes(sent[2:10], "big")) == (b"\x81\xff", MESSAGE_LIMIT + 1)
        assert len(sent) == 14


def fragments(capture: Capture) -> list[ws.Frame]:
    """The connection's frames, checked to be one message's: a text frame, then
    continuation frames, none of them final."""
    sent = ws_frames(upgraded(bytes(capture.sent)), mask=True)
    assert [f.opcode for f in sent] == [ws.Opcode.TEXT] + [ws.Opcode.CONT] * (len(sent) - 1)
    assert not any(f.fin for f in sent)
    return sent


def test_endless_fragments_send_a_first_frame_then_continuations_at_the_rate_never_final(
    tmp_path,
):
    args = ("--docroot", str(tmp_path), "--fault", "ws_accept_oversize")
    with server(*args) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/ws",
            *("--ws-fragments", "50", "--ws-fragment-bytes", "100", "-c", "1", "-d", "1s"),
        )
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == 1
    sent = fragments(captures[0])
    assert [f.data for f in sent] == [b"x" * 100] * len(sent)
    # ws.Frame k goes k / 50 s into the connection: at most 51 in a 1 s run, at least half.
    assert 25 <= len(sent) <= 51, len(sent)
    assert summary["bytes_written"] == len(captures[0].sent)
    assert (summary["requests"], errors(summary)) == (0, {})


def test_a_servers_message_limit_closes_endless_fragments_with_1009_once_they_pass_it(tmp_path):
    with server("--docroot", str(tmp_path)) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/ws",
            *("--ws-fragments", "500", "--ws-fragment-bytes", "1000", "-c", "1", "-d", "1s"),
        )
        relayed(captures)
    # 1000 bytes a frame: the 66th passes 64 KiB; each connection closed there is one
    # request, its slot opening the next; the run's end cuts the last one.
    closed = [c for c in captures if server_close_code(c) == TOO_BIG]
    assert summary["requests"] <= len(closed) <= summary["requests"] + 1
    assert summary["requests"] >= 1
    assert errors(summary) == {"closed": summary["requests"]}
    for capture in closed:
        assert len(fragments(capture)) * 1000 > MESSAGE_LIMIT


def test_a_ping_flood_sends_numbered_pings_at_the_rate_and_counts_the_pongs(tmp_path):
    with server("--docroot", str(tmp_path)) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/ws", "--ws-ping-flood", "100", "-c", "2", "-d", "1s"
        )
        relayed(captures)
    assert len(captures) == summary["connections_opened"] == 2
    pings = pongs = 0
    for capture in captures:
        sent = ws_frames(upgraded(bytes(capture.sent)), mask=True)
        assert [(f.opcode, f.fin) for f in sent] == [(ws.Opcode.PING, True)] * len(sent)
        assert [f.data for f in sent] == [k.to_bytes(8, "big") for k in range(len(sent))]
        # Ping k goes k / 100 s into the connection: at most 101 in a 1 s run, at least half.
        assert 50 <= len(sent) <= 101, len(sent)
        answered = ws_frames(upgraded(bytes(capture.received)), mask=False)
        assert all(f.opcode is ws.Opcode.PONG for f in answered)
        assert [f.data for f in answered] == [f.data for f in sent[: len(answered)]]
        pings, pongs = pings + len(sent), pongs + len(answered)
    assert summary["events"]["pings"] == pings
    # Every pong the engine read is counted; the run's end may cut, on each connection, the
    # one pong still on its way to the engine when the relay passed it on.
    assert pongs - len(captures) <= summary["events"]["pongs"] <= pongs
    assert summary["bytes_written"] == sum(len(c.sent) for c in captures)
    assert (summary["requests"], errors(summary)) == (0, {})


def test_a_servers_ping_limit_closes_a_ping_flood_with_1008_past_its_fiftieth_ping(tmp_path):
    args = ("--docroot", str(tmp_path), "--fault", "ws_ping_limit")
    with server(*args) as port, relay(port) as (via, captures):
        summary = run_engine(
            f"http://127.0.0.1:{via}/ws", "--ws-ping-flood", "200", "-c", "1", "-d", "1s"
        )
        relayed(captures)
    # At 200 a second the 51st ping goes 250 ms into a connection: the server answers it,
    # then closes; the slot opens the next connection at once, and the run's end cuts the
    # last.
    closed = [c for c in captures if server_close_code(c) == POLICY_VIOLATION]
    assert summary["requests"] <= len(closed) <= summary["requests"] + 1
    assert summary["requests"] >= 1
    assert errors(summary) == {"closed": summary["requests"]}

    def pongs(capture: Capture) -> int:
        answered = ws_frames(upgraded(bytes(capture.received)), mask=False)
        return sum(f.opcode is ws.Opcode.PONG for f in answered)

    for capture in closed:
        assert len(ws_frames(upgraded(bytes(capture.sent)), mask=True)) >= pongs(capture) >= 51
    # The engine read every pong before the close frames it read (one client: its
    # connections one after another, so the first `requests` closed), and none the relay
    # did not pass on.
    seen_closed = closed[: summary["requests"]]
    counted = summary["events"]["pongs"]
    assert sum(map(pongs, seen_closed)) <= counted <= sum(pongs(c) for c in captures if c.received)
