"""The engine's `grpc-chat` (spec §16's bidirectional Chat) against go-nethttp's grpc-go
server and tests/reference_grpc.py's faults: one held stream per client, each message timed
to its echo under closed and open loop, an echo that is late or not the message counted;
and open-loop gRPC (chat and unary) spread over a pool of connections, as wrk2's is."""

import subprocess

import pytest
from conftest import write_manifest
from test_grpc import GRPC_MANIFEST, engine_summary, errors_of

from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import engine_binary


@pytest.fixture
def grpc_dir(contestants_dir):
    write_manifest(contestants_dir, "reference-grpc", GRPC_MANIFEST)
    return contestants_dir


def chat(server, *args: str) -> dict:
    return engine_summary(f"http://127.0.0.1:{server.h2c_port}/", "--h2c", "--grpc-chat", *args)


def test_each_client_holds_one_chat_stream_and_every_message_is_answered_by_its_echo():
    with ContestantServer(find("go-nethttp")) as server:
        before = server.stats()["grpc"]["calls"]
        args = ["-c", "2", "--streams", "4", "--requests", "2000", "--chat-bytes", "100"]
        summary = chat(server, *args)
        calls = server.stats()["grpc"]["calls"] - before
    assert summary["answered"] == 2000 and errors_of(summary) == {}
    assert summary["latency_us"]["count"] == 2000 and summary["status"]["2xx"] == 2000
    assert calls == 8 and summary["connections_opened"] == 2


@pytest.mark.parametrize("behaviour", ["--grpc-chat", "--grpc-unary"])
def test_open_loop_arrivals_share_a_pool_of_connections_and_are_timed_from_their_schedule(
    behaviour,
):
    with ContestantServer(find("go-nethttp")) as server:
        target = f"http://127.0.0.1:{server.h2c_port}/"
        args = ("-R", "200", "--requests", "200", "-c", "4")
        summary = engine_summary(target, "--h2c", behaviour, *args)
    # A budget, not a duration, ends the run: a run cut at a deadline drops what is still in
    # flight then, as many arrivals as the server's latency spans on a slow machine.
    assert summary["requests"] == summary["answered"] == 200 and errors_of(summary) == {}
    assert summary["lag_us"]["count"] == summary["answered"]
    assert summary["connections_opened"] == 4


def test_an_echo_that_is_not_the_message_is_a_parse_error(grpc_dir):
    with ContestantServer(find("reference-grpc"), settings={"fault": "chat_garbled"}) as server:
        summary = chat(server, "--chat-bytes", "10", "--requests", "20", "-c", "1")
    assert errors_of(summary) == {"parse": 20} and summary["answered"] == 0


def test_an_echo_held_back_is_a_timeout_and_the_next_message_goes_on_a_new_stream(grpc_dir):
    with ContestantServer(find("reference-grpc"), settings={"fault": "chat_late"}) as server:
        summary = chat(server, "--timeout", "200ms", "--requests", "3", "-c", "1")
        calls = server.stats()["grpc"]["calls"]
    assert errors_of(summary) == {"timeout": 3} and summary["answered"] == 0
    assert calls == 3


def test_a_chat_message_over_a_mebibyte_is_refused():
    refused = subprocess.run(
        [
            str(engine_binary()),
            "http://127.0.0.1:9/",
            "--h2c",
            "--grpc-chat",
            "--chat-bytes",
            str(1024 * 1024),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "grpc-chat echo_bytes must be at most" in refused.stderr
