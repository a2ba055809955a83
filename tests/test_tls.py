"""TLS and HTTP/2 (spec §12-§14): the run's throwaway key material, the placeholders of
the transport parts, and verify's TLS and HTTP/2 checks against real servers that keep or
break each rule (tests/reference_server.py over TLS, tests/reference_h2.py over h2c)."""

import stat
import sys

import pytest
from conftest import REFERENCE_MANIFEST, TESTS, run_check, write_manifest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from serverlab.base.tlskeys import KeyTypeError, make_key_material
from serverlab.conformance.cases import load_cases
from serverlab.conformance.checks import carried
from serverlab.conformance.outcome import FAIL, PASS, WARN
from serverlab.conformance.verify import verify_contestant
from serverlab.contestant.manifest import ManifestError, find, load_manifest
from serverlab.contestant.server import ContestantServer

TLS_MANIFEST = (
    REFERENCE_MANIFEST.replace('name = "reference"', 'name = "reference-tls"')
    .replace('"syslog-parse"]', '"syslog-parse", "tls"]')
    .replace("{clock_skew_ms}", "{clock_skew_ms} --tls {tls_port} {tls_cert} {tls_key}")
)
assert '"tls"]' in TLS_MANIFEST, "the reference manifest's parts changed: claim tls anew"
H2C_MANIFEST = f"""
name = "reference-h2c"
language = "python"
architecture = "asyncio event loop"
implements = ["perf", "h2c"]
version = "{sys.executable} --version"
start = "{sys.executable} {TESTS / "reference_h2.py"} --port {{port}} --h2c-port {{h2c_port}} \
--host {{host}} --mode {{mode}}"
ready_timeout_s = 15

[tunables.mode]
default = "good"
type = "word"
words = ["good", "silent", "lax", "hold", "strict", "late"]
"""


@pytest.fixture
def transports_dir(contestants_dir):
    write_manifest(contestants_dir, "reference-tls", TLS_MANIFEST)
    write_manifest(contestants_dir, "reference-h2c", H2C_MANIFEST)
    return contestants_dir


def test_the_key_files_are_the_users_alone_live_in_the_server_folder_and_go_with_it(
    transports_dir,
):
    with ContestantServer(find("reference-tls")) as server:
        material = server.tls
        assert material.folder.parent == server.workdir
        assert stat.S_IMODE(material.folder.stat().st_mode) == 0o700
        assert {stat.S_IMODE(path.stat().st_mode) for path in material.files} == {0o600}
        assert f"--tls {server.tls_port} {material.cert} {material.key}" in server.start_command
    assert not server.workdir.exists() and not material.key.exists()


