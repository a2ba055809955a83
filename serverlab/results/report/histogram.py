"""Latency percentile curves from the engine's HdrHistogram (V2, deflate, base64)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from serverlab.results.report.push import is_push
from serverlab.results.store import DEFAULT_HISTOGRAM, RecordedTest

# Quantiles drawn on the curve: dense towards the tail, where architectures differ. Written
# as the engine writes them (0.999, not 99.9 / 100) so that float rounding agrees too.
CURVE_QUANTILES = (
    0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0,
)  # fmt: skip


class HistogramError(ValueError):
    """A stored histogram that does not decode."""


@dataclass(frozen=True)
class PercentileCurve:
    quantiles: list[float]
    values: list[float]
    count: int


def decode(encoded: str) -> HdrHistogram:
    try:
        histogram = HdrHistogram.decode(encoded.strip())
    except Exception as error:  # the codec raises bare and zlib errors alike
        raise HistogramError(f"not an HdrHistogram V2 base64 string: {error}") from error
    if histogram is None:
        raise HistogramError("not an HdrHistogram V2 base64 string")
    return histogram


def values_at_quantiles(histogram: HdrHistogram, quantiles: list[float]) -> list[int]:
    """Values at ascending quantiles by the engine's rule (Rust hdrhistogram: the first bucket
    whose running count reaches ceil(q * total)), so that the report's p50 or p99 is the very
    number the engine printed. The Python package rounds the rank to nearest instead."""
    total = histogram.get_total_count()
    targets = [max(1, math.ceil(min(q, 1.0) * total)) for q in quantiles]
    values: list[int] = []
    running = 0
    for index in range(histogram.counts_len):
        running += histogram.get_count_at_index(index)
        while len(values) < len(targets) and running >= targets[len(values)]:
            value = histogram.get_value_from_index(index)
            at_zero = quantiles[len(values)] == 0.0
            values.append(
                histogram.get_lowest_equivalent_value(value)
                if at_zero
                else histogram.get_highest_equivalent_value(value)
            )
        if len(values) == len(targets):
            break
    return values


def percentile_curve(encoded: str, scale: float = 1.0) -> PercentileCurve:
    """Values at ``CURVE_QUANTILES`` (multiplied by ``scale``, e.g. 1/1000 for µs -> ms)."""
    histogram = decode(encoded)
    count = histogram.get_total_count()
    if count == 0:
        return PercentileCurve([], [], 0)
    values = values_at_quantiles(histogram, list(CURVE_QUANTILES))
    return PercentileCurve(list(CURVE_QUANTILES), [v * scale for v in values], count)


def latency_histogram(test: RecordedTest) -> str | None:
    """The test's latency histogram: the stored one, else the one inside the engine summary.
    For push, the delivery delay's: a long poll's answer time is mostly its wait for the next
    emit, not the server's speed."""
    delay = (test.summary or {}).get("event_delay_histogram")
    if is_push(test) and isinstance(delay, str) and delay:
        return delay
    if DEFAULT_HISTOGRAM in test.histograms:
        return test.histograms[DEFAULT_HISTOGRAM]
    if test.histograms:
        return next(iter(test.histograms.values()))
    embedded = (test.summary or {}).get("histogram")
    return embedded if isinstance(embedded, str) and embedded else None
