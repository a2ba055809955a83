"""The warm-up's steady rule: a request test warms its server until the rate is steady.

The warm-up engine run writes an interval line every WARMUP_INTERVAL_MS. The warm-up is
steady once the last STEADY_INTERVALS lines' rates each lie within ±STEADY_TOLERANCE of
their own mean and, in a server with a JIT's compiler threads (a JVM's), those threads used
at most JIT_QUIET of a core over the same lines; it stops at the first line that ends at
or after the plan's `warmup_s` with the rule met, and at `warmup_max_s` at the latest (the
engine run's own length): a warm-up that reaches its cap unsteady is recorded so, and the
test is flagged `not-steady`.

Time to steady state is the start of the unbroken run of steady windows that ended the
warm-up: the instant from which the rate held (and the JIT was quiet), and the answers
before it. Both go in the test's `run_info["warmup"]`, with the rate of every line and the
compiler threads' share of a core in each (`jit_percent`), for the report's chart.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from serverlab.run.execution import procfs

WARMUP_INTERVAL_MS = 500
# 4 lines of 0.5 s = 2 s. The JVM contestants' rate climbs in steps as the JIT's tiers finish
# (java-tomcat-blocking here: about 3.5k, then 8-9k, then 13-15k req/s, a few seconds
# apart), and one or two lines between two steps would pass for steady; a server steady
# from its start still stops after 2 s.
STEADY_INTERVALS = 4
STEADY_TOLERANCE = 0.05
# A JIT's compiler threads, by the name the kernel keeps (15 characters): HotSpot's tiers.
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")
# The rate alone cannot tell a plateau between two of the JIT's tiers from the top:
# java-tomcat-blocking's keep-alive rate here sat 2-4 s at about 55k req/s, passed the rate
# rule, then stepped to about 100k inside the measured window (4 of 6 repeats of one demo).
# Its compiler threads used 14-36 % of a core through the climb and 0-2 % from the top step
# on, read from the kernel (utime + stime of each thread, /proc/<pid>/task/<tid>/stat).
JIT_QUIET = 0.05
RULE = (
    f"the last {STEADY_INTERVALS} consecutive {WARMUP_INTERVAL_MS / 1000:g} s intervals each "
    f"within ±{STEADY_TOLERANCE:.0%} of their mean, and the server's JIT compiler threads "
    f"(where it has them) at most {JIT_QUIET:.0%} of a core over them; at least warmup_s, "
    "at most warmup_max_s"
)


def jit_clock(server_pid: int) -> Callable[[], int | None]:
    """The server's JIT compiler threads' CPU ticks so far, in the processes its tree has
    as the warm-up starts (None: it has none). HotSpot may stop an idle compiler thread
    (UseDynamicNumberOfCompilerThreads), taking its ticks: the count then falls, over a
    window in which the JIT was idle anyway."""
    members = procfs.descendants(server_pid)
    return functools.partial(procfs.thread_ticks, members, JIT_THREADS)


def window_is_steady(rates: list[float]) -> bool:
    """Whether every rate lies within ±STEADY_TOLERANCE of their mean (a server answering
    nothing is not steady)."""
    mean = sum(rates) / len(rates) if rates else 0.0
    return mean > 0 and all(abs(rate - mean) <= STEADY_TOLERANCE * mean for rate in rates)


@dataclass
class SteadyWatch:
    """Reads the warm-up's interval lines as they arrive (the engine's on_interval hook)
    and says when the warm-up may stop (`done`). `jit`: the server's JIT compiler threads'
    CPU ticks so far (None: it has none), read as the watch is made (the warm-up's start)
    and as each line arrives; left out (None) for lines handed over after the load, which
    the kernel's counts no longer match."""

    floor_s: float  # never stop before this (the plan's warmup_s)
    jit: Callable[[], int | None] | None = None
    # At the start, then at each line's arrival: one more than the lines.
    jit_ticks: list[int | None] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    ends_s: list[float] = field(default_factory=list)
    steady_from: int | None = None  # the first line of the unbroken steady run
    # The rule was met and the warm-up is being stopped: lines that still come are drawn,
    # not judged (the rule's outcome is the one the stop was made on).
    settled: bool = False

    def __post_init__(self) -> None:
        self.jit_ticks.append(self.jit() if self.jit else None)

    def interval(self, line: dict) -> None:
        self.rates.append(float(line.get("rps") or 0.0))
        self.answered.append(int(line.get("answered") or 0))
        self.ends_s.append(float(line.get("elapsed_s") or 0.0))
        self.jit_ticks.append(self.jit() if self.jit else None)
        if self.settled:
            return
        window = self.rates[-STEADY_INTERVALS:]
        if len(window) < STEADY_INTERVALS or not window_is_steady(window) or self._compiling():
            self.steady_from = None
        elif self.steady_from is None:
            self.steady_from = len(self.rates) - STEADY_INTERVALS

    def _compiling(self) -> bool:
        """Whether the JIT's compiler threads used more than JIT_QUIET of a core over the
        last STEADY_INTERVALS lines (never, for a server without them)."""
        busy = self.jit_share(len(self.rates) - STEADY_INTERVALS, len(self.rates) - 1)
        return busy is not None and busy > JIT_QUIET

    def jit_share(self, first: int, last: int) -> float | None:
        """The compiler threads' share of one core over lines `first` to `last`."""
        start, end = self.jit_ticks[first], self.jit_ticks[last + 1]
        if start is None or end is None:
            return None
        began = self.ends_s[first - 1] if first else 0.0
        return (end - start) / procfs.TICKS_PER_S / max(self.ends_s[last] - began, 1e-6)

    def done(self) -> bool:
        if not self.settled and self.steady_from is not None:
            self.settled = self.ends_s[-1] >= self.floor_s - 1e-6
        return self.settled

    def record(self, cap_s: float, ran_s: float | None) -> dict:
        """What the test keeps of its warm-up: the rule's outcome and the rate of each line."""
        steady = self.done()
        record: dict = {
            "rule": RULE,
            "interval_s": WARMUP_INTERVAL_MS / 1000,
            "min_s": self.floor_s,
            "max_s": cap_s,
            "ran_s": ran_s,
            "steady": steady,
            "rates": [round(rate, 1) for rate in self.rates],
        }
        if any(ticks is not None for ticks in self.jit_ticks):
            # Each line's share of one core in the compiler threads, in %.
            record["jit_percent"] = [_percent(self.jit_share(i, i)) for i in range(len(self.rates))]
        if steady and self.steady_from is not None:
            start = self.ends_s[self.steady_from - 1] if self.steady_from else 0.0
            record["steady_s"] = round(start, 3)
            record["steady_requests"] = sum(self.answered[: self.steady_from])
        return record


def _percent(share: float | None) -> float | None:
    return None if share is None else round(100 * max(share, 0.0), 1)
