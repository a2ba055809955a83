"""A request test warms its server until the rate is steady (serverlab.run.execution.warmup),
at least warmup_s and at most warmup_max_s; the measured window's steady check is never
skipped; the kernel's CPU window ends with the engine's load. Real servers, the real engine."""

import time
from pathlib import Path

import pytest

from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.results.records import RecordedTest
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.sections.warmup import time_to_steady_lines, warmup_chart
from serverlab.run.execution import procfs, traffic
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.monitor import ENGINE_SUMMARY
from serverlab.run.execution.warmup import JIT_QUIET, STEADY_INTERVALS, SteadyWatch
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.suite.file import SuiteError
from serverlab.run.plan.suite.load import load_suite

SUITE = """name = "t"
repeats = 1
contestants = ["{contestant}"]

[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = {clients}
duration_s = {duration}
{extra}
"""


def run_one(tmp_path, contestant="reference", clients=3, duration=1, extra=""):
    path = tmp_path / "suite.toml"
    path.write_text(
        SUITE.format(contestant=contestant, clients=clients, duration=duration, extra=extra)
    )
    (plan,) = plan_tests(load_suite(path), find)
    env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work")
    return plan, execute(plan, env)


def lines(*rates):
    return [
        {"rps": r, "answered": int(r / 2), "elapsed_s": 0.5 * (i + 1)} for i, r in enumerate(rates)
    ]


def test_a_rising_rate_is_steady_only_once_four_lines_sit_within_five_percent_of_their_mean():
    watch = SteadyWatch(floor_s=0.5)
    for line in lines(100, 400, 900, 1000, 1040, 990, 1010):
        watch.interval(line)
    record = watch.record(cap_s=20, ran_s=3.5)
    assert record["steady"] and record["steady_s"] == 1.5
    assert record["steady_requests"] == 50 + 200 + 450
    assert record["rates"][:2] == [100, 400]


def test_a_steady_rate_waits_for_the_warm_ups_floor():
    watch = SteadyWatch(floor_s=3.0)
    for line in lines(1000, 1000, 1000, 1000):
        watch.interval(line)
    assert not watch.done(), "steady after 2 s, but warmup_s is 3 s"
    for line in lines(*[1000] * 6)[4:]:
        watch.interval(line)
    assert watch.done() and watch.record(20, 3.0)["steady_s"] == 0.0


def test_lines_that_come_while_a_steady_warm_up_stops_are_drawn_not_judged():
    watch = SteadyWatch(floor_s=0.0)
    for line in lines(1000, 1000, 1000, 1000):
        watch.interval(line)
    assert watch.done()
    watch.interval(lines(*[1000] * 4, 400)[4])  # the engine's last line before its stop
    record = watch.record(20, 2.5)
    assert record["steady"] and record["steady_s"] == 0.0 and record["rates"][-1] == 400


def test_a_rate_that_falls_out_of_the_band_starts_its_steady_run_again():
    watch = SteadyWatch(floor_s=0.0)
    for line in lines(1000, 1000, 1000, 1000, 1300, 1300, 1300, 1300):
        watch.interval(line)
    assert watch.record(20, 4.0)["steady_s"] == 2.0


