"""The seed suites and the report's seed sections: the suites expand as the seeds ran, the
published figures load, and the verdict on each seed's conclusion follows the stored data."""

import random
import re
from pathlib import Path

import pytest
from test_report import recorded

from serverlab.base.paths import REPO_ROOT
from serverlab.contestant.manifest import Manifest, discover
from serverlab.results.records import RecordedTest, Run, ServerStats, StoredSuite
from serverlab.results.report import build_report
from serverlab.results.report.sections.seed_data import EVERY_SCENARIO, SEEDS, load_published
from serverlab.results.report.sections.seeds import (
    FAILS,
    HOLDS,
    NO_DATA,
    seed_of_suite,
    seed_sections,
)
from serverlab.results.store import Store
from serverlab.run.plan.suite.load import load_suite

SUITES = {seed: next((REPO_ROOT / "suites").glob(f"seed-{seed}-*.toml")) for seed in SEEDS}
EM, NODE = "ruby-eventmachine", "node-http"
SEED_000_TESTS = ("test-1-sequential", "test-2-rate-20", "test-3-rate-100", "test-4-rate-200")


@pytest.mark.parametrize("seed", SEEDS)
def test_each_seed_suite_names_its_seed_and_has_a_quick_profile(seed):
    full = load_suite(SUITES[seed])
    quick = load_suite(SUITES[seed], profile="quick")
    assert full.seed == seed == load_published(seed).seed
    assert quick.tests() and quick.permutations != full.permutations
    assert quick.estimated_seconds() < 15 * 60


@pytest.mark.parametrize("seed", SEEDS)
def test_every_comparison_names_a_scenario_and_contestant_the_suite_runs(seed):
    """A renamed scenario would silently leave a seed section without data."""
    ran = {(p.scenario, p.contestant) for p in load_suite(SUITES[seed]).permutations}
    scenarios = {s for s, _ in ran}
    for comparison in load_published(seed).comparisons:
        for side in filter(None, (comparison.numerator, comparison.denominator)):
            assert side.scenario == EVERY_SCENARIO or side.scenario in scenarios, side
            assert any(
                c == side.contestant and side.scenario in (EVERY_SCENARIO, s) for s, c in ran
            ), side


def test_seed_004_expands_to_the_195_tests_of_its_appendix_a():
    suite = load_suite(SUITES["004"])
    assert len(suite.tests()) == 195
    per_scenario = {}
    for perm in suite.permutations:
        per_scenario[perm.scenario] = per_scenario.get(perm.scenario, 0) + 1
    assert per_scenario == {
        "comet-events": 60,
        "longpoll-events": 60,
        "comet-no-events": 15,
        "longpoll-no-events": 60,
    }
    assert {p.params["ramp_up_s"] + p.params["duration_s"] for p in suite.permutations} == {600}


def test_seed_000_test_1_is_sequential_and_tests_2_to_4_are_open_loops():
    perms = {p.scenario: p.params for p in load_suite(SUITES["000"]).permutations}
    assert perms["test-1-sequential"]["pacer"] == "sequential"
    assert perms["test-1-sequential"]["requests"] == 6000
    rates = [(perms[s]["rate"], perms[s]["requests"]) for s in SEED_000_TESTS[1:]]
    assert rates == [(20, 2000), (100, 2000), (200, 3000)]


def test_the_published_figures_are_the_seeds_own():
    seed_000 = load_published("000")
    assert seed_000.tables[0].rows[0] == ("Test 1", "20.9", "4.3")
    assert seed_000.comparisons[0].published == (20.9, 4.3)
    seed_001 = load_published("001")
    assert ("zhtta-starting-code", "823.545", "352412.1") in seed_001.tables[0].rows


def test_a_suite_is_tied_to_its_seed_by_name_or_path():
    assert seed_of_suite(StoredSuite("seed-003-ab-10k", "x.toml", "0" * 64)) == "003"
    assert seed_of_suite(StoredSuite("mine", "suites/seed-002-syslog.toml", "0" * 64)) == "002"
    assert seed_of_suite(StoredSuite("quick", "suites/quick.toml", "0" * 64)) is None


def seed_000_tests(em_test_1_ms: float, present=SEED_000_TESTS, status="ok") -> list:
    """Three repeats of Tests 1-4 for EM, Node and Go: EM's Test 1 mean latency as given,
    every other figure near 3 ms (the seed's Tests 2-4)."""
    rng = random.Random(0)
    tests = []
    for repeat in range(3):
        for scenario in present:
            for contestant in (EM, NODE, "go-nethttp"):
                params = {"behaviour": "new-connection"}
                test = recorded(1, scenario, params, contestant, repeat, rng)
                slow = contestant == EM and scenario == SEED_000_TESTS[0]
                mean_ms = em_test_1_ms if slow else 3.0 * rng.uniform(0.95, 1.05)
                test.summary["latency_us"]["mean"] = mean_ms * 1000
                test.status = status if contestant == EM else "ok"
                tests.append(test)
    return tests


