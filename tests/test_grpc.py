"""gRPC (spec §16): verify's cases pass on go-nethttp (grpc-go), and each check fails
against tests/reference_grpc.py when its fault breaks the rule the check judges."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import TESTS, run_check, write_manifest

from serverlab.base.paths import REPO_ROOT
from serverlab.cli import cli
from serverlab.commands import plan_suite
from serverlab.conformance.checks import grpcwire
from serverlab.conformance.outcome import FAIL, PASS
from serverlab.conformance.verify import verify_contestant
from serverlab.contestant.manifest import Manifest, discover, find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution import executor
from serverlab.run.execution.engine import engine_binary
from serverlab.run.execution.testplan import bind
from serverlab.run.plan import planner

FAULTS = [
    "none",
    "status_in_headers",
    "no_limit",
    "unknown_ok",
    "perf_short",
    "chat_late",
    "no_deadline",
    "keeps_gone",
    "seq_gap",
    "no_validation",
    "unavailable",
    "refuse_streams",
    "cut_streams",
    "chat_garbled",
    "slow_above_rate",
]
GRPC_MANIFEST = f"""
name = "reference-grpc"
language = "python"
architecture = "asyncio event loop"
implements = ["perf", "control", "push", "h2c", "grpc"]
version = "{sys.executable} --version"
start = "{sys.executable} {TESTS / "reference_grpc.py"} --port {{port}} --h2c-port {{h2c_port}} \
--host {{host}} --fault {{fault}}"
ready_timeout_s = 15

