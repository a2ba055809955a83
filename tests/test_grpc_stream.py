"""The engine's `grpc-stream` (spec §16's held Subscribe streams) against go-nethttp's
grpc-go server and tests/reference_grpc.py's faults: every delivery counted by the push
code (seq, delay, gaps), a stream's end by its gRPC status, its deadline, or its cut."""

import json
import subprocess
import time

import pytest
from conftest import write_manifest
from test_grpc import GRPC_MANIFEST, errors_of

from serverlab.base import httpclient
from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import engine_binary


@pytest.fixture
def grpc_dir(contestants_dir):
    write_manifest(contestants_dir, "reference-grpc", GRPC_MANIFEST)
    return contestants_dir


def target_of(server, transport: str) -> list[str]:
    if transport == "h2c":
        return [f"http://127.0.0.1:{server.h2c_port}/", "--h2c"]
    return [f"https://127.0.0.1:{server.tls_port}/", "--h2", "--tls-ca", str(server.tls.ca_cert)]


def emit(server, name: str, interval_ms: int) -> None:
    answer = httpclient.post_json(
        server.port, "/event/set", {"name": name, "interval_ms": interval_ms}
    )
    assert answer.status == 200, answer.body[:200]


def summary_of(done: subprocess.CompletedProcess | tuple) -> dict:
    stdout = done.stdout if hasattr(done, "stdout") else done[0]
    summaries = [line for line in stdout.splitlines() if '"type":"summary"' in line]
    assert summaries, stdout[-500:]
    return json.loads(summaries[-1])


def stream_run(server, *args: str, transport: str = "h2c") -> dict:
    engine = [str(engine_binary()), *target_of(server, transport), "--json", *args]
    done = subprocess.run(engine, capture_output=True, text=True, timeout=60)
    return summary_of(done)


def open_streams(server, want: int, within_s: float = 5.0) -> int:
    """The server's count of open Subscribe streams, once it is `want` (or at the limit)."""
    deadline = time.monotonic() + within_s
    while (seen := server.stats()["grpc"]["open"]) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return seen


@pytest.mark.parametrize("transport", ["h2c", "h2"])
def test_held_subscribe_streams_count_every_delivery_the_server_sent_in_order(transport):
    with ContestantServer(find("go-nethttp")) as server:
        emit(server, "e1", 100)
        before = server.stats()["grpc"]
        args = ["--grpc-stream", "e1", "-c", "2", "--streams", "4", "-d", "2s"]
        engine = [str(engine_binary()), *target_of(server, transport), "--json", *args]
        with subprocess.Popen(engine, stdout=subprocess.PIPE, text=True) as running:
            held = open_streams(server, 8)
            summary = summary_of(running.communicate(timeout=60))
        after = server.stats()["grpc"]
    events = summary["events"]
    assert held == 8 and after["calls"] - before["calls"] == 8
    assert errors_of(summary) == {} and events["reconnects"] == 0
    sent = after["deliveries"] - before["deliveries"]
    # Each stream may have one cycle in flight as the run ends, and one more sent before its
    # cancellation is noticed.
    assert sent - 2 * 8 <= events["received"] <= sent and events["received"] > 0
    assert (events["lost"], events["duplicated"], events["reordered"]) == (0, 0, 0)
    assert summary["event_delay_us"]["count"] == events["received"]


def test_a_stream_ended_by_its_deadline_is_its_planned_end_and_the_slot_subscribes_again():
    with ContestantServer(find("go-nethttp")) as server:
        emit(server, "e1", 50)
        summary = stream_run(
            server, "--grpc-stream", "e1", "--push-ms", "300", "-c", "1", "-d", "1s"
        )
    events = summary["events"]
    assert errors_of(summary) == {}
    assert events["grpc_deadlines"] >= 2 and events["reconnects"] >= events["grpc_deadlines"] - 1
    assert events["received"] > 0 and summary["answered"] == events["grpc_deadlines"]


def test_a_server_that_ignores_the_deadline_is_cut_by_the_engines_timeout(grpc_dir):
    with ContestantServer(find("reference-grpc"), settings={"fault": "no_deadline"}) as server:
        emit(server, "e1", 50)
        summary = stream_run(
            server,
            "--grpc-stream",
            "e1",
            "--push-ms",
            "200",
            "--timeout",
            "200ms",
            "-d",
            "1.5s",
            "-c",
            "1",
        )
    assert set(errors_of(summary)) == {"timeout"} and summary["events"]["grpc_deadlines"] == 0
    assert summary["events"]["received"] > 0


def test_a_trailers_only_refusal_counts_each_stream_by_its_grpc_status(grpc_dir):
    with ContestantServer(find("reference-grpc"), settings={"fault": "refuse_streams"}) as server:
        summary = stream_run(server, "--grpc-stream", "e1", "-c", "1", "-d", "500ms")
    errors = errors_of(summary)
    assert set(errors) == {"grpc_unavailable"} and errors["grpc_unavailable"] == summary["answered"]
    assert summary["status"]["2xx"] == summary["answered"] > 0
    assert summary["events"]["received"] == 0


def test_a_stream_cut_inside_a_delivery_counts_the_two_before_and_the_cut(grpc_dir):
    with ContestantServer(find("reference-grpc"), settings={"fault": "cut_streams"}) as server:
        emit(server, "e1", 50)
        summary = stream_run(server, "--grpc-stream", "e1", "-c", "1", "-d", "1s")
    events, errors = summary["events"], errors_of(summary)
    cuts = sum(errors.values())
    assert set(errors) <= {"closed", "reset"} and cuts >= 2
    # Each stream gave two whole deliveries before its third was cut.
    assert cuts * 2 <= events["received"] <= (cuts + 1) * 2
    assert events["reconnects"] >= cuts and summary["answered"] == 0


def test_a_grpc_stream_plan_without_an_http2_setting_is_refused_by_name():
    refused = subprocess.run(
        [str(engine_binary()), "http://127.0.0.1:9/", "--grpc-stream", "e1", "-d", "1s"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "grpc-stream runs on HTTP/2 alone" in refused.stderr
