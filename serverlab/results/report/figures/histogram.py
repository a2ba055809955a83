"""Latency percentile curves from the engine's HdrHistogram (V2, deflate, base64)."""

from __future__ import annotations

from dataclasses import dataclass

import serverlab.results.report.figures.push as push
from serverlab.results.records import DEFAULT_HISTOGRAM, RecordedTest
from serverlab.results.report.figures.hdr import HistogramError, decode, values_at_quantiles

# Quantiles drawn on the curve: dense towards the tail, where architectures differ. Written
# as the engine writes them (0.999, not 99.9 / 100) so that float rounding agrees too.
CURVE_QUANTILES = (
    0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0,
)  # fmt: skip

__all__ = ["HistogramError", "PercentileCurve", "decode", "percentile_curve", "values_at_quantiles"]


@dataclass(frozen=True)
class PercentileCurve:
    quantiles: list[float]
    values: list[float]
    count: int


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
    emit, not the server's speed; over the window's cycles where the engine recorded them."""
    window = push.window_delays(test) if push.is_push(test) else None
    if window is not None:
        return window.encode().decode()
    delay = (test.summary or {}).get("event_delay_histogram")
    if push.is_push(test) and isinstance(delay, str) and delay:
        return delay
    if DEFAULT_HISTOGRAM in test.histograms:
        return test.histograms[DEFAULT_HISTOGRAM]
    if test.histograms:
        return next(iter(test.histograms.values()))
    embedded = (test.summary or {}).get("histogram")
    return embedded if isinstance(embedded, str) and embedded else None
