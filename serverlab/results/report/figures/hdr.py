"""The engine's HdrHistograms (V2, deflate, base64) read and added up (report stage): the
percentiles of several histograms together are those of their sum, never an average."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hdrh.histogram import HdrHistogram


class HistogramError(ValueError):
    """A stored histogram that does not decode."""


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


def added(encoded: Iterable[str]) -> HdrHistogram | None:
    """The sum of encoded histograms (None when there is none): every sample of each."""
    total = None
    for text in encoded:
        histogram = decode(text)
        if total is None:
            total = histogram
        else:
            total.add(histogram)
    return total
