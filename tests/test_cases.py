import pytest

from serverlab.conformance.cases import CaseFileError, load_cases, select
from serverlab.conformance.checks import CHECKS
from serverlab.conformance.checks.framing import params_problem
from serverlab.contestant.manifest import SPEC_PARTS


def test_the_spec_cases_load_and_name_known_checks():
    cases = load_cases()
    assert {case.part for case in cases} == set(SPEC_PARTS) - set()
    for case in cases:
        assert case.about, f"{case.id} says what it checks"
        assert case.steps or case.check in CHECKS, case.id


def test_every_check_kind_is_used_by_some_case():
    used = {case.check for case in load_cases() if case.check}
    assert used == set(CHECKS)


def test_issue_2_coverage_is_there():
    ids = {case.id for case in load_cases()}
    wanted = {
        "http.oversize_header",
        "http.keepalive",
        "http.connection_close",
        "files.traversal_encoded_dots",
        "files.traversal_absolute",
        "files.traversal_backslash",
        "upload.chunked",
        "control.logging_malformed_json",
        "push.clear_unknown",
        "push.oversize",
        "push.longpoll_timeout",
        "push.longpoll_event",
        "push.comet_stream",
        "push.fanout",
        "push.stats",
        "syslog.tcp_octet_counting",
        "syslog.tcp_split_octet",
        "syslog.udp",
    }
    assert wanted <= ids


def test_issue_16_coverage_is_there():
    cases = {case.id: case for case in load_cases()}
    wanted = {
        "sse.stream",
        "sse.heartbeat",
        "sse.replay",
        "sse.replay_composite",
        "sse.gap",
        "sse.no_events",
        "sse.bad_last_event_id",
        "websocket.echo",
        "websocket.subscribe",
        "websocket.publish",
        "websocket.ping",
        "websocket.close",
        "websocket.deflate_declined",
        "websocket.not_upgrade",
        "websocket.wrong_version",
        "websocket.unmasked",
        "websocket.invalid_utf8",
        "websocket.oversize",
        "websocket.unknown_type",
    }
    assert wanted <= set(cases)
    # Gone subscribers: a SHOULD for the parts of 1.0, a MUST for the new ones (spec §6).
    levels = {case_id: cases[case_id].level for case_id in cases if "gone" in case_id}
    assert levels == {
        "push.gone_longpoll": "should",
        "push.gone_comet": "should",
        "sse.gone": "must",
        "websocket.gone": "must",
    }
    raw = [case for case in cases.values() if case.check == "ws_bad_frame"]
    assert all(case.bad_input for case in raw), "verify checks the server goes on serving"


def test_issue_13_framing_coverage_is_there():
    framing = {case.id: case for case in load_cases() if case.check == "framing"}
    wanted = {
        "http.framing_cl_and_te",
        "http.framing_cl_differing_lines",
        "http.framing_cl_differing_list",
        "http.framing_cl_plus",
        "http.framing_te_unknown",
        "http.framing_te_chunked_not_last",
        "http.framing_te_http10",
        "http.framing_te_obs_fold",
        "http.framing_chunk_size_hex_prefix",
        "http.framing_chunk_ext_ctl",
        "http.framing_legal_cl_identical_list",
        "http.framing_legal_cl_leading_zeros",
        "http.framing_legal_chunk_ext",
    }
    assert wanted <= set(framing)
    for case in framing.values():
        assert params_problem(case.params) is None, case.id
        assert case.bad_input, f"{case.id}: verify checks new connections are served after it"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"head": "", "refuse": [400], "colour": 1}, "unknown param colour"),
        ({"head": ""}, "give refuse"),
        ({"serve": "keep"}, "needs decoded"),
        ({"serve": "maybe", "decoded": ""}, "'close' or 'keep'"),
        ({"serve": "keep", "decoded": "", "warn_refuse": [400]}, "goes with refuse"),
    ],
)
def test_bad_framing_params_are_named(params, message):
    assert message in params_problem(params)


def test_select_by_part_and_glob():
    cases = load_cases()
    perf = select(cases, ["perf"])
    assert perf and all(case.part == "perf" for case in perf)
    traversal = select(cases, ["files", "perf"], "files.traversal_*")
    assert len(traversal) >= 7 and all("traversal" in case.id for case in traversal)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[case]]\nid = "perf.x"\nabout = "a"\ncolour = 1\ncheck = "keepalive"', "unknown key"),
        ('[[case]]\nid = "files.x"\ncheck = "keepalive"', "start with 'perf.'"),
        ('[[case]]\nid = "perf.x"', "either request/steps or a check"),
        ('[[case]]\nid = "perf.x"\nrequest = { target = "/", verb = "GET" }', "request key verb"),
        ('[[case]]\nid = "perf.x"\nlevel = "may"\ncheck = "keepalive"', "level"),
        (
            '[[case]]\nid = "perf.x"\ncheck = "keepalive"\n[[case]]\nid = "perf.x"\n'
            'check = "keepalive"',
            "duplicate case ids",
        ),
    ],
)
def test_bad_case_files_are_refused(tmp_path, text, message):
    (tmp_path / "perf.toml").write_text(text)
    with pytest.raises(CaseFileError, match=message):
        load_cases(tmp_path)
