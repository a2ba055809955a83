"""Progress of `serverlab run`: test i of N, elapsed and remaining time, live requests/s
(events received, for push), open connections, server CPU and RSS. A live line on a
terminal; one line per test otherwise, so that CI logs stay readable."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from serverlab.base import terminal
from serverlab.base.paramtext import params_text
from serverlab.base.progress import clock
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.run.execution.testplan import TestPlan


def _outcome(summary: dict, unit: str) -> str:
    """A request test's rate; a push test's events as counts. A push test's events per
    second are the plan's emit cycles times its subscribers, not a property of the server
    (the report's push section has its per-cycle figures), so none is printed."""
    if unit == "req/s":
        return f"{float(summary.get('rps') or 0):,.0f} req/s"
    events = summary.get("events") or {}
    return f"{events.get('received') or 0:,} events received, {events.get('lost') or 0:,} lost"


class Progress:
    def __init__(self, console: Console | None = None):
        self.console = console or terminal.console(stderr=True)
        self.live: Live | None = None
        self.total = 0
        self.index = 0
        self.label = ""
        self.started = time.monotonic()
        self.remaining_estimate = 0.0
        self.test_started_at = 0.0
        self.estimate = 0.0
        self.rate = 0.0
        self.unit = "req/s"
        self.open = 0
        self.cpu = 0.0
        self.rss = 0

    def begin(self, plans: list[TestPlan], skipped: int) -> None:
        self.total = len(plans)
        self.remaining_estimate = sum(plan.estimate_s for plan in plans)
        if skipped:
            self._say(f"resuming: {skipped} finished tests kept, {self.total} to run")
        if self.console.is_terminal:
            self.live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    def test_started(self, index: int, plan: TestPlan) -> None:
        self.index = index
        dims = params_text(plan.params, leave_out=("pacer",))
        # Printed without markup (`_say`, a Text when live): only control characters to hide.
        label = f"{plan.scenario} {plan.contestant} {dims} r{plan.repeat + 1}".strip()
        self.label = terminal.literal(label, markup=False)
        self.estimate = plan.estimate_s
        self.unit = "events" if plan.params.get("behaviour") in PUSH_BEHAVIOURS else "req/s"
        self.test_started_at = time.monotonic()
        self.rate = self.open = self.cpu = self.rss = 0
        self.remaining_estimate = max(0.0, self.remaining_estimate)
        if not self.live:
            self._say(f"[{index + 1}/{self.total}] {self.label}")
        self._refresh()

    def test_finished(self, test) -> None:
        self.remaining_estimate -= self.estimate
        flags = ", ".join(k for k in test.validity if not k.endswith("_percent"))
        line = (
            f"[{self.index + 1}/{self.total}] {test.status:8} {self.label}: "
            f"{_outcome(test.summary or {}, self.unit)}" + (f"  ({flags})" if flags else "")
        )
        self._say(line)

    def _say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def interval(self, record: dict) -> None:
        if self.unit == "events":
            self.rate += float(record.get("events") or 0)  # a running count, not a rate
        else:
            self.rate = float(record.get("rps", self.rate) or 0)
        self.open = int(record.get("open_connections", self.open) or 0)
        self._refresh()

    def sample(self, sample) -> None:
        self.cpu, self.rss = sample.cpu_percent, sample.rss_bytes

    def end(self) -> None:
        if self.live:
            self.live.stop()
            self.live = None

    def _refresh(self) -> None:
        if not self.live:
            return
        elapsed = time.monotonic() - self.started
        left = max(0.0, self.remaining_estimate - (time.monotonic() - self.test_started_at))
        self.live.update(
            Text(
                f"test {self.index + 1}/{self.total} {self.label} | {clock(elapsed)} elapsed, "
                f"~{clock(left)} left | {self.rate:,.0f} {self.unit}, {self.open:,} open | "
                f"server {self.cpu:.0f}% CPU, {self.rss / 2**20:.0f} MB"
            )
        )


class Fanout:
    """The runner's progress calls, passed on to several displays in turn (the terminal's,
    the live page's feed)."""

    def __init__(self, *displays):
        self.displays = displays

    def begin(self, plans: list[TestPlan], skipped: int) -> None:
        for display in self.displays:
            display.begin(plans, skipped)

    def test_started(self, index: int, plan: TestPlan) -> None:
        for display in self.displays:
            display.test_started(index, plan)

    def test_finished(self, test) -> None:
        for display in self.displays:
            display.test_finished(test)

    def interval(self, record: dict) -> None:
        for display in self.displays:
            display.interval(record)

    def sample(self, sample) -> None:
        for display in self.displays:
            display.sample(sample)

    def end(self) -> None:
        for display in self.displays:
            display.end()
