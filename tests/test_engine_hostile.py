"""The load engine against hostile servers (issue 33, defects 7 and 8): it survives the
servers it measures, with bounded memory per connection, and counts each stall or flood by
its kind within the run. Each server here is real: a socket on loopback writing HTTP/2
frames by hand, or TLS records (Python's ssl), driven by the real engine binary."""

import contextlib
import json
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from serverlab.base.paths import REPO_ROOT
from serverlab.base.tlskeys import make_key_material
from serverlab.results.records import RecordedTest
from serverlab.results.report.flags.validity import validity_flags
from serverlab.run.execution.engine import engine_binary

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, SETTINGS, PING, CONTINUATION = 0x1, 0x4, 0x6, 0x9
END_HEADERS, ACK = 0x4, 0x1
# `:status: 200` (HPACK static index 8), then a literal header of a new name, over and over.
STATUS_200 = b"\x88"
FILLER = (b"\x00\x03x-a\x64" + b"v" * 100) * 150


def framed(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame: its 9-byte header (RFC 9113 §4.1), then its payload."""
    head = len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big")
    return head + payload


def read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client closed")
        data += chunk
    return data


def await_request(conn) -> int:
    """Reads the client's preface and frames until its first HEADERS; that stream's id."""
    read_exactly(conn, len(PREFACE))
    while True:
        head = read_exactly(conn, 9)
        length = int.from_bytes(head[:3], "big")
        read_exactly(conn, length)
        if head[3] == HEADERS:
            return int.from_bytes(head[5:], "big") & 0x7FFFFFFF


def answer_with(conn, tail: Callable[[socket.socket, int], None]) -> None:
    """The server's SETTINGS, the client's request awaited and its SETTINGS acknowledged,
    then `tail` writes what the server is here for."""
    conn.sendall(framed(SETTINGS, 0, 0))
    stream = await_request(conn)
    conn.sendall(framed(SETTINGS, ACK, 0))
    tail(conn, stream)


def continuation_flood(conn, stream: int) -> None:
    conn.sendall(framed(HEADERS, 0, stream, STATUS_200))
    block = framed(CONTINUATION, 0, stream, FILLER) * 16
    while True:
        conn.sendall(block)


def hold(conn: socket.socket) -> None:
    """Reads what comes and says nothing, until the client goes."""
    while conn.recv(1 << 16):
        pass


def header_block_left_open(conn, stream: int) -> None:
    conn.sendall(framed(HEADERS, 0, stream, STATUS_200))
    hold(conn)


def settings_flood(conn, _stream: int) -> None:
    flood = framed(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)) * 1000
    while True:
        conn.sendall(flood)


def ping_flood(conn, _stream: int) -> None:
    flood = framed(PING, 0, 0, b"8 bytes!") * 1000
    while True:
        conn.sendall(flood)


@contextmanager
def serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback listener running `handle` on each connection in a thread; its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def guarded(conn: socket.socket) -> None:
        # The client goes away: that is how every hostile exchange ends.
        with conn, contextlib.suppress(OSError, ssl.SSLError):
            handle(conn)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=guarded, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def run_engine(args: list[str]) -> tuple[dict, int]:
    """Runs the engine to its end: its summary and its peak resident memory in KiB (the
    kernel's `VmHWM`, read while it runs: a high-water mark, so the last reading before the
    end is the peak but for the last 20 ms)."""
    engine = subprocess.Popen(
        [str(engine_binary()), *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(engine.stdout.read()))
    reader.start()
    peak_kib = 0
    while engine.poll() is None:
        peak_kib = max(peak_kib, high_water_kib(engine.pid))
        time.sleep(0.02)
    reader.join()
    summaries = [line for line in out[0].splitlines() if '"type":"summary"' in line]
    assert summaries, out[0][-500:]
    return json.loads(summaries[-1]), peak_kib


def high_water_kib(pid: int) -> int:
    """The process's peak resident memory so far, 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) if found else 0


def lowest_equivalent(us: int) -> int:
    """The lowest value of `us`'s bucket in a histogram at the engine's bounds and precision."""
    return HdrHistogram(1, 3_600_000_000, 3).get_lowest_equivalent_value(us)


def counted(summary: dict) -> dict:
    return {kind: n for kind, n in summary["errors"].items() if n}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return make_key_material(tmp_path_factory.mktemp("tls"), "ecdsa-p256")


def server_context(keys, alpn: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keys.cert, keys.key)
    context.set_alpn_protocols([alpn])
    return context


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2"])
def test_a_continuation_flood_is_cut_at_the_header_limit_with_bounded_memory(keys, tls):
    def handle(conn: socket.socket) -> None:
        if tls:
            conn = server_context(keys, "h2").wrap_socket(conn, server_side=True)
        answer_with(conn, continuation_flood)

    target = ["https", "--h2", "--tls-ca", str(keys.ca_cert)] if tls else ["http", "--h2c"]
    with serving(handle) as port:
        summary, peak_kib = run_engine(
            [f"{target[0]}://127.0.0.1:{port}/", *target[1:], "-c", "10", "-n", "30"]
        )
    # Before the limits, 10 such connections held about 210 MB; with them ~11 MB, whatever
    # the number of connections.
    assert 0 < peak_kib < 32 * 1024, f"peak RSS {peak_kib} KiB"
    # A counted run, not a timed one: a timed run's end may find a handshake with this
    # Python server still under way (on a busy machine), and counts it as a timeout, rightly.
    assert list(counted(summary)) == ["h2_limit"], summary["errors"]
    assert summary["errors"]["h2_limit"] == summary["requests"] == 30


@pytest.mark.parametrize(
    ("tail", "kind"),
    [
        (header_block_left_open, "h2_header_timeout"),
        (settings_flood, "h2_settings_flood"),
        (ping_flood, "h2_ping_flood"),
    ],
)
def test_a_stalled_header_block_or_a_control_frame_flood_is_counted_by_its_kind(tail, kind):
    # The default 10 s timeout: each is counted within a 2 s run all the same.
    with serving(lambda conn: answer_with(conn, tail)) as port:
        summary, _ = run_engine([f"http://127.0.0.1:{port}/", "--h2c", "-c", "2", "-d", "2s"])
    assert list(counted(summary)) == [kind], summary["errors"]
    assert summary["errors"][kind] == summary["requests"] >= 2
    # The report names the kind in the test's errors flag.
    (flag,) = [f for f in validity_flags(stored(summary)) if f.code == "errors"]
    assert f"({kind} {summary['requests']:,})" in flag.text, flag.text


def stored(summary: dict) -> RecordedTest:
    """A test as the runner stores it, around an engine summary."""
    return RecordedTest(
        run_id=1,
        permutation_key="hostile",
        contestant="hostile",
        repeat_index=0,
        status="ok",
        started_at=0.0,
        ended_at=summary["duration_s"],
        summary=summary,
    )


@pytest.mark.parametrize("timeout", [[], ["--timeout", "500ms"]], ids=["at-the-end", "in-the-run"])
def test_a_tls_server_that_never_answers_the_client_hello_is_counted_as_a_handshake_timeout(
    keys, timeout
):
    with serving(hold) as port:
        summary, _ = run_engine(
            [f"https://127.0.0.1:{port}/", "--tls-ca", str(keys.ca_cert), "-c", "2", "-d", "2s"]
            + timeout
        )
    assert list(counted(summary)) == ["tls_handshake_timeout"], summary["errors"]
    stalled = summary["errors"]["tls_handshake_timeout"]
    if not timeout:
        # Under the default 10 s timeout each slot's one handshake is still waiting at the
        # end, 2 s old: counted there, by its kind, not dropped.
        assert stalled == summary["requests"] == 2, summary
    else:
        # Timed out within the run, three or four times a slot; only a handshake begun
        # less than 200 ms before the end counts as nothing.
        assert stalled >= 6, summary
        assert summary["requests"] - stalled <= 2, summary


def late_handshake(keys, delay_s: float) -> Callable[[socket.socket], None]:
    """A TLS server past its capacity: it completes each handshake `delay_s` late, then
    answers each request with an empty 200 until the client goes."""
    context = server_context(keys, "http/1.1")

    def handle(conn: socket.socket) -> None:
        time.sleep(delay_s)
        with context.wrap_socket(conn, server_side=True) as tls:
            while tls.recv(1 << 16):
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    return handle


def test_a_handshake_answered_late_within_the_timeout_is_a_long_latency_not_an_error(keys):
    # 2.5 s late under the default 10 s timeout: wrk, ab and h2load count it as latency too.
    with serving(late_handshake(keys, 2.5)) as port:
        summary, _ = run_engine(
            [f"https://127.0.0.1:{port}/", "--tls-ca", str(keys.ca_cert), "-c", "2", "-n", "2"]
        )
    assert counted(summary) == {}, summary["errors"]
    assert summary["answered"] == summary["tls_handshakes"] == 2, summary
    # The server's 2.5 s start at its accept, which may come before the engine sees its
    # connect done (a busy machine): each handshake is at least 2.5 s less that connect, and
    # the summary's minimum is its HdrHistogram bucket's lowest value.
    floor = lowest_equivalent(2_500_000 - summary["connect_us"]["max"])
    assert summary["tls_handshake_us"]["min"] >= floor, (summary["tls_handshake_us"], floor)
    # A new connection's latency includes its connect and its handshake.
    assert summary["latency_us"]["min"] >= 2_500_000, summary["latency_us"]


def garbage_after_handshake(keys, alpn: str) -> Callable[[socket.socket], None]:
    context = server_context(keys, alpn)

    def handle(conn: socket.socket) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1 << 16)  # the handshake is over and the request (or preface) came
            # Bytes that are no TLS record, on the socket under TLS.
            socket.socket(fileno=os.dup(tls.fileno())).sendall(b"HTTP/1.1 200 OK\r\n" * 64)
            tls.recv(1 << 16)

    return handle


