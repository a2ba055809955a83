"""Latency percentile curves from the engine's HdrHistogram (V2, deflate, base64)."""

from __future__ import annotations

from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from serverlab.store import DEFAULT_HISTOGRAM, RecordedTest

# Percentiles drawn on the curve: dense towards the tail, where architectures differ.
CURVE_PERCENTILES = (
    0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
)  # fmt: skip


class HistogramError(ValueError):
    """A stored histogram that does not decode."""


@dataclass(frozen=True)
class PercentileCurve:
    percentiles: list[float]
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


def percentile_curve(encoded: str, scale: float = 1.0) -> PercentileCurve:
    """Values at ``CURVE_PERCENTILES`` (multiplied by ``scale``, e.g. 1/1000 for µs -> ms)."""
    histogram = decode(encoded)
    count = histogram.get_total_count()
    if count == 0:
        return PercentileCurve([], [], 0)
    # One pass over the counts for every percentile, rather than one pass each.
    by_percentile = histogram.get_percentile_to_value_dict(list(CURVE_PERCENTILES))
    values = [by_percentile[p] * scale for p in CURVE_PERCENTILES]
    return PercentileCurve(list(CURVE_PERCENTILES), values, count)


def latency_histogram(test: RecordedTest) -> str | None:
    """The test's latency histogram: the stored one, else the one inside the engine summary."""
    if DEFAULT_HISTOGRAM in test.histograms:
        return test.histograms[DEFAULT_HISTOGRAM]
    if test.histograms:
        return next(iter(test.histograms.values()))
    embedded = (test.summary or {}).get("histogram")
    return embedded if isinstance(embedded, str) and embedded else None
