"""The probe before, during and after an attack, and the verdict (issue 35): a real run of a
probe group beside an attack group against the reference server, whose planted knee (the
`slow_above_rate` fault: GET /perf answers 300 ms late past a token bucket of 150 a
second) the attack crosses; and the verdict's rules on interval lines made by hand."""

from hdrh.histogram import HdrHistogram
from test_runner import run_in_process, write_suite

from serverlab.base.paths import REPO_ROOT
from serverlab.commands import check_engine_plans
from serverlab.contestant.manifest import find
from serverlab.results.records import EngineInterval, MonitorSample, RecordedTest
from serverlab.results.report.builder import build_report, report_data
from serverlab.results.report.figures.hdr import added, values_at_quantiles
from serverlab.results.report.sections.amplification import amplification_rows
from serverlab.results.report.sections.attacks import HOLDS_UP, attack_rows, verdict_rows
from serverlab.run.plan import protocols
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.load import load_suite

# 100 keep-alive clients back to back from second 2 to 4: past the planted knee, while the
# probe alone (20/s) stays under it. The server is warmed apart first (1-2 s).
KNEE = """
[[scenario]]
name = "knee"
behaviour = "keepalive"
warmup_s = 1
warmup_max_s = 2
clients = 4
duration_s = 7
tunables.reference = { fault = "slow_above_rate" }

[[scenario.groups]]
name = "probe"
pacer = "open"
rate = 20
clients = 10
path = "/perf"

[[scenario.groups]]
name = "flood"
clients = 100
path = "/perf"
start_s = 2
stop_s = 4
"""


def test_an_attack_past_the_servers_knee_breaks_the_probes_p99_and_the_report_says_when(
    contestants_dir, tmp_path
):
    db = tmp_path / "lab.db"
    _, (test,), _ = run_in_process(write_suite(tmp_path, KNEE), db)
    assert test.status == "ok", test.validity
    (row,) = report_data(db)["attacks"]
    assert (row["attack"], row["window"]) == ("flood (keepalive)", "2-4 s")
    # The baseline column names its window and the warm-up run apart before the test.
    warmup = test.run_info["warmup"]
    steady = "steady" if warmup["steady"] else "not steady at its cap"
    assert row["baseline"] == f"1-2 s, after a {warmup['ran_s']:g} s warm-up ({steady})"
    probe = [line.data["groups"]["probe"] for line in test.intervals]
    # Each phase is the probe's own interval lines, their histograms added.
    # The baseline leaves out the probe's first second, which holds its connects.
    for phase, lines in (("before", probe[1:2]), ("during", probe[2:4])):
        p50, p99 = values_at_quantiles(added(x["latency_histogram"] for x in lines), [0.5, 0.99])
        assert row[phase]["p50_ms"] == f"{p50 / 1000:.3g}"
        assert row[phase]["p99_ms"] == f"{p99 / 1000:.3g}"
        # Success: OK answers over the arrivals the probe's 20/s had due.
        ok = sum(x["ok"] for x in lines)
        assert row[phase]["success"] == f"{100 * min(1, ok / (20 * len(lines))):.1f} %"
        assert row[phase]["throughput"] == f"{ok / len(lines):,.0f}"
    # The knee's 300 ms is far past twice the probe's own p99 before it.
    assert probe[2]["latency_p99_us"] >= 300_000 > 2 * probe[1]["latency_p99_us"]
    # The server's descriptors over the test are charted beside the table.
    html = build_report(db, out_path=tmp_path / "report.html").read_text()
    assert '<table class="attacks">' in html and "Server descriptors over time" in html
    assert row["verdict"].startswith("p99 ") and row["verdict"].endswith("first, at 1 s into it")
    # Its amplification: the flood group's own connections from the engine's summary of that
    # group, and the server's CPU over the window from the monitor's samples.
    (cost,) = report_data(db)["amplification"]
    flood = test.summary["groups"]["flood"]
    assert flood["connections_opened"] == 100 and cost["connections"] == "100"
    assert cost["kib_written"] == f"{flood['bytes_written'] / 1024:,.0f}"
    assert cost["server_cpu_s"] != "-" and cost["fds"] != "-"