def one_section(tests: list, suite_name: str = "seed-000-node-vs-eventmachine"):
    suite = StoredSuite(suite_name, f"suites/{suite_name}.toml", "0" * 64, id=1)
    run = Run(id=1, suite_id=1, started_at=0.0, status="finished", machine={})
    sections = seed_sections(tests, [run], {1: suite})
    assert len(sections) == 1
    return sections[0]


def test_seed_000_holds_when_em_is_slow_sequentially_and_close_otherwise():
    section = one_section(seed_000_tests(em_test_1_ms=15.0))
    assert section.verdict == HOLDS
    assert "still holds" in section.sentence
    first = section.rows[0]
    assert first.published == "20.9 / 4.3 = 4.86×"
    ratio = re.search(r"= ([\d.]+)×", first.ours)
    assert ratio and 4.5 < float(ratio.group(1)) < 5.5
    assert first.check.startswith(HOLDS)
    assert any(text.startswith("go-nethttp ") for text in first.beside)


def test_seed_000_fails_when_em_is_as_fast_as_node_sequentially():
    section = one_section(seed_000_tests(em_test_1_ms=3.0))
    assert section.verdict == FAILS
    assert "does not hold" in section.sentence
    assert "Test 1, 6,000 sequential connections" in section.sentence


def test_a_check_whose_interval_straddles_its_threshold_says_not_enough_data():
    tests = seed_000_tests(em_test_1_ms=15.0)
    em_test_1 = [t for t in tests if t.contestant == EM and t.scenario == SEED_000_TESTS[0]]
    # Medians 6 ms against about 3: a ratio of 2, above the seed's 1.5 on its own; but the
    # repeats spread from 2 to 10 ms, and the interval of the ratio reaches below 1.5.
    for test, mean_ms in zip(em_test_1, (2.0, 6.0, 10.0), strict=True):
        test.summary["latency_us"]["mean"] = mean_ms * 1000
    section = one_section(tests)
    first = section.rows[0]
    assert first.ratio == pytest.approx(2.0, rel=0.1)
    assert first.state == NO_DATA
    assert first.check.startswith("not enough data (expected above 1.5; interval 0.6")
    assert section.verdict == NO_DATA
    assert "not enough data (Test 1, 6,000 sequential connections" in section.sentence


def test_missing_or_crashed_tests_leave_the_verdict_open():
    missing = one_section(seed_000_tests(15.0, present=SEED_000_TESTS[:1]))
    assert missing.verdict == NO_DATA
    assert "Test 2, 2,000 connections at 20/s" in missing.sentence
    crashed = one_section(seed_000_tests(15.0, status="crashed"))
    assert crashed.verdict == NO_DATA
    assert crashed.rows[0].ours == "no data"


def push_test(contestant: str, clients: int, rss_mib: float, status: str = "ok") -> RecordedTest:
    params = {"behaviour": "longpoll", "clients": clients, "longpoll_duration_ms": 10000}
    test = recorded(1, "longpoll-no-events", params, contestant, 0, random.Random(clients))
    test.status = status
    for sample in test.samples:
        sample.rss_bytes = int(rss_mib * 2**20)
    return test


def test_seed_004_takes_the_largest_client_count_and_counts_crashes():
    tests = [
        push_test(NODE, 1000, 50),
        push_test(NODE, 5000, 60),
        push_test("java-tomcat-blocking", 1000, 300),
        push_test("java-tomcat-blocking", 5000, 400),
        push_test("java-tomcat-async", 5000, 380, status="crashed"),
    ]
    tests[-1].summary = None
    section = one_section(tests, "seed-004-server-push")
    rows = {row.label: row for row in section.rows}
    responses = rows["Long poll, no events: responses/s, Tomcat 6 (blocking) / Node.js"]
    assert responses.where == "clients=5000, longpoll_duration_ms=10000"
    assert rows["Every test: crashes of node-http"].ours == "0"
    assert rows["Every test: peak RSS, Tomcat 6 (blocking) / Node.js"].check.startswith(HOLDS)
    # The crashed Tomcat 7 gives no figure: the conclusion cannot be judged on it.
    assert rows["Every test: peak RSS, Tomcat 7 (async) / Node.js"].ours == "no data"
    assert section.verdict == NO_DATA


def syslog_test(contestant: str, scenario: str, sent: int, received: int, seconds: float):
    """A flood as the runner stores it: the receiver's figures beside the sender's."""
    test = recorded(1, scenario, {"behaviour": "syslog"}, contestant, 0, random.Random(sent))
    receiver = {"received": received, "receiving_s": seconds, "sent": sent}
    receiver.update(messages_per_s=round(received / seconds, 1), lost=sent - received)
    test.summary.update(requests=sent, sender_rps=sent / 3, rps=received / seconds)
    test.summary["syslog"] = receiver
    test.server_stats = [ServerStats(seconds + 1, {"syslog_count": received})]
    return test


