"""The verify runner against the reference server: it passes a correct server, and each
fault of tests/reference_server.py fails exactly the cases that check the broken rule."""

import dataclasses
import json
import signal
import threading

import psutil
import pytest
from conftest import REFERENCE_MANIFEST, write_manifest

from serverlab import commands
from serverlab.conformance.cases import load_cases
from serverlab.conformance.checks.stamps import _note_read
from serverlab.conformance.outcome import FAIL, PASS, WARN
from serverlab.conformance.verify import verify_contestant
from serverlab.contestant.manifest import find
from serverlab.run.execution.testplan import ControlCall
from serverlab.run.plan import protocols
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.load import load_suite

FRAMING = {case.id for case in load_cases() if case.check == "framing"}
LEGAL_FRAMING = {case_id for case_id in FRAMING if case_id.startswith("http.framing_legal_")}


def run(fault: str = "none", pattern: str | None = None):
    # A correct server answers in time; giving up sooner keeps the fault runs short.
    patience = 3.0 if fault == "none" else 1.0
    return verify_contestant(
        find("reference"), pattern=pattern, settings={"fault": fault}, give_up_s=patience
    )


def failed(report) -> set[str]:
    return {result.case_id for result in report.results if result.status == FAIL}


def test_a_correct_server_passes_every_case(contestants_dir):
    report = run()
    assert not report.error and not report.crashes
    problems = [r for r in report.results if r.status != PASS]
    assert problems == []
    assert len(report.results) > 70
    assert report.ok


FAULTS = [
    (
        "no_date_perf",
        "[hp][te]*",  # http.* and perf.*: the http cases use /perf for their requests
        {
            "perf.get",
            "perf.query_ignored",
            "perf.wrong_method",
            "http.keepalive",
            "http.connection_close",
        },
    ),
    ("timestamp_shape", "control.*", {"control.timestamp", "control.timestamp_no_client"}),
    (
        "no_longpoll_timeout",
        "push.*",
        {"push.longpoll_timeout", "push.emitter_clear_stops", "push.stats"},
    ),
    (
        "traversal",
        "files.*",
        {
            "files.traversal_dotdot",
            "files.traversal_deep_dotdot",
            "files.traversal_encoded_dots",
            "files.traversal_encoded_slash",
            "files.traversal_absolute",
            "files.traversal_encoded_absolute",
            "files.traversal_symlink",
        },
    ),
    ("fanout_place", "push.*", {"push.fanout"}),
    (
        "no_seq",
        "push.*",
        {
            "push.longpoll_event",
            "push.comet_stream",
            "push.fanout",
            "push.seq_continues",
            "push.emitter_replace",
        },
    ),
    (
        "accept_oversize",
        "*oversize*",
        {"control.logging_oversize", "push.set_oversize", "push.oversize"},
    ),
    (
        "syslog_newline_only",
        "syslog.*",
        {"syslog.tcp_octet_counting", "syslog.tcp_mixed", "syslog.tcp_split_octet"},
    ),
    (
        "syslog_lax_parse",
        "syslog*",
        {
            "syslog-parse.bom_bad_utf8",
            "syslog-parse.truncated",
            "syslog-parse.bad_header",
            "syslog-parse.bad_pri",
            "syslog-parse.rfc3164_malformed",
            "syslog-parse.newline_framed_mix",
        },
    ),
    ("sse_no_id", "sse.*", {"sse.stream", "sse.replay", "sse.replay_composite", "sse.gap"}),
    ("sse_no_replay", "sse.*", {"sse.replay", "sse.replay_composite", "sse.gap"}),
    ("sse_no_heartbeat", "sse.*", {"sse.heartbeat"}),
    ("ws_no_echo", "websocket.*", {"websocket.echo", "websocket.deflate_declined"}),
    ("ws_accept_oversize", "websocket.*", {"websocket.oversize"}),
    ("ws_deflate", "websocket.*", {"websocket.deflate_declined"}),
    ("ws_version_400", "websocket.*", {"websocket.wrong_version"}),
    ("old_spec_version", "control.*", {"control.stats_shape"}),
    ("shares_unsaid", "[pw][ue]*", {"push.fanout", "websocket.publish"}),
    # Framed like the servers of issue 13: every framing case but the legal ones fails.
    ("lax_framing", "http.*", FRAMING - LEGAL_FRAMING),
    (
        "overstrict_framing",
        "http.*",
        {
            "http.framing_legal_cl_leading_zeros",
            "http.framing_legal_chunk_ext",
            "http.framing_legal_chunk_size_leading_zeros",
            "http.framing_legal_te_case",
        },
    ),
    (
        "double_framing",
        "[hp][te]*",
        {"perf.get", "perf.query_ignored", "http.keepalive", "http.connection_close"},
    ),
]


