"""Latency stacked at a kernel timer (issue 32, item 5): a distribution whose answers pile up
just past the 40 ms delayed ACK, the 200 ms TCP minimum RTO or the 1 s SYN retransmit measures
the kernel waiting on that timer (a small segment held by Nagle, a lost segment, a dropped
SYN), not the server's work.

The rule, over the latency HdrHistogram the cell's percentiles come from: a timer's band runs
from 5 % below its value to 30 % above it: a stall lasts the timer plus the exchange's own
time, the kernel's timers tick in jiffies and fire late on a busy machine, so answers land
past the value, rarely before it (a planted delayed-ACK stall on loopback, with a load average
of 23, put 94 % of its answers between 42 and 52 ms). The latency is stacked at the timer
when at least ``STACK_SHARE`` of the samples lie in the band and the band holds at least
``EDGE_RATIO`` times as many as the window of the same width just below it: a cliff at the
timer, where a broad distribution passing through has as many samples below as in it. Only
the window below is asked: on a loaded machine the stalls smear upwards (the timer fires late,
an open loop's lag adds), and main's engine against go-nethttp, with a compiler busy on both
cores, put 29 % of its answers between 38 and 52 ms, none below, and the rest up to 110 ms."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.hdr import HistogramError, decode
from serverlab.results.report.figures.histogram import latency_histogram

# (value in ms, the timer's name): the kernel timers a stalled exchange waits on.
KERNEL_TIMERS_MS = (
    (40.0, "delayed-ACK"),
    (200.0, "TCP minimum RTO"),
    (1000.0, "SYN retransmit"),
)
BAND_BELOW = 0.05
BAND_ABOVE = 0.30
# At least this share of the samples in a timer's band...
STACK_SHARE = 0.20
# ...and this many times as many as in the same-width window below it.
EDGE_RATIO = 3.0


@dataclass(frozen=True)
class Stack:
    """Samples piled at one kernel timer."""

    timer_ms: float
    timer: str
    low_ms: float
    high_ms: float
    share: float


def stacks_of(test: RecordedTest) -> tuple[Stack, ...]:
    """The kernel timers the latency of the test's cells (``latency_histogram``: for push, the
    delivery delay) is stacked at; none without a readable histogram (the latency chart
    carries the bad-histogram flag)."""
    encoded = latency_histogram(test)
    try:
        return stacked_timers(encoded) if encoded else ()
    except HistogramError:
        return ()


def _band(timer_ms: float) -> tuple[float, float]:
    return timer_ms * (1 - BAND_BELOW), timer_ms * (1 + BAND_ABOVE)


@lru_cache(maxsize=256)
def stacked_timers(encoded: str, unit_ms: float = 0.001) -> tuple[Stack, ...]:
    """The kernel timers the histogram's samples (in units of ``unit_ms`` ms: µs by default,
    the engine's) are stacked at. Cached: each cell of a test asks for its flags."""
    histogram = decode(encoded)
    total = histogram.get_total_count()
    if not total:
        return ()
    windows = {}
    for timer_ms, _ in KERNEL_TIMERS_MS:
        low, high = _band(timer_ms)
        width = high - low
        windows[timer_ms] = [(low - width, low), (low, high)]
    counts = {timer_ms: [0, 0] for timer_ms in windows}
    for recorded in histogram.get_recorded_iterator():
        value_ms = recorded.value_iterated_to * unit_ms
        for timer_ms, bounds in windows.items():
            for place, (low, high) in enumerate(bounds):
                if low <= value_ms < high:
                    counts[timer_ms][place] += recorded.count_at_value_iterated_to
    return tuple(
        Stack(timer_ms, name, *_band(timer_ms), counts[timer_ms][1] / total)
        for timer_ms, name in KERNEL_TIMERS_MS
        if _is_stack(*counts[timer_ms], total)
    )


def _is_stack(below: int, band: int, total: int) -> bool:
    return band >= STACK_SHARE * total and band >= EDGE_RATIO * below