def test_seed_002_counts_messages_at_the_receiver():
    tests = [
        syslog_test("java-netty", "tcp-flood-1m", 1_000_000, 1_000_000, 5.0),
        syslog_test(EM, "tcp-flood-1m", 1_000_000, 999_000, 20.0),
        syslog_test("java-netty", "tcp-flood-10m", 10_000_000, 10_000_000, 40.0),
        syslog_test(EM, "tcp-flood-10m", 10_000_000, 10_000_000, 200.0),
    ]
    section = one_section(tests, "seed-002-syslog")
    rows = {row.label: row for row in section.rows}
    flood = rows["1M messages: Netty / EventMachine messages per second"]
    assert flood.ours == "200,000 / 49,950 = 4.00×"
    assert rows["1M messages: messages lost by EventMachine"].ours == "1,000"
    assert rows["1M messages: messages lost by Netty"].ours == "0"
    assert section.verdict == HOLDS


def test_seed_002_sets_parsing_against_counting_and_names_bound_generators():
    def flood(mode: str, seconds: float, engine_cpu: float = 45.0) -> RecordedTest:
        test = syslog_test(NODE, "tcp-flood-12s", 1_200_000, 1_200_000, seconds)
        test.params["syslog_mode"] = test.tunables["syslog_mode"] = mode
        for sample in test.samples:
            sample.engine_cpu_percent = engine_cpu
        return test

    tests = [flood("count", 12.0), flood("parse", 48.0, engine_cpu=97.0)]
    section = one_section(tests, "seed-002-syslog")
    row = {r.label: r for r in section.rows}[
        "12 s flood: node-http parsing / counting, messages per second"
    ]
    assert row.ours.startswith("25,000 / 100,000 = 0.25×")
    (bound,) = section.generator_bound
    assert bound.startswith("tcp-flood-12s x node-http (parse), repeat 1: generator-bound")


def test_seed_002_floods_run_counted_and_parsed_and_quick_floods_last_10_s():
    # The contestants as this repository ships them (not the test's own folder).
    known = {m.name: m for m in discover(REPO_ROOT / "contestants") if isinstance(m, Manifest)}
    quick = load_suite(SUITES["002"], known_contestants=known, profile="quick")
    modes = {(p.contestant, p.params["syslog_mode"]) for p in quick.permutations}
    receivers = {p.contestant for p in quick.permutations}
    parsers = {name for name in receivers if "syslog-parse" in known[name].implements}
    assert {"node-http", "go-nethttp", "rust-zhtta", "java-netty", EM} <= parsers
    for name in receivers:
        assert ((name, "parse") in modes) == (name in parsers), name
        assert (name, "count") in modes
    for name in receivers - parsers:  # rsyslog counts only
        why = f"tcp-flood-12s x {name}: syslog_mode=parse, and it does not implement syslog-parse"
        assert ("tcp-flood-12s", why) in quick.left_out
    assert receivers - parsers, "a receiver that counts only is left out of parse mode"
    assert all(p.params["duration_s"] >= 12 for p in quick.permutations)
    full = load_suite(SUITES["002"])
    assert {p.params["clients"] for p in full.permutations if "2senders" in p.scenario} == {2}


def fill_seed_db(db_path: Path) -> Path:
    """A seed 000 run where EM is 5x slower on Test 1, and a run of another suite with the
    same scenario names where it is not: the seed section must use only the first."""
    with Store(db_path) as store:
        for name, em_ms in (("seed-000-node-vs-eventmachine", 15.0), ("quick", 3.0)):
            suite = store.add_suite(
                StoredSuite(name, f"suites/{name}.toml", "c0ffee" * 10 + "beef")
            )
            run = store.start_run(suite, {"kernel": "6.1.0-28-amd64"})
            for test in seed_000_tests(em_test_1_ms=em_ms):
                test.run_id = run.id
                store.commit_test(test)
            store.finish_run(run.id, "finished")
    return db_path


def test_the_report_shows_the_seed_section_beside_the_scenarios(tmp_path):
    db = fill_seed_db(tmp_path / "lab.db")
    html = build_report(db, "all", tmp_path / "r.html").read_text()
    assert html.count('class="seed"') == 1
    section = html[html.index('id="seed-000"') :]
    section = section[: section.index("</section>")]
    assert "Seed 000: Node.js vs EventMachine under httperf" in section
    assert '<td class="num">20.9</td>' in section
    assert 'data-verdict="holds"' in section
    assert "20.9 / 4.3 = 4.86×" in section
    ours = re.search(r"<b>15 / 3\.\d+ = ([\d.]+)×</b>", section)
    assert ours and 4.5 < float(ours.group(1)) < 5.5
    assert '<a href="#seed-000">seed 000</a>' in html
