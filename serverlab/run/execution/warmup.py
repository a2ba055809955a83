"""The warm-up's steady rule: a request test warms its server until the rate is steady.

The warm-up engine run writes an interval line every WARMUP_INTERVAL_MS. The warm-up is
steady once the last STEADY_INTERVALS lines' rates each lie within ±STEADY_TOLERANCE of
their own mean; it stops at the first line that ends at or after the plan's `warmup_s`
with the rule met, and at `warmup_max_s` at the latest (the engine run's own length): a
warm-up that reaches its cap unsteady is recorded so, and the test is flagged `not-steady`.

Time to steady state is the start of the unbroken run of steady windows that ended the
warm-up: the instant from which the rate held, and the answers before it. Both go in the
test's `run_info["warmup"]`, with the rate of every line, for the report's chart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WARMUP_INTERVAL_MS = 500
# 4 lines of 0.5 s = 2 s. The JVM contestants' rate climbs in steps as the JIT's tiers finish
# (java-tomcat-blocking here: about 3.5k, then 8-9k, then 13-15k req/s, a few seconds
# apart), and one or two lines between two steps would pass for steady; a server steady
# from its start still stops after 2 s.
STEADY_INTERVALS = 4
STEADY_TOLERANCE = 0.05
RULE = (
    f"the last {STEADY_INTERVALS} consecutive {WARMUP_INTERVAL_MS / 1000:g} s intervals each "
    f"within ±{STEADY_TOLERANCE:.0%} of their mean, at least warmup_s, at most warmup_max_s"
)


def window_is_steady(rates: list[float]) -> bool:
    """Whether every rate lies within ±STEADY_TOLERANCE of their mean (a server answering
    nothing is not steady)."""
    mean = sum(rates) / len(rates) if rates else 0.0
    return mean > 0 and all(abs(rate - mean) <= STEADY_TOLERANCE * mean for rate in rates)


@dataclass
class SteadyWatch:
    """Reads the warm-up's interval lines as they arrive (the engine's on_interval hook)
    and says when the warm-up may stop (`done`)."""

    floor_s: float  # never stop before this (the plan's warmup_s)
    rates: list[float] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    ends_s: list[float] = field(default_factory=list)
    steady_from: int | None = None  # the first line of the unbroken steady run
    # The rule was met and the warm-up is being stopped: lines that still come are drawn,
    # not judged (the rule's outcome is the one the stop was made on).
    settled: bool = False

    def interval(self, line: dict) -> None:
        self.rates.append(float(line.get("rps") or 0.0))
        self.answered.append(int(line.get("answered") or 0))
        self.ends_s.append(float(line.get("elapsed_s") or 0.0))
        if self.settled:
            return
        window = self.rates[-STEADY_INTERVALS:]
        if len(window) < STEADY_INTERVALS or not window_is_steady(window):
            self.steady_from = None
        elif self.steady_from is None:
            self.steady_from = len(self.rates) - STEADY_INTERVALS

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
        if steady and self.steady_from is not None:
            start = self.ends_s[self.steady_from - 1] if self.steady_from else 0.0
            record["steady_s"] = round(start, 3)
            record["steady_requests"] = sum(self.answered[: self.steady_from])
        return record