def line(elapsed: int, latencies_us: list[int], ok: int, completed: int) -> dict:
    histogram = HdrHistogram(1, 60_000_000, 3)
    for value in latencies_us:
        histogram.record_value(value)
    return {
        "elapsed_s": float(elapsed),
        "interval_s": 1.0,
        "completed": completed,
        "ok": ok,
        "latency_p99_us": max(latencies_us),
        "latency_histogram": histogram.encode().decode(),
    }


def probe_test(
    probe: list[dict],
    status: str = "ok",
    pacer: dict | None = None,
    contestant: str = "c",
    tunables: dict | None = None,
) -> RecordedTest:
    plan = {
        "duration_s": float(len(probe)),
        "behaviour": {"kind": "keepalive"},
        "groups": [
            {"name": "probe", **({"pacer": pacer} if pacer else {})},
            {"name": "slow", "behaviour": {"kind": "slowloris"}, "start_s": 2.0, "stop_s": 4.0},
        ],
    }
    return RecordedTest(
        run_id=1,
        permutation_key="abuse",
        contestant=contestant,
        tunables=tunables or {},
        repeat_index=0,
        status=status,
        started_at=0.0,
        ended_at=len(probe),
        scenario="abuse",
        run_info={"engine_plan": plan},
        intervals=[
            EngineInterval(seq=i, t=float(i), data={"groups": {"probe": data}})
            for i, data in enumerate(probe)
        ],
    )


def test_a_probe_within_twice_its_baseline_and_99_percent_success_holds_up():
    probe = [line(t, [1000] * 100, 100, 100) for t in (1, 2)]
    probe += [line(t, [1900] * 100, 100, 100) for t in (3, 4)]
    probe += [line(t, [1000] * 100, 100, 100) for t in (5, 6)]
    (row,) = attack_rows([probe_test(probe)])
    assert row.verdict == HOLDS_UP and row.recovered == "0 s"
    # The baseline leaves out the probe's first second (its connects) when it has more.
    assert (row.before.completed, row.during.completed, row.after.completed) == (100, 200, 200)
    assert (row.before.start_s, row.before.stop_s) == (1.0, 2.0)


def test_a_test_without_a_warm_up_says_its_baseline_was_a_cold_servers():
    probe = [line(t, [1000] * 100, 100, 100) for t in (1, 2, 3, 4)]
    (row,) = attack_rows([probe_test(probe)])
    assert row.baseline == "1-2 s, cold: no warm-up before the test"


def test_what_broke_first_is_named_and_recovery_counts_from_the_attacks_stop():
    probe = [line(t, [1000] * 100, 100, 100) for t in (1, 2)]
    probe.append(line(3, [1000] * 100, 90, 100))  # 90 % success in the attack's first second
    probe.append(line(4, [5000] * 100, 100, 100))
    probe.append(line(5, [4000] * 100, 100, 100))  # still slow in the first second after it
    probe.append(line(6, [1000] * 100, 100, 100))
    (row,) = attack_rows([probe_test(probe)])
    assert row.verdict == "success 90 % first, at 1 s into it"
    assert row.recovered == "1 s"


def test_an_open_loop_probe_the_server_stalls_fails_on_the_requests_it_was_to_send():
    """Ten answers, all OK, where a hundred a second were due: 10 %, not 100 %."""
    probe = [line(t, [1000] * 100, 100, 100) for t in (1, 2)]
    probe += [line(t, [1500] * 10, 10, 10) for t in (3, 4)]
    probe += [line(t, [1000] * 100, 100, 100) for t in (5, 6)]
    (row,) = attack_rows([probe_test(probe, pacer={"kind": "open", "rate": 100.0})])
    assert row.during.success == 0.1 and row.before.success == 1.0
    assert row.verdict == "success 10 % first, at 1 s into it"


