"""How a cell's median and interval are written: in the HTML, and compact on a terminal."""

from __future__ import annotations

from serverlab.results import stats


def format_cell(summary: stats.Summary, compact: bool = False) -> tuple[str, str]:
    """(median, "[low, high] n=N") of a summary; `compact` for a terminal's narrow columns
    (76.4k, then 75.0k–77.0k and n=3 on lines of their own). The interval's coverage is not
    repeated in every cell: it depends on n alone, and `coverage_note` says it once."""
    if summary.n == 0 or summary.interval is None:
        return "-", ""
    number = compact_number if compact else _number
    low, high = number(summary.interval.low), number(summary.interval.high)
    if compact:
        return number(summary.median), f"{low}–{high}\nn={summary.n}"
    return number(summary.median), f"[{low}, {high}] n={summary.n}"


def coverage_note(ns) -> str:
    """One plain sentence on what the intervals cover, for the repeats present."""
    by_n = stats.coverage_by_n(ns)
    short = [f"n={n}: {coverage:.1%}".replace(".0%", "%") for n, coverage in by_n.items()]
    level = f"{stats.DEFAULT_CONFIDENCE:.0%}"
    text = (
        "Intervals: distribution-free confidence intervals of the median over repeats "
        f"(order statistics), {level} where there are enough repeats (6 or more)"
    )
    below = [s for (n, c), s in zip(by_n.items(), short, strict=True) if c < 0.95]
    if below:
        text += "; with fewer the interval is the range of the repeats and covers less: " + (
            ", ".join(below)
        )
    return text + "."


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def compact_number(value: float) -> str:
    """Three significant figures with a k or M suffix: 76.4k, 1.23M, 765, 0.045."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= 10 * scale if suffix == "k" else abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
