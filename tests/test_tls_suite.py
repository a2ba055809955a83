"""Suites that ask for TLS (issue 22): the transport and its settings as matrix dimensions,
refused up front where a contestant or the engine cannot speak them, and run by the
executor against a real TLS server (tests/reference_server.py --tls) with the real engine,
the key material of the test's key type made in its work folder and gone with it."""

import re
import sqlite3
from pathlib import Path

import pytest
from conftest import write_manifest
from test_syslog_tls import SYSLOG_TLS_MANIFEST
from test_tls import TLS_MANIFEST

from serverlab.commands import plan_suite
from serverlab.contestant.manifest import find
from serverlab.results.report import build_report
from serverlab.results.report.figures import push
from serverlab.results.store import Store
from serverlab.run.execution.engine import engine_speaks_h2
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.host.machine import Pinning
from serverlab.run.plan import protocols
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.runner import Session, run_suite
from serverlab.run.plan.suite.file import SuiteError
from serverlab.run.plan.suite.load import load_suite

SUITE = """name = "t"
repeats = 1
contestants = ["reference-tls"]

[[scenario]]
name = "tls-tax"
behaviour = "keepalive"
clients = 2
duration_s = 1
"""


@pytest.fixture
def tls_dir(contestants_dir):
    write_manifest(contestants_dir, "reference-tls", TLS_MANIFEST)
    return contestants_dir


def _suite(tmp_path: Path, extra: str, text: str = SUITE) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(text + extra)
    return path


def test_a_tls_test_writes_out_its_key_type_resumption_and_group(tls_dir, tmp_path):
    suite = load_suite(_suite(tmp_path, 'transport = ["clear", "tls"]\n'))
    clear, tls = (perm.params for perm in suite.permutations)
    assert "tls_key" not in clear and clear["transport"] == "clear"
    assert (tls["tls_key"], tls["tls_resume"], tls["tls_group"]) == ("ecdsa-p256", "on", "x25519")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('transport = "quic"\n', "transport must be one of clear, tls, h2, h2c"),
        ('transport = "tls"\ntls_key = "dsa"\n', "tls_key must be one of ecdsa-p256, rsa-2048"),
        ('tls_resume = "off"\n', "tls_resume applies to TLS tests only"),
        ('transport = "tls"\ntls_group = ["x448"]\n', "tls_group must be one of x25519, p256"),
    ],
)
def test_a_wrong_tls_setting_is_refused_at_its_line(tls_dir, tmp_path, extra, said):
    path = _suite(tmp_path, extra)
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    assert said in caught.value.reason
    key = said.split()[0]
    assert path.read_text().splitlines()[caught.value.line - 1].startswith(key)


def test_tls_for_a_server_without_tls_and_h2_for_one_without_h2_are_refused_with_why(
    tls_dir, tmp_path
):
    extra = 'transport = ["tls", "h2"]\ncontestants = ["reference", "reference-tls"]\n'
    planned = plan_suite(str(_suite(tmp_path, extra)), 1.0, None, None)
    assert [(p.contestant, p.params["transport"]) for p in planned.plans] == [
        ("reference-tls", "tls")
    ]
    lines = sorted(refused.line() for refused in planned.refused)
    assert len(lines) == 3
    assert "reference does not claim the spec part `h2`" in lines[0]
    assert "reference does not claim the spec part `tls`" in lines[1]
    assert "reference-tls does not claim the spec part `h2`" in lines[2]


def test_an_h2_test_is_refused_with_why_by_an_engine_without_http2(tls_dir, tmp_path):
    # This engine speaks HTTP/2 (asked of it, below); an older one, which the real binary
    # can no longer be made into, is told by the probe's answer alone.
    assert engine_speaks_h2()
    claimant = TLS_MANIFEST.replace('name = "reference-tls"', 'name = "reference-h2"').replace(
        '"tls"]', '"tls", "h2"]'
    )
    write_manifest(tls_dir, "reference-h2", claimant)
    extra = 'transport = "h2"\ncontestants = ["reference-h2"]\n'
    plans = plan_tests(load_suite(_suite(tmp_path, extra)), find)
    kept, (refused,) = protocols.refuse(plans, find, engine_h2=False)
    assert kept == [] and "needs HTTP/2 in the load engine" in refused.why


