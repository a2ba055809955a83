"""Progress of `serverlab run`: test i of N, elapsed and remaining time, live requests/s,
open connections, server CPU and RSS. A live line on a terminal; one line per test
otherwise, so that CI logs stay readable."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from serverlab.base import terminal
from serverlab.run.suite import Permutation


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    def __init__(self, estimate_s_per_test: dict[str, float], console: Console | None = None):
        self.console = console or terminal.console(stderr=True)
        self.estimates = estimate_s_per_test
        self.live: Live | None = None
        self.total = 0
        self.index = 0
        self.label = ""
        self.started = time.monotonic()
        self.remaining_estimate = 0.0
        self.test_started_at = 0.0
        self.rps = 0.0
        self.open = 0
        self.cpu = 0.0
        self.rss = 0

    def begin(self, total: int, skipped: int, remaining_estimate_s: float = 0.0) -> None:
        self.total = total
        self.remaining_estimate = remaining_estimate_s
        if skipped:
            self._say(f"resuming: {skipped} finished tests kept, {total} to run")
        if self.console.is_terminal:
            self.live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    def test_started(self, index: int, perm: Permutation, repeat: int) -> None:
        self.index = index
        dims = " ".join(f"{k}={v}" for k, v in perm.params.items() if k != "pacer")
        self.label = f"{perm.scenario} {perm.contestant} {dims} r{repeat + 1}".strip()
        self.test_started_at = time.monotonic()
        self.rps = self.open = self.cpu = self.rss = 0
        self.remaining_estimate = max(0.0, self.remaining_estimate)
        if not self.live:
            self._say(f"[{index + 1}/{self.total}] {self.label}")
        self._refresh()

    def test_finished(self, test) -> None:
        spent = time.monotonic() - self.test_started_at
        self.remaining_estimate -= self.estimates.get(test.permutation_key, spent)
        summary = test.summary or {}
        flags = ", ".join(k for k in test.validity if not k.endswith("_percent"))
        line = (
            f"[{self.index + 1}/{self.total}] {test.status:8} {self.label}: "
            f"{summary.get('rps', 0):,.0f} req/s" + (f"  ({flags})" if flags else "")
        )
        self._say(line)

    def _say(self, line: str) -> None:
        self.console.print(line, highlight=False)

    def interval(self, record: dict) -> None:
        self.rps = float(record.get("rps", self.rps) or 0)
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
                f"test {self.index + 1}/{self.total} {self.label} | {_clock(elapsed)} elapsed, "
                f"~{_clock(left)} left | {self.rps:,.0f} req/s, {self.open:,} open | "
                f"server {self.cpu:.0f}% CPU, {self.rss / 2**20:.0f} MB"
            )
        )