def test_the_verdict_as_shipped_stands_beside_the_hardened_one_of_the_same_attack():
    calm = [line(t, [1000] * 100, 100, 100) for t in range(1, 7)]
    stalled = calm[:2] + [line(t, [9000] * 100, 100, 100) for t in (3, 4)] + calm[4:]
    tests = [
        probe_test(stalled, contestant="a"),
        probe_test(calm, contestant="a", tunables={"header_timeout_s": "2"}),
        probe_test(stalled, contestant="b"),
    ]
    rows = [row.as_dict() for row in verdict_rows(attack_rows(tests))]
    assert rows == [
        {
            "test": "a r1",
            "attack": "slow (slowloris)",
            "shipped": "p99 9.0x its baseline first, at 1 s into it",
            "hardened": HOLDS_UP,
            "hardening": "header_timeout_s=2",
        },
        {
            "test": "b r1",
            "attack": "slow (slowloris)",
            "shipped": "p99 9.0x its baseline first, at 1 s into it",
            "hardened": "-",
            "hardening": "no mitigation set",
        },
    ]


def test_amplification_is_the_attacks_cost_above_the_probes_rate_per_unit_of_the_clients():
    """Samples every 0.5 s from the load's start at monitor second 3: the server uses 10 %
    of a core before the attack (2-4 s) and 60 % in it, the engine 5 % and 30 %; the
    server's RSS and descriptors climb in it."""
    probe = [line(t, [1000] * 100, 100, 100) for t in range(1, 7)]
    test = probe_test(probe)
    test.run_info["load_started_s"] = 3.0
    test.summary = {"groups": {"slow": {"connections_opened": 50, "bytes_written": 10240}}}
    attack = lambda t: 5.0 < t <= 7.0  # noqa: E731 (seconds 2-4 of the load)
    test.samples = [
        MonitorSample(
            t=t,
            cpu_percent=60.0 if attack(t) else 10.0,
            engine_cpu_percent=30.0 if attack(t) else 5.0,
            rss_bytes=100 * 2**20 + (2**20 * int(2 * (t - 5)) if attack(t) else 0),
            fds=20 + (50 if attack(t) else 0),
        )
        for t in [3.0 + 0.5 * i for i in range(13)]
    ]
    (row,) = [r.as_dict() for r in amplification_rows([test])]
    assert (row["server_cpu_s"], row["client_cpu_s"], row["cpu_ratio"]) == ("1.000", "0.500", "2")
    assert (row["rss_mib"], row["fds"], row["connections"]) == ("+4.0", "+50", "50")
    assert (row["kib_written"], row["streams"]) == ("10", "-")
    assert (row["cpu_ms_per_connection"], row["rss_kib_per_connection"]) == ("20", "81.9")
    # A server busier before the attack than in it (a JIT compiling through the baseline)
    # keeps its signed figure and states no ratio.
    for sample in test.samples:
        sample.cpu_percent = 5.0 if attack(sample.t) else 10.0
    (row,) = [r.as_dict() for r in amplification_rows([test])]
    assert (row["server_cpu_s"], row["cpu_ratio"], row["cpu_ms_per_connection"]) == (
        "-0.100",
        "-",
        "-",
    )


def test_a_crashed_server_is_the_verdict_whatever_the_probe_said():
    probe = [line(t, [1000] * 100, 100, 100) for t in (1, 2, 3)]
    (row,) = attack_rows([probe_test(probe, status="crashed")])
    assert row.verdict == "crashed"