def test_a_steady_rate_waits_while_the_jits_compiler_threads_work():
    # 20 ticks a line (0.5 s) is 40 % of a core; the rule allows 5 % over its four lines.
    spent = iter([0, 20, 40, 60, 80, 100, 100, 101, 101, 101, 101])
    watch = SteadyWatch(floor_s=0.0, jit=lambda: next(spent) * procfs.TICKS_PER_S // 100)
    for number, line in enumerate(lines(*[1000] * 10), start=1):
        watch.interval(line)
        assert watch.done() == (number >= 9), number
    record = watch.record(20, 4.5)
    assert record["steady_s"] == 2.5, "steady from the first of the four quiet lines"
    assert record["jit_percent"][:5] == [40.0] * 5 and record["jit_percent"][6] == 2.0


def test_a_server_without_compiler_threads_is_judged_by_its_rate_alone():
    watch = SteadyWatch(floor_s=0.0, jit=lambda: None)
    for line in lines(1000, 1000, 1000, 1000):
        watch.interval(line)
    assert watch.done() and "jit_percent" not in watch.record(20, 2.0)


def test_a_warm_up_cap_below_its_floor_is_refused_with_one_line(tmp_path):
    path = tmp_path / "suite.toml"
    path.write_text(
        SUITE.format(
            contestant="reference", clients=1, duration=1, extra="warmup_s = 3\nwarmup_max_s = 2"
        )
    )
    with pytest.raises(SuiteError, match="warmup_max_s must be at least warmup_s"):
        load_suite(path)


def test_a_warm_up_that_reaches_its_cap_is_flagged_not_steady(contestants_dir, tmp_path):
    # A cap of 1 s holds two 0.5 s lines, fewer than the rule's four: never steady.
    _, test = run_one(tmp_path, extra="warmup_s = 0.5\nwarmup_max_s = 1")
    warmup = test.run_info["warmup"]
    assert not warmup["steady"] and "steady_s" not in warmup
    assert len(warmup["rates"]) < STEADY_INTERVALS and warmup["max_s"] == 1
    assert warmup["ran_s"] >= 0.99, "a warm-up that never steadies runs to its cap"
    flags = [f for f in validity_flags(test) if f.code == "not-steady"]
    assert flags and "cap" in flags[0].text


def test_the_control_calls_come_before_the_warm_up_so_it_warms_the_measured_path(
    contestants_dir, tmp_path
):
    # Logging switched off after a warm-up left a JIT to recompile the switched path in the
    # measured window: java-tomcat-blocking's first measured second fell to 51k req/s after
    # a warm-up steady at 120k.
    _, test = run_one(tmp_path, extra="warmup_s = 0.5\nwarmup_max_s = 1")
    (logging,) = [c for c in test.run_info["control_calls"] if c["path"] == "/logging"]
    assert logging["phase"] == "before"
    assert logging["answered_ms"] <= test.run_info["warmup"]["started_ms"]


def test_a_too_short_measured_window_is_flagged(contestants_dir, tmp_path):
    # 0.6 s of load: no complete 1 s interval line, so no steady check can be made.
    _, test = run_one(tmp_path, duration=0.6)
    assert test.status == "ok", test.validity
    assert test.summary["answered"] > 0
    (flag,) = [f for f in validity_flags(test) if f.code == "too-short"]
    assert "0 complete interval lines" in flag.text and "rps" in flag.figures


def test_the_cpu_window_ends_with_the_engines_load(contestants_dir, tmp_path):
    _, test = run_one(tmp_path, duration=1)
    kernel = test.run_info["kernel"]
    assert kernel["closed_on"] == ENGINE_SUMMARY
    # The executor looks at the engine every 0.1 s: a window closed once the engine was
    # seen gone overhangs the load by at least that; one closed on its summary does not.
    assert 0 <= kernel["closed_after_engine_s"] < 0.1, kernel
    assert kernel["opened_before_engine_s"] >= 0


@pytest.mark.alone
def test_a_jvm_contestants_warm_up_is_detected_and_reaches_steady(tmp_path):
    plan, test = run_one(
        tmp_path,
        contestant="java-tomcat-blocking",
        clients=50,
        duration=2,
        # Steady needs the JIT quiet too: 12-14 s here with the machine's other core busy.
        extra="warmup_s = 1\nwarmup_max_s = 40",
    )
    assert test.status == "ok", test.validity
    warmup = test.run_info["warmup"]
    rates = warmup["rates"]
    # A string, so that pytest prints every line's rate and JIT share, not the first six.
    assert warmup["steady"], f"rates {rates}; JIT % {warmup.get('jit_percent')}"
    assert warmup["steady_s"] > 0 and warmup["steady_requests"] > 0, "the JIT's climb is seen"
    assert rates[0] < 0.5 * max(rates[-STEADY_INTERVALS:]), rates
    assert warmup["ran_s"] < 40, "stopped once steady, before its cap"
    # HotSpot's compiler threads worked through the climb and were quiet over the four lines
    # that ended the warm-up (the kernel's count of their CPU).
    jit = warmup["jit_percent"]
    first = round(warmup["steady_s"] / 0.5)
    assert max(jit[:first]) > 100 * JIT_QUIET, jit
    assert sum(jit[first : first + STEADY_INTERVALS]) / STEADY_INTERVALS <= 100 * JIT_QUIET, jit
    # Told to measure when steady, in the same engine run: the summary's window follows it.
    assert warmup["same_run"] and warmup["ended_by"] == "request"
    assert test.summary["warmup"]["elapsed_s"] == warmup["ran_s"]


class _CountedEngines:
    """Every engine process a test starts, by the plan file it was given."""

    def __init__(self, monkeypatch):
        self.plans: list[str] = []
        counted = self

        class Counted(traffic.EngineRun):
            def start(self):
                counted.plans.append(Path(self.argv[self.argv.index("--plan") + 1]).name)
                super().start()

        monkeypatch.setattr(traffic, "EngineRun", Counted)


def test_a_warmed_request_test_is_one_engine_run_whose_summary_counts_the_measured_window(
    contestants_dir, tmp_path, monkeypatch
):
    engines = _CountedEngines(monkeypatch)
    # A cap of 1 s holds two 0.5 s lines, fewer than the rule's four: the engine measures
    # from its cap, unasked.
    plan, test = run_one(tmp_path, duration=1, extra="warmup_s = 0.5\nwarmup_max_s = 1")
    assert test.status == "ok", test.validity
    assert engines.plans == ["plan.json"], "warm-up and measurement share one engine process"
    assert plan.measured["warmup_max_s"] == 1
    assert test.summary["warmup"]["by"] == "cap" == test.run_info["warmup"]["ended_by"]
    warmup = test.run_info["warmup"]
    assert warmup["same_run"] and warmup["ran_s"] == test.summary["warmup"]["elapsed_s"] == 1
    # The stored lines are the measured window's, timed from its start.
    measured = [line.data for line in test.intervals]
    assert [line["elapsed_s"] for line in measured] == [0.5, 1.0]
    in_lines = sum(line["answered"] for line in measured)
    # Answers in flight at the last line's end are counted once they arrive, no more.
    assert in_lines <= test.summary["answered"] <= in_lines + 3
    assert measured[-1]["completed_total"] == sum(line["completed"] for line in measured)
    # The kernel's CPU window opens as the measured window begins, not before.
    assert test.run_info["kernel"]["opened_before_engine_s"] <= 0


def test_a_measure_line_on_the_engines_stdin_ends_its_warm_up_at_the_next_boundary(
    contestants_dir, tmp_path
):
    server = ContestantServer(find("reference"), workdir=tmp_path / "server")
    server.start()
    try:
        plan = {
            "target": f"http://127.0.0.1:{server.port}/perf",
            "connections": 2,
            "duration_s": 1,
            "interval_ms": 500,
            "warmup_max_s": 30,
        }
        seen: list[dict] = []
        box: dict = {}

        def on_interval(line):
            seen.append(line)
            if len(seen) == 1:
                box["running"].measure()

        box["running"] = traffic.LocalLoad(None).begin(
            plan, server.workdir, "stdin", on_interval, on_measure=seen.append
        )
        while not box["running"].done():
            time.sleep(0.1)
        result = box["running"].finish()
    finally:
        server.stop()
    assert result.measure["by"] == "request" and result.measure["elapsed_s"] < 30
    assert result.summary["warmup"] == {k: v for k, v in result.measure.items() if k != "type"}
    assert seen.index(result.measure) == len(result.warmup_intervals)
    assert [line["elapsed_s"] for line in result.intervals] == [0.5, 1.0]
    in_lines = sum(line["answered"] for line in result.intervals)
    assert in_lines <= result.summary["answered"] <= in_lines + 2
    assert result.summary["duration_s"] == 1


def test_a_spread_load_warms_up_apart_and_measures_without_a_warm_up_phase(
    contestants_dir, tmp_path, monkeypatch
):
    engines = _CountedEngines(monkeypatch)

    class Spread(traffic.LocalLoad):
        live_measure = False  # as serverlab.cluster.traffic.RayLoad

        def begin(self, plan, *args, **kwargs):
            assert "warmup_max_s" not in plan, "no engine of a spread load gets a warm-up phase"
            return super().begin(plan, *args, **kwargs)

    path = tmp_path / "suite.toml"
    path.write_text(
        SUITE.format(
            contestant="reference",
            clients=2,
            duration=1,
            extra="warmup_s = 0.5\nwarmup_max_s = 1",
        )
    )
    (plan,) = plan_tests(load_suite(path), find)
    env = Environment(
        manifest_of=find,
        pinning=Pinning.default(),
        workdir=tmp_path / "work",
        load=Spread(None),
    )
    test = execute(plan, env)
    assert test.status == "ok", test.validity
    assert engines.plans == ["warmup.json", "plan.json"]
    assert "warmup" not in test.summary and "warmup_max_s" not in test.summary["plan"]
    assert not test.run_info["warmup"].get("same_run")


def _warmed(contestant: str, record: dict) -> RecordedTest:
    test = RecordedTest(1, "k", contestant, 0, "ok", 0.0, 1.0, scenario="fast")
    test.run_info["warmup"] = record
    return test


def test_the_warm_up_charts_draw_a_jvms_compiler_threads_beside_its_rate_and_no_others():
    record = {"rule": "the rule as recorded", "interval_s": 0.5, "rates": [10.0, 20.0, 20.0]}
    jvm = _warmed("java", {**record, "jit_percent": [30.0, 4.0, 0.0], "steady_s": 0.5})
    node = _warmed("node", record)
    rate, jit = warmup_chart("w", [jvm, node])
    assert [t["name"] for t in rate.figure["data"]] == ["java r1", "node r1"]
    assert "Steady: the rule as recorded." in rate.caption
    assert [(t["name"], t["y"]) for t in jit.figure["data"]] == [("java r1", [30.0, 4.0, 0.0])]
    assert jit.key == "w-jit" and "compiler threads" in jit.caption
    assert len(warmup_chart("w", [node])) == 1, "no JIT chart for a server without a JIT"


def test_time_to_steady_says_a_rate_that_held_from_its_first_line_so_and_a_cap_never_reached():
    row = {"scenario": "fast", "steady": 6, "repeats": 6, "cap_s": 20.0, "requests": 0}
    lines = time_to_steady_lines(
        [
            {**row, "contestant": "go", "seconds": 0.0},
            {**row, "contestant": "java", "seconds": 11.5, "requests": 512_000},
            {**row, "contestant": "slow", "seconds": None, "steady": 0},
        ]
    )
    assert lines == [
        "time to steady: fast, go: steady from its first line "
        "(median of 6 of 6 repeats that became steady)",
        "time to steady: fast, java: 11.5 s, 512,000 answers "
        "(median of 6 of 6 repeats that became steady)",
        "time to steady: fast, slow: never steady within 20 s",
    ]
