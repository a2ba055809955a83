"""The one type of a report figure. Every table of the report (the cells of the summary,
`--json`, the HTML, `compare` and the at-a-glance block; the push transports; the TLS
tables; the seed sections) shows rows of it, so that a figure says once what it counts,
over which window, from which source, which way is better and which validity flags touch
it. The accessors read one stored test and return None where the test has no value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.engine_summary import summary_number
from serverlab.results.report.figures.push import is_push

Accessor = Callable[[RecordedTest], float | None]

# How a table folds a figure over a cell's tests.
MEDIAN = "median"  # the median over the tests that ended well (SUMMARIZED_STATUSES)
SUM = "sum"  # a count summed over the tests that ended well
SUM_ALL = "sum-all"  # a count summed over every test, crashed ones included
# Which tests a figure has a value for by design.
ANY_TEST = "any"
REQUESTS = "requests"  # a request test's (throughput, latency, CPU per request)
PUSH = "push"  # a push test's (delivery delay, CPU per delivered event)


@dataclass(frozen=True)
class Figure:
    """One figure of a test: what it counts (``label``, ``unit``), over which ``window``,
    read from which ``source``, by ``of``. ``min_difference`` (in ``unit``) is the least
    difference of medians that can be material (a reading that moves by itself, as socket
    memory read at one instant does); ``ceiling`` gives a test's highest possible value of
    the figure, where it has one (the CPU a closed loop can use at most); ``absent`` says
    why a test has no value of the figure where that is by design ("n/a: no held
    connections"), so that the cell says so rather than "-". ``flagged_as`` names the
    figures whose validity flags touch this one, where it reads theirs (a ratio of counts
    and CPU); by default its own ``name``. ``heading`` is a narrow table's column heading
    ("p99 ms"), where the label is too long for it. ``applies_to`` says which tests have a
    value of it by design (``REQUESTS``, ``PUSH`` or ``ANY_TEST``): the HTML summary shows a
    request scenario's table and a push scenario's, each with its own figures."""

    name: str
    label: str
    unit: str
    higher_is_better: bool
    of: Accessor
    better: str = "better"
    worse: str = "worse"
    window: str = ""
    source: str = ""
    min_difference: float = 0.0
    ceiling: Accessor | None = None
    absent: Callable[[RecordedTest], str | None] | None = None
    fold: str = MEDIAN
    applies_to: str = ANY_TEST
    flagged_as: frozenset[str] | None = None
    heading: str = ""

    @property
    def flag_names(self) -> frozenset[str]:
        """The figure names a validity flag must touch to qualify this figure."""
        return self.flagged_as if self.flagged_as is not None else frozenset({self.name})

    @property
    def titled(self) -> str:
        """The label with its unit: "latency p99 (ms)"."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def applies(self, test: RecordedTest) -> bool:
        """Whether the test has a value of this figure by design (``applies_to``)."""
        if self.applies_to == ANY_TEST:
            return True
        return (self.applies_to == PUSH) == is_push(test)

    def view(self, name: str, **changes) -> Figure:
        """The same figure under another table's key (and label), still qualified by the
        flags that touch this one."""
        return replace(self, **{"name": name, "flagged_as": self.flag_names, **changes})


def request_latency_ms(percentile: str) -> Accessor:
    """The engine's request latency at ``percentile`` ("p50", "p99", "mean"), in ms."""

    def of(test: RecordedTest) -> float | None:
        micros = summary_number(test, "latency_us", percentile)
        return None if micros is None else micros / 1000

    return of