def test_the_certificate_names_loopback_and_is_signed_by_the_runs_own_ca(tmp_path):
    material = make_key_material(tmp_path / "tls", "rsa-2048")
    ca = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
    cert = x509.load_pem_x509_certificate(material.cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert isinstance(cert.public_key(), rsa.RSAPublicKey) and cert.public_key().key_size == 2048
    with pytest.raises(KeyTypeError, match="unknown TLS key type 'dsa'"):
        make_key_material(tmp_path / "other", "dsa")


@pytest.mark.parametrize(
    ("implements", "start_tail", "message"),
    [
        ('["perf"]', "--tls {tls_port}", r"unknown placeholder \{tls_port\}"),
        ('["perf", "tls"]', "--tls {tls_port} {tls_cert}", r"does not use \{tls_key\}"),
        ('["perf", "h2"]', "", "part 'h2' requires 'tls'"),
        ('["h2c"]', "--h2c {h2c_port}", "names only transports"),
    ],
)
def test_transport_placeholders_go_only_to_servers_that_claim_the_part(
    tmp_path, implements, start_tail, message
):
    text = (
        'name = "x"\nlanguage = "c"\narchitecture = "a"\nversion = "true"\n'
        f"implements = {implements}\n"
        f'start = "server --port {{port}} --host {{host}} {start_tail}"\n'
    )
    with pytest.raises(ManifestError, match=message):
        load_manifest(write_manifest(tmp_path, "x", text))


def test_a_server_that_claims_no_transport_still_verifies_and_is_told_what_it_does_not_claim(
    contestants_dir,
):
    # perf.*, tls.*, h2.* and h2c.*, not push.* nor http.*
    report = verify_contestant(find("reference"), pattern="[pth][e2l]*")
    assert report.ok and {r.case_id.split(".")[0] for r in report.results} == {"perf"}
    assert report.not_claimed == ["tls", "h2", "h2c"]


def test_a_run_leaves_out_the_transports_it_does_not_speak_and_verify_alone_checks_them(
    transports_dir,
):
    # What `serverlab run` asks before its tests (commands._verify_all): perf.* and tls.*
    # asked, and no TLS case runs.
    run = verify_contestant(
        find("reference-tls"), pattern="[pt][el]*.[!o]*", leave_out=frozenset({"tls", "h2", "h2c"})
    )
    assert run.ok and {r.case_id.split(".")[0] for r in run.results} == {"perf"}
    alone = verify_contestant(find("reference-tls"), pattern="tls.alpn*")
    assert [r.case_id for r in alone.results] == ["tls.alpn"]


def test_a_correct_tls_server_passes_the_tls_cases(transports_dir):
    # Its posture, then the parts carried over TLS but push and SSE (slow; see verify):
    # WebSocket's after its cleartext cases, whose event names the carried ones must not reuse.
    report = verify_contestant(find("reference-tls"), pattern="tls.[!o]*")
    carried = verify_contestant(find("reference-tls"), pattern="tls.over_[cfu]*")
    after = verify_contestant(find("reference-tls"), pattern="*websocket*")
    results = report.results + carried.results + after.results
    assert [(r.case_id, r.reason) for r in results if r.status != PASS] == []
    observed = {r.case_id: r.observed for r in results}
    assert observed["tls.resumption"] == "TLS 1.3 resumed, TLS 1.2 resumed"
    assert observed["tls.over_websocket"] == "17 websocket cases over tls"
    assert [r.case_id for r in after.results][-2:] == [
        "websocket.unknown_type",
        "tls.over_websocket",
    ]
    assert report.not_claimed == []


@pytest.mark.parametrize(
    ("fault", "failing"),
    [
        # TLS 1.1 has no AEAD suite: a server that takes it takes CBC suites in 1.2 too.
        ("tls11", {"tls.refuses_tls11", "tls.refuses_tls10", "tls.refuses_non_aead"}),
        ("tls_cbc", {"tls.refuses_non_aead"}),
        ("alpn_h2", {"tls.alpn"}),
        ("no_close_notify", {"tls.close_notify_13", "tls.close_notify_12"}),
        ("tls_renegotiation", {"tls.renegotiation_refused"}),
    ],
)
def test_each_tls_fault_fails_exactly_its_cases(transports_dir, fault, failing):
    # Not the other parts carried over TLS: they are the same with every fault.
    report = verify_contestant(
        find("reference-tls"), pattern="tls.[!o]*", settings={"fault": fault}, give_up_s=1.0
    )
    assert {r.case_id for r in report.results if r.status == FAIL} == failing
    assert len(report.results) == 13


def test_an_exchange_carried_over_tls_fails_as_it_does_in_cleartext(transports_dir):
    report = verify_contestant(
        find("reference-tls"), pattern="tls.over_perf", settings={"fault": "no_date_perf"}
    )
    [result] = report.results
    assert result.status == FAIL and "perf.get: 200 response without a Date header" in result.reason


H2C_CASES = [
    ("h2_bad_frame", {"transport": "h2c", "frame": "data_stream0"}),
    ("h2_bad_frame", {"transport": "h2c", "frame": "enable_push_2"}),
    ("h2_excess_streams", {"transport": "h2c"}),
    ("h2c_http1", {}),
    ("h2_bad_frame", {"transport": "h2c", "frame": "rst_idle"}),
    (
        "h2_bad_frame",
        {"transport": "h2c", "frame": "window_overflow", "code": "FLOW_CONTROL_ERROR"},
    ),
]
# Each new RFC 9113 / RFC 7541 case's frame, and the code the RFC names for it.
CONFORMANCE = [
    ("h2_bad_frame", {"transport": "h2c", "frame": frame, "code": code})
    for frame, code in (
        ("data_idle", "PROTOCOL_ERROR"),
        ("window_update_zero", "PROTOCOL_ERROR"),
        ("initial_window_too_big", "FLOW_CONTROL_ERROR"),
        ("settings_ack_payload", "FRAME_SIZE_ERROR"),
        ("ping_length", "FRAME_SIZE_ERROR"),
        ("continuation_interleaved", "PROTOCOL_ERROR"),
        ("hpack_bad_index", "COMPRESSION_ERROR"),
        ("hpack_table_size", "COMPRESSION_ERROR"),
        ("hpack_huffman_eos", "COMPRESSION_ERROR"),
    )
] + [
    ("h2_stream_error", {"transport": "h2c", "frame": frame, "code": code})
    for frame, code in (
        ("oversized_data", "FRAME_SIZE_ERROR"),
        ("data_after_end_stream", "STREAM_CLOSED"),
    )
]
MALFORMED = [
    ("h2_malformed", {"transport": "h2c", "missing": missing})
    for missing in (":method", ":path", ":scheme")
] + [
    ("h2_malformed", {"transport": "h2c", "fault": fault})
    for fault in ("duplicate_path", "uppercase_name", "connection_header", "pseudo_after_regular")
]
STRICT = [
    ("h2_continuation", {"transport": "h2c"}),
    ("h2_allowed_frame", {"transport": "h2c", "frame": "ping_ack"}),
    ("h2_allowed_frame", {"transport": "h2c", "frame": "settings_duplicates"}),
    ("h2_allowed_frame", {"transport": "h2c", "frame": "unknown_type"}),
]


# What each kind says of a server that lets the frame or the request go unanswered.
SILENT_REASONS = {
    "h2_bad_frame": "neither a GOAWAY nor a close",
    "h2_stream_error": "no RST_STREAM, GOAWAY or close",
    "h2_malformed": "got no answer",
}


def test_exchanges_carried_over_h2c_are_judged_as_in_cleartext(transports_dir):
    # reference_h2.py answers every request with its own short text: not /perf's body.
    with ContestantServer(find("reference-h2c")) as server:
        outcome = run_check(server, "carried", {"transport": "h2c", "part": "perf"})
    assert outcome.status == FAIL and outcome.observed == ["3 perf cases over h2c"]
    assert "perf.get: Content-Length 15, expected 84" in outcome.reason


@pytest.mark.parametrize(("kind", "params"), H2C_CASES + CONFORMANCE + MALFORMED)
def test_an_h2c_server_that_ignores_broken_input_fails_the_check(transports_dir, kind, params):
    with ContestantServer(find("reference-h2c"), settings={"mode": "silent"}) as server:
        outcome = run_check(server, kind, params)
    assert outcome.status == FAIL
    assert SILENT_REASONS.get(kind, "") in outcome.reason


@pytest.mark.parametrize(
    ("case", "status"),
    [
        *zip(H2C_CASES, (PASS, PASS, WARN, PASS, PASS, PASS), strict=True),
        *((case, PASS) for case in CONFORMANCE + MALFORMED + STRICT),
    ],
)
def test_an_h2c_server_that_ends_broken_connections_passes_and_a_goaway_for_excess_warns(
    transports_dir, case, status
):
    kind, params = case
    with ContestantServer(find("reference-h2c")) as server:
        outcome = run_check(server, kind, params)
    assert outcome.status == status, outcome.reason
    if status == WARN:
        assert "GOAWAY PROTOCOL_ERROR" in outcome.reason and "limit 100" in outcome.observed[0]


@pytest.mark.parametrize(("kind", "params"), MALFORMED)
def test_an_h2c_server_that_serves_a_request_missing_a_pseudo_header_fails(
    transports_dir, kind, params
):
    with ContestantServer(find("reference-h2c"), settings={"mode": "lax"}) as server:
        outcome = run_check(server, kind, params)
    assert outcome.status == FAIL and outcome.observed == ["status 200"]


@pytest.mark.parametrize(("kind", "params"), MALFORMED)
def test_an_h2c_server_that_answers_a_malformed_request_400_but_leaves_its_stream_open_fails(
    transports_dir, kind, params
):
    with ContestantServer(find("reference-h2c"), settings={"mode": "hold"}) as server:
        outcome = run_check(server, kind, params)
    assert outcome.status == FAIL and outcome.observed == ["status 400, then no answer"]


@pytest.mark.parametrize(("kind", "params"), STRICT)
def test_an_h2c_server_that_ends_the_connection_on_continuation_or_a_ping_ack_fails(
    transports_dir, kind, params
):
    with ContestantServer(find("reference-h2c"), settings={"mode": "strict"}) as server:
        outcome = run_check(server, kind, params)
    assert outcome.status == FAIL and outcome.observed == ["GOAWAY PROTOCOL_ERROR"]


@pytest.mark.parametrize(("kind", "params"), STRICT[1:])
def test_an_h2c_server_that_ends_the_connection_just_after_serving_an_allowed_frame_fails(
    transports_dir, kind, params
):
    with ContestantServer(find("reference-h2c"), settings={"mode": "late"}) as server:
        outcome = run_check(server, kind, params)
    assert outcome.status == FAIL
    assert outcome.observed == ["status 200, then GOAWAY INTERNAL_ERROR"]


def test_a_protocol_limit_turns_its_failure_into_a_warning_that_names_it(contestants_dir):
    limits = '"h2c.continuation" = "its HTTP/2 stack refuses CONTINUATION"\n'
    write_manifest(
        contestants_dir, "reference-h2c", H2C_MANIFEST + "\n[protocol_limits]\n" + limits
    )
    report = verify_contestant(
        find("reference-h2c"), pattern="h2c.[cu][on][ns]*", settings={"mode": "strict"}
    )
    by_case = {result.case_id: result for result in report.results}
    limited = by_case["h2c.continuation"]
    assert limited.status == WARN
    assert limited.reason.startswith("protocol limit: its HTTP/2 stack refuses CONTINUATION [")
    assert by_case["h2c.unsolicited_ping_ack"].status == FAIL


def test_a_protocol_limit_names_a_warning_too_and_warns_of_an_entry_that_passes(contestants_dir):
    # Mode good refuses the stream beyond the limit with GOAWAY (a WARN) and ends a
    # connection with a short PING as the RFC asks (a PASS).
    limits = (
        '"h2c.excess_streams" = "its stack ends the connection past the limit"\n'
        '"h2c.ping_length" = "its stack once kept the connection open"\n'
    )
    write_manifest(
        contestants_dir, "reference-h2c", H2C_MANIFEST + "\n[protocol_limits]\n" + limits
    )
    report = verify_contestant(find("reference-h2c"), pattern="h2c.[ep][xi]*")
    by_case = {result.case_id: result for result in report.results}
    assert set(by_case) == {"h2c.excess_streams", "h2c.ping_length"}
    limited, stale = by_case["h2c.excess_streams"], by_case["h2c.ping_length"]
    assert limited.status == WARN
    assert limited.reason.startswith(
        "protocol limit: its stack ends the connection past the limit "
        "[the stream beyond the limit got GOAWAY PROTOCOL_ERROR; "
    )
    assert stale.status == WARN
    assert stale.reason == "passes, yet the manifest's protocol_limits lists it: drop the entry"


def test_a_protocol_limit_must_name_a_tls_or_http2_case_of_its_own(contestants_dir):
    limits = '"h2c.over_perf" = "no waiver for carried exchanges"\n'
    write_manifest(
        contestants_dir, "reference-h2c", H2C_MANIFEST + "\n[protocol_limits]\n" + limits
    )
    report = verify_contestant(find("reference-h2c"), pattern="h2c.over_perf")
    named = "protocol_limits names 'h2c.over_perf', not a TLS, HTTP/2 or syslog-over-TLS case"
    assert named in report.error
    assert report.results == [] and not report.ok


def test_a_should_case_carried_over_tls_warns_as_it_does_in_cleartext(transports_dir, monkeypatch):
    # Only push's two SHOULD cases, the ones keep_gone breaks: all 28 would take half a minute.
    gone = [case for case in load_cases() if case.id in ("push.gone_longpoll", "push.gone_comet")]
    assert [case.level for case in gone] == ["should", "should"]
    monkeypatch.setattr(carried, "load_cases", lambda: gone)
    with ContestantServer(find("reference-tls"), settings={"fault": "keep_gone"}) as server:
        outcome = run_check(server, "carried", {"transport": "tls", "part": "push"})
    assert outcome.status == WARN, outcome.reason
    assert "push.gone_longpoll: " in outcome.reason and "push.gone_comet: " in outcome.reason
