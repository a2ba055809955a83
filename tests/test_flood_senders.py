"""A flood from several generators, as the runner records it: each sender's numbers and
count beside the receiver's total (serverlab.run.execution.receiver.per_sender), and the seed
section's note that spread figures on one machine are capacity, not speed."""

from serverlab.results.records import RecordedTest, Run, StoredSuite
from serverlab.results.report.sections.seeds import seed_sections
from serverlab.run.execution.receiver import per_sender

CAPACITY = "the server and the generators share its CPUs: capacity figures, not speed"


def spread_flood(*senders: tuple[int, int], run_id: int = 1) -> RecordedTest:
    """A flood whose generators started at each `seq_first` and sent `sent` messages."""
    test = RecordedTest(run_id, "k", "reference", 0, "ok", 0.0, 1.0, scenario="flood")
    test.run_info["generators"] = [
        {"address": f"198.18.0.{3 + i}", "seq_first": first, "summary": {"answered": sent}}
        for i, (first, sent) in enumerate(senders)
    ]
    return test


def test_each_sender_is_kept_beside_the_total_and_exact_ranges_raise_no_flag():
    test = spread_flood((1, 50_000), (50_001, 50_000))
    figures = {"sent": 100_000, "received": 99_990, "lost": 10}
    per_sender(test, figures)
    assert [(s["seq_first"], s["sent"]) for s in figures["senders"]] == [
        (1, 50_000),
        (50_001, 50_000),
    ]
    assert test.validity == {}


def test_senders_whose_counts_do_not_add_up_to_the_total_are_flagged():
    test = spread_flood((1, 50_000), (50_001, 49_000))
    per_sender(test, {"sent": 100_000})
    assert "[50000, 49000] against 100000" in test.validity["syslog_senders_disagree"]


def test_senders_whose_numbers_overlap_are_flagged():
    test = spread_flood((1, 50_000), (40_001, 50_000))
    per_sender(test, {"sent": 100_000})
    assert "syslog_numbering_overlaps" in test.validity


def test_a_local_flood_has_no_senders():
    test = RecordedTest(1, "k", "reference", 0, "ok", 0.0, 1.0)
    figures = {"sent": 10}
    per_sender(test, figures)
    assert "senders" not in figures and test.validity == {}


def test_the_seed_section_says_capacity_only_for_runs_that_spread_its_tests():
    suite = StoredSuite("seed-002-syslog", "suites/seed-002-syslog.toml", "0" * 64, id=1)
    placement = {"placement": {"note": CAPACITY}}
    spread = Run(id=1, suite_id=1, started_at=0.0, status="finished", machine=placement)
    local = Run(id=2, suite_id=1, started_at=0.0, status="finished", machine=placement)
    alone = RecordedTest(2, "k", "reference", 0, "ok", 0.0, 1.0, scenario="flood")
    (section,) = seed_sections([alone], [spread, local], {1: suite})
    assert section.spread_note == ""
    (section,) = seed_sections([alone, spread_flood((1, 5))], [spread, local], {1: suite})
    assert section.spread_note == CAPACITY