@pytest.mark.parametrize(("flags", "alpn"), [([], "http/1.1"), (["--h2"], "h2")])
def test_garbage_after_a_completed_tls_handshake_is_a_record_error_not_a_handshake_one(
    keys, flags, alpn
):
    with serving(garbage_after_handshake(keys, alpn)) as port:
        summary, _ = run_engine(
            [f"https://127.0.0.1:{port}/", "--tls-ca", str(keys.ca_cert), *flags]
            + ["-c", "1", "-n", "3"]
        )
    assert summary["tls_handshakes"] == 3
    assert counted(summary) == {"tls_record": 3}, summary["errors"]


SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]


@pytest.mark.parametrize(
    "command", [[], [*SERVERLAB, "load", "--"]], ids=["serverlab-load", "serverlab load"]
)
def test_the_engines_help_lists_every_exit_code_its_main_uses(command):
    main = (REPO_ROOT / "engine/src/main.rs").read_text()
    # `SUCCESS` is 0; the others are numbers, given inline or as a named constant.
    found = re.findall(r"ExitCode::from\((\d)\)|: u8 = (\d);", main)
    codes = {"0"} | {code for pair in found for code in pair if code}
    help_command = [*command, "--help"] if command else [str(engine_binary()), "--help"]
    text = subprocess.run(help_command, capture_output=True, text=True, check=True).stdout
    said = re.search(r"Exit codes: (.*)", text).group(1)
    assert codes == {"0", "1", "2", "3"}, codes
    for code in sorted(codes):
        assert re.search(rf"(^|, ){code} \w", said), said
    assert "3 no answer" in said, said


def test_serverlab_loads_own_help_says_where_the_exit_codes_are():
    text = subprocess.run(
        [*SERVERLAB, "load", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "serverlab load -- --help" in " ".join(text.split()), text