[tunables.fault]
default = "none"
type = "word"
words = {FAULTS!r}
"""
# Each check, and the fault of the reference server that breaks the rule it judges.
BROKEN = [
    ("grpc_perf", {}, "status_in_headers"),
    ("grpc_perf", {}, "perf_short"),
    ("grpc_echo", {"size": "over"}, "no_limit"),
    ("grpc_unknown", {"path": "/serverlab.v1.Lab/Nope"}, "unknown_ok"),
    ("grpc_unknown", {"path": "/other.v1.Service/Perf"}, "unknown_ok"),
    ("grpc_bad_subscribe", {"events": ["bad name"]}, "no_validation"),
    ("grpc_deadline", {"timeout_ms": 300}, "no_deadline"),
    ("grpc_cancel", {}, "keeps_gone"),
    ("grpc_subscribe", {}, "seq_gap"),
    ("grpc_chat", {}, "chat_late"),
    ("grpc_foreign", {}, "perf_short"),
]


@pytest.fixture
def grpc_dir(contestants_dir):
    write_manifest(contestants_dir, "reference-grpc", GRPC_MANIFEST)
    return contestants_dir


GRPC_CONTESTANTS = sorted(
    entry.name for entry in discover() if isinstance(entry, Manifest) and "grpc" in entry.implements
)


@pytest.mark.parametrize("name", GRPC_CONTESTANTS)
def test_each_contestant_that_claims_grpc_passes_every_grpc_case_where_it_serves_it(name):
    report = verify_contestant(find(name), pattern="grpc.*")
    failed = [(r.case_id, r.status, r.reason) for r in report.results if r.status != PASS]
    # A TLS case is checked wherever the contestant serves gRPC over TLS: every one does.
    unchecked = [r.case_id for r in report.results if "nothing to check" in r.observed]
    assert len(report.results) == 16 and not failed and not unchecked and not report.error


@pytest.mark.parametrize("check", sorted({kind for kind, _params, _fault in BROKEN}))
def test_a_reference_server_that_keeps_the_rules_passes_each_grpc_check(grpc_dir, check):
    params = next(params for kind, params, _fault in BROKEN if kind == check)
    with ContestantServer(find("reference-grpc")) as server:
        outcome = run_check(server, check, params)
    assert outcome.status == PASS, outcome.reason


@pytest.mark.parametrize(("check", "params", "fault"), BROKEN)
def test_each_grpc_check_fails_against_a_server_that_breaks_its_rule(
    grpc_dir, check, params, fault
):
    with ContestantServer(find("reference-grpc"), settings={"fault": fault}) as server:
        outcome = run_check(server, check, params)
    assert outcome.status == FAIL, outcome.observed


def test_the_echo_limit_is_a_message_of_exactly_four_mebibytes_encoded():
    data = bytes(4 * 1024 * 1024 - 5)
    assert len(grpcwire.encode([(1, data)])) == 4 * 1024 * 1024
    assert grpcwire.decode(grpcwire.encode([(1, data), (2, -3)])) == {1: data, 2: -3}


def test_a_message_cut_short_does_not_decode():
    with pytest.raises(ValueError, match="runs past"):
        grpcwire.decode(grpcwire.encode([(1, b"hello")])[:-1])


def engine_summary(*args: str) -> dict:
    done = subprocess.run(
        [str(engine_binary()), *args, "--json"], capture_output=True, text=True, timeout=60
    )
    summaries = [line for line in done.stdout.splitlines() if '"type":"summary"' in line]
    assert summaries, done.stderr[-500:]
    return json.loads(summaries[-1])


def errors_of(summary: dict) -> dict:
    return {kind: n for kind, n in summary["errors"].items() if n}


@pytest.mark.parametrize("transport", ["h2c", "h2"])
def test_the_engines_grpc_calls_are_the_servers_calls_over_h2c_and_tls(transport):
    with ContestantServer(find("go-nethttp")) as server:
        if transport == "h2c":
            target = [f"http://127.0.0.1:{server.h2c_port}/", "--h2c"]
        else:
            target = [f"https://127.0.0.1:{server.tls_port}/", "--h2"]
            target += ["--tls-ca", str(server.tls.ca_cert)]
        before = server.stats(5.0)["grpc"]["calls"]
        summary = engine_summary(
            *target, "--grpc-unary", "--streams", "4", "-c", "2", "--requests", "400"
        )
        calls = server.stats(5.0)["grpc"]["calls"] - before
    assert summary["answered"] == 400 and errors_of(summary) == {}
    assert summary["status"]["2xx"] == 400 and calls == 400


def test_the_engine_echoes_four_mebibytes_and_refuses_a_plan_of_more():
    with ContestantServer(find("go-nethttp")) as server:
        target = f"http://127.0.0.1:{server.h2c_port}/"
        largest = 4 * 1024 * 1024 - 5
        summary = engine_summary(
            target,
            "--h2c",
            "--grpc-unary",
            "--echo-bytes",
            str(largest),
            "--requests",
            "3",
            "-c",
            "1",
        )
    assert summary["answered"] == 3 and errors_of(summary) == {}
    assert summary["bytes_read"] > 3 * largest
    refused = subprocess.run(
        [str(engine_binary()), target, "--h2c", "--grpc-unary", "--echo-bytes", str(largest + 1)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "echo_bytes must be at most" in refused.stderr


def test_the_engine_counts_calls_by_their_grpc_status(grpc_dir):
    with ContestantServer(find("reference-grpc"), settings={"fault": "unavailable"}) as server:
        target = f"http://127.0.0.1:{server.h2c_port}/"
        summary = engine_summary(target, "--h2c", "--grpc-unary", "--requests", "50")
    assert summary["answered"] == 50 and summary["status"]["2xx"] == 50
    assert errors_of(summary) == {"grpc_unavailable": 50}


def test_the_engine_counts_a_reply_that_is_not_one_message_as_no_status(grpc_dir):
    with ContestantServer(
        find("reference-grpc"), settings={"fault": "status_in_headers"}
    ) as server:
        target = f"http://127.0.0.1:{server.h2c_port}/"
        summary = engine_summary(target, "--h2c", "--grpc-unary", "--requests", "20")
    assert errors_of(summary) == {"grpc_no_status": 20}


OWN_LISTENER_MANIFEST = GRPC_MANIFEST.replace('"h2c", "grpc"]', '"grpc"]\ngrpc_listener = "own"')
OWN_LISTENER_MANIFEST = OWN_LISTENER_MANIFEST.replace("{h2c_port}", "{grpc_port}")


def test_a_grpc_server_on_its_own_port_is_checked_there_and_not_over_tls(contestants_dir):
    write_manifest(contestants_dir, "reference-grpc", OWN_LISTENER_MANIFEST)
    with ContestantServer(find("reference-grpc")) as server:
        assert server.grpc_port == server.part_ports["grpc_port"] and server.h2c_port is None
        assert server.grpc_tls_port is None
        assert executor._grpc_ports(server) == {"grpc_port": server.grpc_port}
        target = bind({"target": planner.GRPC_TARGET}, host="127.0.0.1", **server.part_ports)
        assert target["target"] == f"http://127.0.0.1:{server.grpc_port}"
        served = run_check(server, "grpc_perf", {})
        not_served = run_check(server, "grpc_perf", {"transport": "h2"})
    assert served.status == PASS, served.reason
    assert "no gRPC served over h2" in " ".join(not_served.observed)


def test_a_shared_grpc_server_is_called_on_its_h2c_port(grpc_dir):
    with ContestantServer(find("reference-grpc")) as server:
        assert server.grpc_port == server.h2c_port and server.grpc_tls_port is None


def test_verify_says_why_a_contestant_does_not_claim_grpc():
    result = CliRunner().invoke(cli, ["verify", "nginx", "--case", "grpc.*"])
    assert "not claimed (not checked): grpc" in result.output
    assert f"  grpc: {find('nginx').not_claimed['grpc']}" in result.output


def test_the_grpc_suite_plans_every_grpc_test_of_a_server_with_its_own_grpc_listener():
    # rust-zhtta and ruby-eventmachine serve gRPC on listeners of their own, with no HTTP/2
    # face: only their h2c GET /perf is refused, and every plan passes the engine's check.
    planned = plan_suite(str(REPO_ROOT / "suites" / "grpc.toml"), 1.0, None, None, "quick")
    refused = sorted(refused.line() for refused in planned.refused)
    assert len(refused) == 2 and all("perf-rate" in line for line in refused), refused
    assert all("does not claim the spec part `h2c`" in line for line in refused)
    ran = {(p.scenario, p.contestant) for p in planned.plans}
    for name in ("rust-zhtta", "ruby-eventmachine"):
        assert {("unary-rate", name), ("stream", name), ("perf-rate", name)} <= ran
    assert {plan.contestant for plan in planned.plans} == set(GRPC_CONTESTANTS)