@pytest.mark.parametrize(("fault", "pattern", "expected"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_fails_exactly_its_cases(contestants_dir, fault, pattern, expected):
    report = run(fault, pattern)
    assert not report.error
    assert len(report.results) > len(expected), "the other cases of the part ran and passed"
    assert failed(report) == expected
    assert not report.ok


def test_a_syslog_server_started_counting_fails_every_parse_case(contestants_dir):
    report = verify_contestant(
        find("reference"), pattern="syslog*", settings={"syslog_mode": "count"}, give_up_s=1.0
    )
    parse_cases = {case.id for case in load_cases() if case.part == "syslog-parse"}
    assert len(parse_cases) >= 8
    assert failed(report) == parse_cases
    reasons = {r.reason for r in report.results if r.case_id in parse_cases}
    assert reasons == {'/stats syslog.mode is not "parse" (verify starts syslog_mode=parse)'}


def test_places_per_worker_pass_where_stats_say_so(contestants_dir):
    """Spec §6 "Workers": places numbered per share are right when /stats says so."""
    report = run("two_workers", "[cpw]*")  # control.*, perf.*, push.* and websocket.*
    ran = {result.case_id for result in report.results}
    assert {"control.stats_shape", "push.fanout", "websocket.publish"} <= ran
    assert [r for r in report.results if r.status != PASS] == []


def test_a_crash_fails_its_case_and_verify_goes_on(contestants_dir):
    report = run("crash_on_bad_json", "[cp]*")  # perf, control and push: all JSON bodies
    crashing = {
        "control.logging_malformed_json",
        "push.set_malformed_json",
        "push.malformed_json",
    }
    assert failed(report) == crashing
    assert len(report.crashes) == 3
    reasons = {r.case_id: r.reason for r in report.results if r.status == FAIL}
    assert all("server crashed (exit code 3)" in reasons[case] for case in crashing)
    assert report.results[-1].status == PASS, "the restarted server ran the remaining cases"
    assert not report.ok


def test_a_server_that_never_answers_fails_with_a_reason_instead_of_hanging(contestants_dir):
    report = run("no_longpoll_timeout", "push.longpoll_timeout")
    [result] = report.results
    assert result.status == FAIL
    assert "timed out waiting for the response head" in result.reason
    assert result.seconds < 0.4 + 1.0 + 1.0, "gave up one give_up_s after duration_ms"


def test_failures_carry_a_reason(contestants_dir):
    report = run("no_date_perf", "perf.get")
    [result] = report.results
    assert result.status == FAIL
    assert "without a Date header" in result.reason


def test_an_unbuilt_contestant_is_not_started(contestants_dir):
    manifest = find("reference")
    unbuilt = manifest.__class__(**{**manifest.__dict__, "artifacts": ("missing.jar",)})
    report = verify_contestant(unbuilt)
    assert "not built (missing missing.jar)" in report.error
    assert report.results == [] and not report.ok


@pytest.mark.parametrize(
    ("fault", "pattern", "warned"),
    [
        ("header_400", "http.*", "http.oversize_header"),
        ("split_lines", "push.comet_stream", "push.comet_stream"),
        # Stamped at the cycle's start, written 150 ms later: the clients' last arrival says
        # so (a SHOULD in spec 3.x, so a warning).
        ("early_sent", "push.sent_stamps", "push.sent_stamps"),
    ],
)
def test_should_level_problems_warn_without_failing(contestants_dir, fault, pattern, warned):
    report = run(fault, pattern)
    assert failed(report) == set()
    assert {r.case_id for r in report.results if r.status == WARN} == {warned}
    assert report.ok, "warnings alone do not fail verify"


def test_the_stamp_check_holds_what_a_server_with_few_threads_can_and_says_how_many(
    contestants_dir,
):
    """150 requests at once: the second batch of 100 gets 50 heads; a twentieth of the 150
    held are let go so that the control calls are served, and the stamps are judged over
    the 143 left."""
    report = run("few_threads", "push.sent_stamps")
    (result,) = report.results
    assert result.status == PASS, result.reason
    assert result.observed.startswith(
        "held 143 of 1000 streams: 50 more got no 200 head within 5 s; last sent at created+"
    )
    assert result.observed.endswith("cycles of 143 deliveries)")


def test_subscribers_kept_after_their_client_left_warn_for_push_and_fail_for_sse_and_ws(
    contestants_dir,
):
    report = run("keep_gone", "*gone*")
    warned = {r.case_id: r.reason for r in report.results if r.status == WARN}
    assert set(warned) == {"push.gone_longpoll", "push.gone_comet"}
    assert failed(report) == {"sse.gone", "websocket.gone"}
    assert all(
        "deliveries counted to a subscriber whose client had left" in reason
        for reason in warned.values()
    )


def limited_reference(root, limits: str) -> None:
    """A reference server whose manifest carries a framing_limits table."""
    text = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "limited"')
    write_manifest(root, "limited", text + "\n[framing_limits]\n" + limits)


def test_a_framing_limit_turns_exactly_its_failure_into_a_warning(contestants_dir):
    limited_reference(
        contestants_dir,
        '"http.framing_chunk_ext_ctl" = "its parser skips extensions"\n'
        '"http.framing_legal_chunk_ext" = "stale: it passes"\n',
    )
    report = verify_contestant(
        find("limited"),
        pattern="http.framing_*",
        settings={"fault": "lax_framing"},
        give_up_s=1.0,
    )
    by_case = {result.case_id: result for result in report.results}
    limited = by_case["http.framing_chunk_ext_ctl"]
    assert limited.status == WARN
    assert limited.reason.startswith("framing limit: its parser skips extensions [")
    assert "sent another answer" in limited.reason, "the failure itself is still shown"
    stale = by_case["http.framing_legal_chunk_ext"]
    assert stale.status == WARN and "drop the entry" in stale.reason
    assert failed(report) == FRAMING - LEGAL_FRAMING - {"http.framing_chunk_ext_ctl"}
    assert not report.ok


def test_a_framing_limit_must_name_a_framing_case(contestants_dir):
    limited_reference(contestants_dir, '"perf.get" = "no waiver for this"\n')
    report = verify_contestant(find("limited"), pattern="perf.get")
    assert "framing_limits names 'perf.get', not a framing case" in report.error
    assert report.results == [] and not report.ok


def test_node_http_stamps_sent_right_before_each_write_and_passes_the_stamp_check():
    """Issue 19: node-http stamped a whole cycle before its corked sockets flushed, claiming
    4-7 ms where its clients measured 26-42 ms. Run from this tree's contestants."""
    from pathlib import Path

    contestants = Path(__file__).resolve().parents[1] / "contestants"
    report = verify_contestant(find("node-http", contestants), pattern="push.sent_stamps")
    assert not report.error
    (result,) = report.results
    assert result.status == PASS, result.reason


def test_a_read_holding_two_cycles_stamps_the_newest_and_leaves_the_older_out_of_judgement():
    """The kernel merges queued segments and keeps the newest stamp: an older cycle's lines
    read behind a newer one have no known arrival, so that cycle is not judged."""

    def line(seq, sent, created):
        event = {"seq": seq, "timings": {"sent": sent, "created": created}}
        return json.dumps({"response": {"event": event}}).encode()

    seen = {}
    _note_read(seen, [line(1, 110, 100), b"8f\r"], 120.0)
    _note_read(seen, [line(1, 111, 100), line(2, 610, 600)], 1700.0)
    assert (seen[1].count, seen[1].last_arrival, seen[1].blurred) == (2, 120.0, 1)
    assert (seen[2].count, seen[2].last_arrival, seen[2].blurred) == (1, 1700.0, 0)


def _reference_servers() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if any("reference_server.py" in part for part in p.cmdline())
    ]


def test_a_verify_told_to_stop_starts_no_further_case_and_stops_its_server(contestants_dir):
    stop = threading.Event()
    results = []

    def stop_after_two(result):
        results.append(result)
        if len(results) == 2:
            stop.set()

    report = verify_contestant(find("reference"), on_result=stop_after_two, stop=stop)
    assert len(report.results) == 2 and not report.ok
    assert report.error == "stopped before every case had run"
    assert _reference_servers() == []


def test_a_ctrl_c_while_a_run_verifies_side_by_side_stops_both_and_leaves_no_server(
    contestants_dir, monkeypatch, tmp_path
):
    write_manifest(contestants_dir, "other", REFERENCE_MANIFEST.replace('"reference"', '"other"'))
    reports = []

    def verify_and_keep(*args, **kwargs):
        reports.append(verify_contestant(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(commands, "verify_contestant", verify_and_keep)
    main = threading.get_ident()
    # The interrupt comes once both servers answer, as the terminal's would: to this thread.
    timer = threading.Timer(1.5, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        commands._verify_all(planned(tmp_path, '["reference", "other"]', SSE))
    timer.cancel()
    assert [r.error for r in reports] == ["stopped before every case had run"] * 2
    assert _reference_servers() == []


KEEPALIVE = """
[[scenario]]
name = "plain"
behaviour = "keepalive"
clients = 2
duration_s = 1
"""

# A probe beside a WebSocket attack, as suites/abuse.toml has them.
WS_ATTACK = """
[[scenario]]
name = "attacked"
behaviour = "keepalive"
clients = 2
duration_s = 4

[[scenario.groups]]
name = "probe"
pacer = "open"
rate = 20
clients = 2

[[scenario.groups]]
name = "frames"
behaviour = "ws-fragments"
clients = 2
start_s = 1
stop_s = 3
"""

SSE = """
[[scenario]]
name = "held"
behaviour = "sse"
pacer = "users"
clients = 2
emit_interval_ms = 200
duration_s = 3
"""


def planned(tmp_path, contestants: str, body: str) -> list:
    path = tmp_path / "suite.toml"
    path.write_text(f'name = "t"\ncontestants = {contestants}\n{body}')
    return plan_tests(load_suite(path), find)


@pytest.mark.parametrize(
    ("body", "unused"),
    [
        (KEEPALIVE, {"push", "sse", "websocket", "syslog", "syslog-parse"}),
        (WS_ATTACK, {"push", "sse", "syslog", "syslog-parse"}),
        (SSE, {"websocket", "syslog", "syslog-parse"}),
    ],
)
def test_a_run_verifies_the_serving_modes_its_tests_use_and_those_they_need(
    contestants_dir, tmp_path, body, unused
):
    """A client group's behaviour counts (a WebSocket attack uses `websocket`, and not
    push: it subscribes to nothing), and a test that sets emitters uses push (SSE's)."""
    assert protocols.modes_unused(planned(tmp_path, '["reference"]', body)) == unused


def test_a_run_that_sets_emitters_uses_push(contestants_dir, tmp_path):
    (plan,) = planned(tmp_path, '["reference"]', KEEPALIVE)
    emitting = dataclasses.replace(plan, control=(ControlCall("POST", "/event/set", {}),))
    assert "push" not in protocols.modes_unused([emitting])


def test_a_runs_verify_runs_no_case_of_a_mode_its_tests_leave_unused_and_says_so(
    contestants_dir,
):
    unused = frozenset({"push", "sse", "websocket", "syslog", "syslog-parse"})
    report, note = commands._verify_for_run("reference", unused, threading.Event())
    checked = {r.case_id.split(".")[0] for r in report.results}
    assert report.ok and checked == {"http", "perf", "files", "upload", "control"}
    assert note == (
        " (not checked: push, sse, syslog, syslog-parse, websocket: not used by this run)"
    )
