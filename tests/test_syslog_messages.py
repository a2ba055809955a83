"""The engine's syslog messages (issue 23): realistic RFC 5424, as an independent parser
(syslog-rfc5424-parser, pinned in requirements.txt) and the reference server's strict one
read them, with every sequence number sent exactly once."""

import socket
import subprocess
import threading

import reference_syslog
from syslog_rfc5424_parser import SyslogMessage

from serverlab.run.execution.engine import engine_binary

MESSAGES = 2000


def _receive(listener: socket.socket, into: list[bytes], done: threading.Event) -> None:
    """Every byte of every connection, until the engine has closed them and exited."""
    listener.settimeout(0.1)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if done.is_set():
                return
            continue
        with conn:
            while chunk := conn.recv(1 << 16):
                into.append(chunk)


def _flood(framing: str) -> list[bytes]:
    """MESSAGES messages from the engine over one connection, split into messages."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        chunks: list[bytes] = []
        finished = threading.Event()
        receiver = threading.Thread(target=_receive, args=(listener, chunks, finished))
        receiver.start()
        port = listener.getsockname()[1]
        ran = subprocess.run(
            [engine_binary(), f"tcp://127.0.0.1:{port}", "--syslog", "tcp"]
            + ["--syslog-framing", framing, "-n", str(MESSAGES), "-c", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        finished.set()
        assert ran.returncode == 0, ran.stderr
        receiver.join(timeout=15)
    stream = b"".join(chunks)
    if framing == "newline":
        return stream.split(b"\n")[:-1]
    messages = []
    while stream:
        length, _, rest = stream.partition(b" ")
        messages.append(rest[: int(length)])
        stream = rest[int(length) :]
    return messages


def _sequence_id(parsed: SyslogMessage) -> int:
    return int(parsed.sd["meta"]["sequenceId"])


def test_the_engines_messages_are_valid_rfc5424_numbered_once_each():
    messages = _flood("octet")
    parsed = [SyslogMessage.parse(m.decode("utf-8")) for m in messages]
    assert sorted(_sequence_id(p) for p in parsed) == list(range(1, MESSAGES + 1))
    assert all(reference_syslog.parse(m) is not None for m in messages)
    # Realistic: many lengths, structured data beyond the sequence id, text beyond ASCII.
    assert len({len(m) for m in messages}) > 15
    assert sum(len(p.sd) > 1 for p in parsed) > MESSAGES // 4
    assert any(not m.isascii() for m in messages)
    assert len({(p.hostname, p.appname) for p in parsed}) >= 10
    mean = sum(map(len, messages)) / len(messages)
    assert 150 < mean < 260, mean


def test_newline_framed_messages_are_the_same_messages():
    messages = _flood("newline")
    parsed = [SyslogMessage.parse(m.decode("utf-8")) for m in messages]
    assert sorted(_sequence_id(p) for p in parsed) == list(range(1, MESSAGES + 1))
    assert all(b"\n" not in m and reference_syslog.parse(m) for m in messages)