def _run(tmp_path: Path, extra: str):
    (plan,) = plan_tests(load_suite(_suite(tmp_path, extra)), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    return plan, execute(plan, env), env


def test_a_tls_test_runs_over_https_with_its_key_type_and_trusts_only_the_run_ca(tls_dir, tmp_path):
    plan, test, env = _run(tmp_path, 'transport = "tls"\ntls_key = "rsa-2048"\n')
    assert test.status == "ok", test.validity
    assert test.params["tls_key"] == "rsa-2048" and plan.tls_key == "rsa-2048"
    bound = test.run_info["engine_plan"]
    assert bound["target"] == f"https://127.0.0.1:{test.run_info['ports']['tls']}/perf"
    # The run's own CA, made in the test's folder, and no way around verifying against it.
    ca_file = bound["tls"]["ca_file"]
    assert ca_file.startswith(f"{env.workdir}/") and ca_file.endswith("/tls/ca.pem"), ca_file
    assert not bound["tls"].get("insecure"), bound["tls"]
    assert test.summary["tls_handshakes"] >= 2 and test.summary["answered"] > 20
    assert not list(Path(env.workdir).rglob("*.pem")), "no key file outlives its test"
    assert not list(Path(env.workdir).rglob("*.key"))


def test_a_failed_tls_test_keeps_its_log_but_not_its_keys(tls_dir, tmp_path):
    text = SUITE.replace("duration_s = 1", "duration_s = 3")
    extra = 'transport = "tls"\ntunables = { "*" = { die_after = 1.5 } }\n'
    (plan,) = plan_tests(load_suite(_suite(tmp_path, extra, text)), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(plan, env)
    assert test.status == "crashed", test.validity
    log = Path(test.validity["server_log"])
    assert log.is_file()
    assert not list(log.parent.rglob("*.pem")) and not list(log.parent.rglob("*.key"))
    assert not list(Path(env.workdir).parent.rglob("server.key"))


def test_resumption_off_makes_every_new_connection_a_full_handshake(tls_dir, tmp_path):
    extra = 'behaviour = "new-connection"\ntransport = "tls"\ntls_resume = ["on", "off"]\n'
    path = _suite(tmp_path, extra, SUITE.replace('behaviour = "keepalive"\n', ""))
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    on, off = (execute(plan, env) for plan in plan_tests(load_suite(path), find))
    assert on.status == off.status == "ok", (on.validity, off.validity)
    assert off.summary["tls_handshakes"] > 20 and off.summary["tls_resumed"] == 0
    assert on.summary["tls_resumed"] > on.summary["tls_handshakes"] // 2


def test_a_run_with_tls_tests_records_one_cores_handshake_ceiling_and_each_tests_transport(
    tls_dir, tmp_path
):
    suite = load_suite(_suite(tmp_path, 'transport = ["clear", "tls"]\n'))
    pinning = Pinning.default()
    with Store(tmp_path / "lab.db") as store:
        env = Environment(manifest_of=find, pinning=pinning, workdir=tmp_path / "work")
        outcome = run_suite(Session(suite, plan_tests(suite, find), store, env))
        tests = store.tests([outcome.run_id])
        (run,) = store.runs()
    assert sorted(t.params["transport"] for t in tests) == ["clear", "tls"]
    speed = run.machine["tls_speed"]
    assert speed["cpu"] == pinning.server.split(",")[0] and "openssl speed" in speed["source"]
    sign, ceiling = speed["sign_per_s"], speed["handshakes_per_s_per_core"]
    # RSA-2048 signs an order of magnitude slower than ECDSA P-256 on any CPU.
    assert sign["rsa-2048"] * 5 < sign["ecdsa-p256"]
    assert ceiling["rsa-2048"] < sign["rsa-2048"] and ceiling["ecdsa-p256"] < speed["x25519_per_s"]
    # The report's TLS section sets TLS against clear, beside the ceiling it was given.
    html = build_report(tmp_path / "lab.db", "all", tmp_path / "r.html").read_text()
    section = html[
        html.index('<section id="tls">') : html.index("</section>", html.index('id="tls"'))
    ]
    assert "What TLS and HTTP/2 cost each architecture" in section
    assert f"RSA-2048 {ceiling['rsa-2048']:,.0f}/s" in section
    (row,) = _rows(section, "tls-tax")
    assert row[0][0] == "reference-tls"
    ratio = float(row[3][0])  # a flag, if any, follows the figure after a space
    assert 0 < ratio < 5, row  # answered/s TLS over clear, a real quotient
    assert "no HTTP/2 test ran" in section, "h2 says why it has no data"


def _section(html: str) -> str:
    start = html.index('<section id="tls">')
    return html[start : html.index("</section>", start)]


def _cell(attributes: str, inner: str) -> tuple[str, str, str]:
    codes = re.search(r'data-flags="([^"]*)"', attributes)
    title = re.search(r'class="cell-flag" title="([^"]*)"', inner)
    text = re.sub(r"<.*", "", inner, flags=re.S).split()
    return (
        text[0] if text else "",
        codes.group(1) if codes else "",
        title.group(1) if title else "",
    )


def _rows(section: str, table: str) -> list[list[tuple[str, str, str]]]:
    """The table's rows, each cell as (its figure's first word, its flag codes, its flags'
    full texts)."""
    body = section[section.index(f'class="{table}"') :]
    body = body[body.index("<tbody>") : body.index("</table>")]
    return [
        [_cell(*cell) for cell in re.findall(r"<td([^>]*)>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


STORM = """name = "storm"
repeats = 1
contestants = ["reference-tls"]

[[scenario]]
name = "handshake-storm"
behaviour = "new-connection"
pacer = "open"
rate = [20, 40]
duration_s = 1
transport = "tls"
tls_resume = "off"

[[scenario]]
name = "tls-tax"
contestants = ["reference-tls-dies"]
behaviour = "keepalive"
clients = 2
duration_s = 1
transport = "tls"
tunables = { "reference-tls-dies" = { die_after = 0.8 } }
"""
# Planted on one test each after the run: the real flags need a busy machine, or a /proc
# that fails, at the right moment. Kernel-read-failed touches the kernel's figures only.
PLANTED_BUSY = "machine_busy", "planted: 999 % of a core"
PLANTED_KERNEL = "kernel_read_failed", "planted: /proc gone"


def _planted_run(tls_dir, tmp_path) -> Path:
    """Two storm rungs and a crashed TLS-tax test, real; the lower rung marked busy, the
    upper one's kernel reading failed."""
    dies = TLS_MANIFEST.replace("reference-tls", "reference-tls-dies")
    write_manifest(tls_dir, "reference-tls-dies", dies)
    suite = load_suite(_suite(tmp_path, "", STORM))
    db = tmp_path / "lab.db"
    with Store(db) as store:
        env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
        run_suite(Session(suite, plan_tests(suite, find), store, env))
        tests = store.tests()
    status = {(t.contestant, t.params.get("rate")): t for t in tests}
    assert [t.status for t in status.values()] == ["ok", "ok", "crashed"], status.keys()
    with sqlite3.connect(db) as conn:
        for (code, detail), rate in ((PLANTED_BUSY, 20), (PLANTED_KERNEL, 40)):
            conn.execute(
                "UPDATE tests SET validity_json = json_set(validity_json, ?, ?) WHERE id = ?",
                (f"$.{code}", detail, status[("reference-tls", rate)].id),
            )
    return db


def _where(tables: dict, said: str) -> list[tuple[str, int, int]]:
    """(table, row, column) of every cell whose flags' texts say this."""
    return [
        (name, r, c)
        for name, rows in tables.items()
        for r, row in enumerate(rows)
        for c, (_, _, title) in enumerate(row)
        if said in title
    ]


def test_a_storm_tests_flag_goes_only_on_the_cells_that_read_what_it_touches_and_a_crash_says_so(
    tls_dir, tmp_path
):
    db = _planted_run(tls_dir, tmp_path)
    section = _section(build_report(db, "all", tmp_path / "r.html").read_text())
    tables = {name: _rows(section, name) for name in ("tls-storm", "tls-tax")}
    # The lower rung only: "held" reads every rung; the figures at the top rate do not.
    assert _where(tables, PLANTED_BUSY[1]) == [("tls-storm", 0, 2)], tables
    # The upper rung's kernel figures only: its CPU per handshake, not held, answered or p99.
    assert _where(tables, PLANTED_KERNEL[1]) == [("tls-storm", 0, 5)], tables
    assert "machine-busy" in tables["tls-storm"][0][2][1].split()
    (tax,) = tables["tls-tax"]
    assert tax[0][0] == "reference-tls-dies"
    clear, tls, ratio = tax[1:4]
    assert tls[0] == ratio[0] == "-" and "crash" in tls[1].split() and "crash" in ratio[1].split()
    assert clear == ("-", "", ""), "no clear test ran: nothing to flag"
    assert "crash (r1)" in section
    chart = section[section.index('data-chart="tls-storm"') :]
    flags = re.findall(r'<li title="([\w-]+)">([^<]*)</li>', chart[: chart.index("</ul>")])
    mine = [text for _, text in flags if PLANTED_BUSY[1] in text]
    assert len(mine) == 1 and mine[0].startswith("reference-tls r1: machine-busy"), flags
    assert not any("reference-tls-dies" in text for _, text in flags), "not in the storm"


FLOOD = """name = "f"
repeats = 1
contestants = {contestants}

[[scenario]]
name = "tls-flood"
behaviour = "syslog"
clients = 1
syslog_messages = 20000
syslog_transport = "tls"
syslog_framing = "octet"
syslog_mode = "parse"
"""


def test_an_rfc_5425_flood_is_refused_for_a_server_that_does_not_claim_syslog_tls(
    contestants_dir, tmp_path
):
    write_manifest(contestants_dir, "reference-syslog-tls", SYSLOG_TLS_MANIFEST)
    text = FLOOD.format(contestants='["reference", "reference-syslog-tls"]')
    planned = plan_suite(str(_suite(tmp_path, "", text)), 1.0, None, None)
    (refused,) = planned.refused
    assert "reference does not claim the spec part `syslog-tls`" in refused.line()
    assert [plan.contestant for plan in planned.plans] == ["reference-syslog-tls"]


def test_an_rfc_5425_flood_reaches_a_real_syslog_tls_server_whole(tmp_path):
    # go-nethttp as built in the contestants folder: a receiver that keeps up, so that
    # every message the engine sent is counted (see the engine's close, in the report).
    text = FLOOD.format(contestants='["go-nethttp"]')
    (plan,) = plan_tests(load_suite(_suite(tmp_path, "", text)), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    test = execute(plan, env)
    assert test.status == "ok", test.validity
    port = test.run_info["ports"]["syslog_tls"]
    assert test.run_info["engine_plan"]["target"] == f"tls://127.0.0.1:{port}"
    figures = test.summary["syslog"]
    assert figures["received"] == figures["parsed"] == 20000 and figures["lost"] == 0
    assert test.summary["tls_handshakes"] == 1


def test_once_the_engine_speaks_http2_an_h2_cell_runs_for_a_claimant_and_no_other(
    tls_dir, tmp_path
):
    claimant = TLS_MANIFEST.replace('name = "reference-tls"', 'name = "reference-h2"').replace(
        '"tls"]', '"tls", "h2"]'
    )
    write_manifest(tls_dir, "reference-h2", claimant)
    extra = 'transport = "h2"\nstreams = 100\ncontestants = ["reference-tls", "reference-h2"]\n'
    plans = plan_tests(load_suite(_suite(tmp_path, extra)), find)
    kept, refused = protocols.refuse(plans, find, engine_h2=True)
    assert [plan.contestant for plan in kept] == ["reference-h2"]
    assert [r.why for r in refused] == ["reference-tls does not claim the spec part `h2`"]
    measured = kept[0].measured
    assert measured["http2"] == {"mode": "h2", "streams": 100}
    assert measured["target"] == "https://{host}:{tls_port}/perf"


H2_PAIR = """name = "t"
repeats = 1
contestants = ["go-nethttp"]

[[scenario]]
name = "h2-multiplex"
behaviour = "keepalive"
clients = 1
streams = 20
duration_s = 1
transport = "h2"

[[scenario]]
name = "h1-100-connections"
behaviour = "keepalive"
clients = 20
duration_s = 1
transport = "tls"
"""


def test_one_h2_connection_of_twenty_streams_runs_against_a_real_server_beside_twenty_h1_ones(
    tmp_path,
):
    # go-nethttp as built in the contestants folder claims h2: the whole path, from the
    # suite's streams to the engine's --h2 over the run's CA, to the report's h2 table.
    suite = load_suite(_suite(tmp_path, "", H2_PAIR))
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    with Store(tmp_path / "lab.db") as store:
        run_suite(Session(suite, plan_tests(suite, find), store, env))
        tests = {t.scenario: t for t in store.tests()}
    multiplexed = tests["h2-multiplex"]
    assert multiplexed.status == "ok", multiplexed.validity
    assert multiplexed.run_info["engine_plan"]["http2"] == {"mode": "h2", "streams": 20}
    assert multiplexed.summary["answered"] > 0 and multiplexed.summary["tls_handshakes"] == 1
    assert tests["h1-100-connections"].summary["tls_handshakes"] == 20
    html = build_report(tmp_path / "lab.db", "all", tmp_path / "r.html").read_text()
    (row,) = _rows(_section(html), "tls-h2")
    assert row[0][0] == "go-nethttp" and float(row[3][0]) > 0  # answered/s h2 ÷ h1
    assert "no HTTP/2 test ran" not in _section(html)


H2_SSE = """name = "t"
repeats = 1
contestants = ["go-nethttp"]

[[scenario]]
name = "push-sse"
behaviour = "sse"
pacer = "users"
clients = 20
ramp_up_s = 0.5
duration_s = 3
emit_interval_ms = 250
transport = "h2"
"""


def test_sse_over_h2_brings_every_cycle_to_every_stream_of_a_real_server(tmp_path):
    # go-nethttp as built claims h2 and sse: each client is one HTTP/2 stream over the run's
    # TLS, its DATA frames read by the SSE parser that reads HTTP/1.1's bytes.
    suite = load_suite(_suite(tmp_path, "", H2_SSE))
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    with Store(tmp_path / "lab.db") as store:
        run_suite(Session(suite, plan_tests(suite, find), store, env))
        (test,) = [store.load_details(t) for t in store.tests()]
    assert test.status == "ok", test.validity
    assert test.run_info["engine_plan"]["http2"] == {"mode": "h2", "streams": 1}
    assert test.summary["tls_handshakes"] == 20, "a connection per client"
    window = push.in_window(test)
    assert len(window) >= 4, [c.seq for c in push.cycles(test)]
    assert [share for _, share in push.completeness(test)] == [1.0] * len(window)
    events = test.summary["events"]
    assert events["received"] >= 20 * len(window), events
    assert events["lost"] + events["duplicated"] + events["reordered"] == 0, events
    # The report's memory table has an h2 column: this test's KiB per held connection.
    html = build_report(tmp_path / "lab.db", "all", tmp_path / "r.html").read_text()
    (row,) = _rows(_section(html), "tls-memory")
    assert (row[0][0], row[2][0], row[3][0]) == ("sse", "go-nethttp", "-"), row
    assert float(row[6][0]) > 0, row
