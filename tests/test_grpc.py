"""gRPC (spec §16): verify's cases pass on go-nethttp (grpc-go), and each check fails
against tests/reference_grpc.py when its fault breaks the rule the check judges."""

import sys

import pytest
from conftest import TESTS, write_manifest

from serverlab.base import scratch
from serverlab.conformance.checks import CHECKS, grpcwire
from serverlab.conformance.context import VerifyContext, new_run_tag
from serverlab.conformance.fixtures import make_docroot
from serverlab.conformance.outcome import FAIL, PASS, CaseAborted, Outcome
from serverlab.conformance.verify import verify_contestant
from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer

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


def run_check(server, kind: str, params: dict) -> Outcome:
    docroot = make_docroot(scratch.make("docroot-"))
    ctx = VerifyContext(server, docroot, new_run_tag(), "grpc.x", timeout_s=2.0, give_up_s=0.5)
    outcome = Outcome()
    try:
        CHECKS[kind](ctx, params, outcome)
    except CaseAborted as aborted:
        outcome.fail(str(aborted))
    return outcome


def test_go_nethttp_passes_every_grpc_case_over_h2c_and_tls():
    report = verify_contestant(find("go-nethttp"), pattern="grpc.*")
    failed = [(r.case_id, r.status, r.reason) for r in report.results if r.status != PASS]
    assert report.results and not failed and not report.error


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
