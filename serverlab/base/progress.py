"""Progress of long work counted in units (contestants verified, tests loaded, rows
recovered, runs published, lab nodes started): on a terminal a bar with the units done, the
time elapsed and an estimate of the time left; when stderr is piped, one plain line per
unit, so that CI logs stay readable. ``serverlab run``'s own progress
(``serverlab.run.plan.progress``) tells its time the same way (``clock``).

Used as a context manager, so that a Ctrl-C (a KeyboardInterrupt) takes the bar down with
it and leaves the terminal as it was: the command's one line "serverlab: interrupted" is
all that is said.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from serverlab.base import terminal


def clock(seconds: float) -> str:
    """m:ss, as every progress line writes a time."""
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


# Up to this many units, a piped progress says every one.
LINES_OF_EVERY_UNIT = 50


class Tally:
    """``begin(total, what)``, then ``advance(label)`` after each unit of work, then
    ``end()`` (or a ``with`` block around them). A total of 0 or 1 says nothing: there is
    nothing to wait for that a bar would help with."""

    def __init__(self, console: Console | None = None):
        self.console = console or terminal.console(stderr=True)
        self.bar: Progress | None = None
        self.task = None
        self.total = 0
        self.done = 0
        self.what = ""
        self.quiet_for_s = 0.0
        self.started = time.monotonic()

    def __enter__(self) -> Tally:
        return self

    def __exit__(self, *_exc) -> None:
        self.end()

    @property
    def quiet(self) -> bool:
        return self.total < 2

    def begin(self, total: int, what: str, quiet_for_s: float = 0.0) -> None:
        """``quiet_for_s``: piped, no line before the work has taken this long (tests
        loaded from a small database are done before anyone waits)."""
        self.total, self.done, self.what = total, 0, what
        self.quiet_for_s = quiet_for_s
        self.started = time.monotonic()
        if self.quiet or not self.console.is_terminal:
            return
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("~"),
            TimeRemainingColumn(),
            TextColumn("left {task.fields[label]}"),
            console=self.console,
            transient=True,
            # What the command prints meanwhile goes above the bar, on the terminal; stdout
            # sent elsewhere (`verify --all > out.txt`) stays there.
            redirect_stdout=sys.stdout.isatty(),
        )
        self.task = self.bar.add_task(terminal.literal(what), total=total, label="")
        self.bar.start()

    def advance(self, label: str = "", units: int = 1) -> None:
        """``units`` more done (rows copied, say), the last of them on ``label``."""
        before, self.done = self.done, self.done + units
        if self.bar is not None:
            self.bar.update(self.task, advance=units, label=terminal.literal(label))
        elif not self.quiet and self._worth_a_line(before):
            self._say(label)

    def _worth_a_line(self, before: int) -> bool:
        """Every unit of a few; of many (tests loaded from a large database), the unit that
        crosses each tenth and the last, so that a log gets ten lines, not thousands; none
        in the first ``quiet_for_s``."""
        if time.monotonic() - self.started < self.quiet_for_s:
            return False
        if self.total <= LINES_OF_EVERY_UNIT or self.done == self.total:
            return True
        return self.done * 10 // self.total != before * 10 // self.total

    def _say(self, label: str) -> None:
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * max(0, self.total - self.done) if self.done else 0.0
        line = f"[{self.done}/{self.total}] {self.what}" + (f": {label}" if label else "")
        line += f" ({clock(elapsed)} elapsed, ~{clock(left)} left)"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def end(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