def test_the_abuse_suite_is_accepted_by_the_engine_and_sends_no_attack_a_server_cannot_take():
    suite = load_suite(REPO_ROOT / "suites" / "abuse.toml", profile="quick")
    plans = plan_tests(suite, find)
    check_engine_plans(suite, plans)  # raises, naming the group, if the engine refuses one
    kept, refused = protocols.refuse(plans, find, engine_h2=True)
    # No test is refused: each runs without the groups its contestant cannot receive.
    assert len(kept) == len(plans) and all(r.groups for r in refused)
    assert sorted((r.plan.contestant, r.groups) for r in refused) == [
        ("nginx", ("slow-upload", "ws-oversized", "ws-fragments", "ws-ping-flood")),
        ("ruby-eventmachine", ("rapid-reset", "continuation-flood", "hpack-bomb")),
        ("rust-zhtta", ("rapid-reset", "continuation-flood", "hpack-bomb")),
    ]
    # Every contestant, nginx included, is sent every attack it can take, in one test each
    # as shipped (a server started and warmed once, not once per transport).
    shipped = [p for p in kept if not p.tunables]
    ran = {p.contestant: {g["name"] for g in p.measured["groups"]} for p in shipped}
    assert "ws-oversized" not in ran["nginx"] and "rapid-reset" not in ran["rust-zhtta"]
    assert sorted(p.contestant for p in shipped) == sorted({p.contestant for p in plans})
    assert len(shipped) == 9
    assert all({"slowloris", "handshake-flood"} <= names for names in ran.values())
    # Every hardened test has its twin as shipped, and runs only the attacks its tunables
    # concern, its load cut after the last of them.
    hardened = [p for p in kept if p.tunables]
    assert len(hardened) == 7
    for plan in hardened:
        names = [g["name"] for g in plan.measured["groups"]]
        assert names == ["probe", "probe-tls", "slowloris", "idle", "rapid-reset"], names
        assert plan.measured["duration_s"] == 11.0 < shipped[0].measured["duration_s"]


def test_an_attack_is_judged_by_the_probe_on_its_own_port():
    """An attack over TLS beside a probe in clear and one over TLS: the TLS probe's lines
    decide its verdict, the clear one's stay out of it."""
    clear = [line(t, [1000] * 100, 100, 100) for t in (1, 2, 3, 4)]
    tls = [line(t, [1000] * 100, 100, 100) for t in (1, 2)]
    tls += [line(t, [9000] * 100, 100, 100) for t in (3, 4)]  # only the TLS probe suffers
    test = probe_test(clear)
    plan = test.run_info["engine_plan"]
    plan["target"] = "http://127.0.0.1:1000/perf"
    plan["groups"] = [
        {"name": "probe"},
        {"name": "probe-tls", "target": "https://127.0.0.1:2000/perf"},
        {"name": "flood", "target": "https://127.0.0.1:2000/", "start_s": 2.0, "stop_s": 4.0},
        {"name": "slow", "behaviour": {"kind": "slowloris"}, "start_s": 2.0, "stop_s": 4.0},
    ]
    for interval, a, b in zip(test.intervals, clear, tls, strict=True):
        interval.data["groups"] = {"probe": a, "probe-tls": b}
    rows = {row.attack: row for row in attack_rows([test])}
    assert set(rows) == {"flood (keepalive)", "slow (slowloris)"}, "a probe is no attack"
    assert rows["flood (keepalive)"].verdict == "p99 9.0x its baseline first, at 1 s into it"
    assert rows["slow (slowloris)"].verdict == HOLDS_UP


def test_a_crash_in_a_later_attack_leaves_the_verdicts_of_those_before_it():
    """Two attacks in one test; the server dies in the second (the probe's lines end at
    5 s): the first, measured through and after its stop, keeps its verdict."""
    probe = [line(t, [1000] * 100, 100, 100) for t in (1, 2, 3, 4, 5)]
    test = probe_test(probe, status="crashed")
    test.run_info["engine_plan"]["duration_s"] = 8.0
    test.run_info["engine_plan"]["groups"].append(
        {"name": "late", "behaviour": {"kind": "idle"}, "start_s": 5.0, "stop_s": 7.0}
    )
    rows = {row.attack: row.verdict for row in attack_rows([test])}
    assert rows == {"slow (slowloris)": HOLDS_UP, "late (idle)": "crashed"}
