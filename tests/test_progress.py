import io
import re
from types import SimpleNamespace

import pytest
from rich.console import Console

from serverlab.base.progress import Tally
from serverlab.results.records import RecordedTest
from serverlab.run.plan.progress import Progress


def finished_line(behaviour: str) -> str:
    out = io.StringIO()
    progress = Progress(Console(file=out, width=200, force_terminal=False))
    plan = SimpleNamespace(
        scenario="s", contestant="c", repeat=0, estimate_s=1.0, params={"behaviour": behaviour}
    )
    progress.begin([plan], skipped=0)
    progress.test_started(0, plan)
    summary = {"rps": 0.0, "duration_s": 4.0, "events": {"received": 4000, "lost": 2}}
    test = RecordedTest(1, "k", "c", 0, "ok", 0.0, 4.0, summary=summary)
    progress.test_finished(test)
    return out.getvalue().splitlines()[-1]


@pytest.mark.parametrize("behaviour", ["longpoll", "comet", "sse", "websocket"])
def test_push_tests_show_events_received_and_lost_and_no_rate(behaviour):
    # A push test's events/s would be its plan's emit cycles times its subscribers.
    line = finished_line(behaviour)
    assert line.endswith(": 4,000 events received, 2 lost")
    assert "/s" not in line


def test_requests_show_requests_per_second():
    assert finished_line("keepalive").endswith(": 0 req/s")


@pytest.mark.parametrize("on_terminal", [False, True])
def test_a_hostile_scenario_name_is_shown_as_written_live_or_not(on_terminal):
    out = io.StringIO()
    progress = Progress(Console(file=out, width=200, force_terminal=on_terminal))
    plan = SimpleNamespace(
        scenario="x[/] [red]e\x1b[2Jx", contestant="c", repeat=0, estimate_s=1.0, params={}
    )
    progress.begin([plan], skipped=0)
    progress.test_started(0, plan)
    progress.interval({"rps": 10, "open_connections": 1})
    progress.test_finished(RecordedTest(1, "k", "c", 0, "ok", 0.0, 4.0, summary={"rps": 10}))
    progress.end()
    assert "x[/] [red]e\\x1b[2Jx c" in out.getvalue()
    assert "\x1b[2J" not in out.getvalue()


def counted(total: int, terminal: bool, labels=None) -> str:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=terminal, force_interactive=terminal)
    with Tally(console) as tally:
        tally.begin(total, "loading tests")
        for index in range(total):
            tally.advance((labels or {}).get(index, f"run {index}"))
    return out.getvalue()


def test_counted_work_piped_is_one_plain_line_per_unit_with_the_time_left():
    lines = counted(3, terminal=False).splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "[1/3] loading tests: run 0",
        "[2/3] loading tests: run 1",
        "[3/3] loading tests: run 2",
    ]
    assert all(re.search(r"\(\d+:\d\d elapsed, ~\d+:\d\d left\)$", line) for line in lines)


def test_much_work_piped_says_each_tenth_and_not_every_unit():
    lines = counted(1000, terminal=False).splitlines()
    assert [line.split(" ")[0] for line in lines] == [f"[{n}/1000]" for n in range(100, 1001, 100)]


def test_counted_work_on_a_terminal_is_a_bar_with_the_time_left_then_gone():
    shown = counted(3, terminal=True, labels={2: "\x1b[2Jrun 2"})
    assert "loading tests" in shown and "3/3" in shown and "left" in shown
    assert "\x1b[2J" not in shown, "a label from outside moves no cursor"
    assert "[1/3]" not in shown, "no plain lines beside the bar"
