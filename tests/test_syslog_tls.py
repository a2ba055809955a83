"""Syslog over TLS (spec §15, part `syslog-tls`): its placeholders, and verify's syslog-tls
cases against the reference server (tests/reference_syslogtls.py), correct and with each
fault that breaks one of their rules."""

import pytest
from conftest import REFERENCE_MANIFEST, write_manifest

from serverlab.conformance.outcome import FAIL, PASS, WARN
from serverlab.conformance.verify import verify_contestant
from serverlab.contestant.manifest import UNSPOKEN_BY_RUNS, ManifestError, find, load_manifest
from serverlab.contestant.server import ContestantServer

SYSLOG_TLS_MANIFEST = (
    REFERENCE_MANIFEST.replace('name = "reference"', 'name = "reference-syslog-tls"')
    .replace('"syslog-parse"]', '"syslog-parse", "syslog-tls"]')
    .replace(
        "{clock_skew_ms}", "{clock_skew_ms} --syslog-tls {syslog_tls_port} {tls_cert} {tls_key}"
    )
)
assert '"syslog-tls"]' in SYSLOG_TLS_MANIFEST, "the reference manifest's parts changed"


@pytest.fixture
def syslog_tls_dir(contestants_dir):
    write_manifest(contestants_dir, "reference-syslog-tls", SYSLOG_TLS_MANIFEST)
    return contestants_dir


def verify(fault: str = "none", pattern: str = "syslog-tls.*"):
    return verify_contestant(
        find("reference-syslog-tls"), pattern=pattern, settings={"fault": fault}, give_up_s=1.0
    )


def test_a_correct_syslog_tls_server_passes_every_syslog_tls_case(syslog_tls_dir):
    report = verify()
    assert [(r.case_id, r.status, r.reason) for r in report.results if r.status != PASS] == []
    assert len(report.results) == 18
    observed = {r.case_id: r.observed for r in report.results}
    assert observed["syslog-tls.close_notify"] == "close_notify"
    assert observed["syslog-tls.bad_length_overflow"] == "close_notify"


def test_a_run_leaves_syslog_over_tls_to_verify_as_the_engine_does_not_speak_it(syslog_tls_dir):
    # What `serverlab run` asks before its tests (commands._verify_all): syslog.tcp_*
    # and syslog-tls.octet_*, and only the cleartext ones run.
    report = verify_contestant(
        find("reference-syslog-tls"), pattern="syslog*.[to]c*", leave_out=UNSPOKEN_BY_RUNS
    )
    assert report.ok and {r.case_id.split(".")[0] for r in report.results} == {"syslog"}


RSYSLOG_LIKE = """
name = "x"
language = "c"
architecture = "a"
version = "true"
implements = {implements}
start = "server --syslog {{syslog_port}} --host {{host}} {tail}"
syslog_count = "true"
"""


@pytest.mark.parametrize(
    ("implements", "tail", "message"),
    [
        ('["syslog"]', "--tls {syslog_tls_port}", r"unknown placeholder \{syslog_tls_port\}"),
        (
            '["syslog", "syslog-tls"]',
            "--tls {syslog_tls_port} {tls_cert}",
            r"does not use \{tls_key\}",
        ),
        ('["perf", "syslog-tls"]', "{port}", "part 'syslog-tls' requires 'syslog'"),
    ],
)
def test_syslog_tls_placeholders_go_only_to_a_server_that_claims_it_with_syslog(
    tmp_path, implements, tail, message
):
    text = RSYSLOG_LIKE.format(implements=implements, tail=tail)
    with pytest.raises(ManifestError, match=message):
        load_manifest(write_manifest(tmp_path, "x", text))


def test_a_syslog_only_server_gets_the_runs_key_material_and_no_https_port(tmp_path):
    text = RSYSLOG_LIKE.format(
        implements='["syslog", "syslog-tls"]', tail="--tls {syslog_tls_port} {tls_cert} {tls_key}"
    )
    manifest = load_manifest(write_manifest(tmp_path, "x", text))
    server = ContestantServer(manifest, workdir=tmp_path / "work")
    assert not manifest.speaks_http and server.serves_tls and server.tls_port is None
    values = server.placeholder_values()
    assert values["syslog_tls_port"] == str(server.syslog_tls_port) != values["syslog_port"]
    assert values["tls_key"] == str(tmp_path / "work" / "tls" / "server.key")


@pytest.mark.parametrize(
    ("fault", "pattern", "failing", "warned"),
    [
        # Every MSG-LEN before a wrapped one was taken; a leading zero counted only warns,
        # and a connection kept open after a bad frame warns.
        (
            "syslog_tls_lenient",
            "*bad_length_[lo]*",
            {"bad_length_overflow"},
            {"bad_length_leading_zero"},
        ),
        (
            "syslog_tls_drops_batch",
            "*bad_length_[zn]*",
            {"bad_length_zero", "bad_length_not_a_number"},
            set(),
        ),
        ("syslog_tls_per_read", "*.[so][pc]*", {"split_in_length", "split_in_message"}, set()),
        ("syslog_tls_counts_cut", "*.[io][nc]*", {"incomplete_not_counted"}, set()),
        ("syslog_tls_serial", "*.truncated_hello", {"truncated_hello"}, set()),
        ("syslog_tls_plain_fallback", "*.plaintext", {"plaintext"}, set()),
        ("syslog_tls_other_cert", "*.handshake_*", {"handshake_13", "handshake_12"}, set()),
        ("no_close_notify", "*.close_notify", set(), {"close_notify"}),
        ("tls11", "*.refuses_*", {"refuses_tls11", "refuses_tls10", "refuses_non_aead"}, set()),
    ],
)
def test_each_syslog_tls_fault_fails_exactly_its_cases(
    syslog_tls_dir, fault, pattern, failing, warned
):
    report = verify(fault, f"syslog-tls{pattern}")
    assert report.results, f"no case matches {pattern}"
    found = {r.case_id.removeprefix("syslog-tls."): r.status for r in report.results}
    assert {case for case, status in found.items() if status == FAIL} == failing
    assert {case for case, status in found.items() if status == WARN} == warned


def test_a_protocol_limit_may_name_a_syslog_tls_case_and_then_names_its_warning(contestants_dir):
    limits = '[protocol_limits]\n"syslog-tls.close_notify" = "its TLS driver sends no bye"\n'
    write_manifest(contestants_dir, "reference-syslog-tls", SYSLOG_TLS_MANIFEST + "\n" + limits)
    report = verify("no_close_notify", "syslog-tls.close_notify")
    assert report.error == ""
    [result] = report.results
    assert result.status == WARN
    assert result.reason.startswith("protocol limit: its TLS driver sends no bye [")
