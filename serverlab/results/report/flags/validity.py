"""The validity flags of a stored test: each a reason to distrust the figures it names
(``Flag.figures``), so that a flag travels with exactly the cells that use it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import serverlab.results.report.figures.push as push
from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.engine_summary import summary_number
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import (
    METRICS,
    error_count,
    median_engine_cpu,
)
from serverlab.results.report.flags.kernel_timers import stacks_of

GENERATOR_BOUND_PERCENT = 90.0
# A median latency within this many times the engine's own floor is flagged.
FLOOR_RATIO = 2.0
# Below this share of the intended rate, the pacer could not keep up: the figure is suspect.
RATE_SHORTFALL_RATIO = 0.95
FLAG_TEXT_LIMIT = 160
# Delivery delays from a generator whose clock is known only this well are flagged.
CLOCK_UNCERTAINTY_MS = 1.0
# A request test whose rate moved more than this between the halves of its window.
STEADY_TOLERANCE = 0.10
# The engine's read delay at p99 above this share of latency p99 is flagged.
TAIL_FLOOR_SHARE = 0.25
# Failed attempts above this share of all attempts put every figure of a test in doubt;
# fewer are reported (the errors figure counts them) but qualify no other figure.
ERROR_SHARE_LIMIT = 0.01
LATENCY_FIGURES = frozenset({"p50", "p99"})
DELAY_FIGURES = frozenset({"delay_p50", "delay_p99"})
# Not-steady touches the figures of the exchange itself: its rate and, through it, its
# latency (a closed loop's latency is its clients over its rate). CPU and RSS stay the
# honest figures of the window they cover.
STEADY_FIGURES = frozenset({"rps", "p50", "p99"})
# Flags the runner stores that touch only some figures (any other touches them all).
# The monitor's 10 Hz CPU readings (cpu_req, cpu_event) are not the load window's reading.
KERNEL_FIGURES = frozenset({"cpu", "rss", "memory", "sockmem"})
# The runtime's own series (serverlab.run.execution.signals): a garbled side file touches
# only these.
SIGNAL_FIGURES = frozenset({"gc_pause", "loop_delay"})
RUNNER_FLAG_FIGURES = {
    "kernel-read-failed": KERNEL_FIGURES,
    "signals-unreadable": SIGNAL_FIGURES,
}


@dataclass(frozen=True)
class Flag:
    """A reason to distrust a figure. ``code`` is stable, ``text`` is for people.

    ``figures`` names the figures (``Figure.name``) whose values the flagged fault touches;
    ``None`` means every figure of the test. A cell carries a test's flag only when it shows
    one of those figures, so that a flag travels with exactly the cells that use it."""

    code: str
    text: str
    figures: frozenset[str] | None = None

    def touches(self, metric_name: str) -> bool:
        return self.figures is None or metric_name in self.figures

    def qualifies(self, figure: Figure) -> bool:
        """Whether the flag touches what the figure reads (``Figure.flag_names``)."""
        return any(self.touches(name) for name in figure.flag_names)


def validity_flags(test: RecordedTest) -> list[Flag]:
    flags = _status_flags(test) + _measurement_flags(test) + _push_flags(test)
    seen = {f.code for f in flags}
    for code, detail in sorted(test.validity.items()):
        # A bare number the runner stored is a measurement (e.g. a median CPU), not a flag.
        informational = isinstance(detail, int | float) and not isinstance(detail, bool)
        name = code.replace("_", "-")
        if detail and not informational and name not in seen:
            text = f"{name} ({detail})" if name == "machine-busy" else _flag_text(code, detail)
            flags.append(Flag(name, text, RUNNER_FLAG_FIGURES.get(name)))
    return flags


def flags_for(test: RecordedTest, metric_name: str) -> list[Flag]:
    """The test's flags that qualify its value of one metric."""
    return [flag for flag in validity_flags(test) if flag.touches(metric_name)]


def _flag_text(code: str, detail: Any) -> str:
    words = code.replace("_", " ")
    if detail is True:
        return words
    if isinstance(detail, dict):
        detail = ", ".join(f"{k} {v}" for k, v in sorted(detail.items()))
    text = f"{words}: {detail}"
    # A flag is a badge on every figure; the full detail (an engine's stderr, say) is in the DB.
    return text if len(text) <= FLAG_TEXT_LIMIT else text[: FLAG_TEXT_LIMIT - 1] + "…"


def _status_flags(test: RecordedTest) -> list[Flag]:
    if test.status == "crashed":
        return [Flag("crash", "crashed" + _crash_detail(test))]
    if test.status in ("invalid", "abandoned"):
        return [Flag(test.status, test.status)]
    return []


def _crash_detail(test: RecordedTest) -> str:
    crash = test.crash
    if crash is None:
        return ""
    parts = []
    if crash.time is not None:
        parts.append(f"at {crash.time:.1f} s")
    if crash.exit_code is not None:
        parts.append(f"exit code {crash.exit_code}")
    if crash.signal:
        parts.append(f"signal {crash.signal}")
    if crash.oom:
        parts.append("out of memory")
    return f" ({', '.join(parts)})" if parts else ""


def _measurement_flags(test: RecordedTest) -> list[Flag]:
    flags = []
    engine_cpu = median_engine_cpu(test)
    if engine_cpu is not None and engine_cpu > GENERATOR_BOUND_PERCENT:
        flags.append(Flag("generator-bound", f"generator-bound (engine CPU {engine_cpu:.0f} %)"))
    flags += _spread_flags(test) + _floor_flags(test) + _tail_floor_flags(test)
    flags += _steady_flags(test)
    flags += _kernel_timer_flags(test)
    intended = summary_number(test, "intended_rate")
    achieved = summary_number(test, "achieved_rate")
    if intended and achieved is not None and achieved < RATE_SHORTFALL_RATIO * intended:
        flags.append(
            Flag("rate-shortfall", f"achieved {achieved:,.0f}/s of intended {intended:,.0f}/s")
        )
    errors = error_count(test)
    if errors:
        noun = "error" if errors == 1 else "errors"
        text = f"{errors:,.0f} {noun}{_error_kinds(test)}"
        flags.append(Flag("errors", text, _error_figures(test, errors)))
    if test.summary is None and test.status != "crashed":
        flags.append(Flag("no-summary", "no engine summary"))
    if test.summary is not None and test.summary.get("valid") is False:
        reasons = "; ".join(map(str, test.summary.get("invalid_reasons") or [])) or "no reason"
        flags.append(Flag("engine-invalid", f"engine marked the run invalid: {reasons}"))
    return flags


# Figures of the push section that read the server's /stats (push.emitted_after_window).
STATS_FIGURES = frozenset({"after"})
# Figures that pool every cycle's delay where the engine recorded no delay per cycle
# (tests stored before engine output version 3).
POOLED_DELAY_FIGURES = DELAY_FIGURES
# What a late control call touches: the figures taken over the whole load, which the cycles
# emitted after the intended stop are part of. The in-window figures (subscribers admitted,
# completeness, delivered to nobody) leave those cycles out, and "after" is their measure.
CONTROL_LATE_FIGURES = POOLED_DELAY_FIGURES | {
    "cpu",
    "rss",
    "memory",
    "errors",
    "lost",
    "duplicated",
    "reordered",
}


def _push_flags(test: RecordedTest) -> list[Flag]:
    """A late control call or a cycle past the emitters' stop (control-late); an unreadable
    /stats, only on the figures that read it; delays pooled over the ramp's cycles too."""
    if not push.is_push(test):
        return []
    flags = []
    pooled = not push.has_cycle_records(test)
    late = push.control_late_ms(test)
    # A call late only by the server's own fan-out is a finding (report.findings), not a flag.
    if late is not None and not push.late_within_fan_out(test):
        # Delays from the window's own cycles leave the late cycles out, as completeness does.
        touched = CONTROL_LATE_FIGURES - (frozenset() if pooled else POOLED_DELAY_FIGURES)
        flags.append(Flag("control-late", _late_text(test, late), touched))
    unreadable = test.validity.get("stats_unreadable")
    if unreadable:
        text = _flag_text("stats_unreadable", unreadable)
        flags.append(Flag("stats-unreadable", text, STATS_FIGURES))
    if pooled and push.window_ms(test) is not None and (test.summary or {}).get("event_delay_us"):
        text = "delivery delays pooled over every cycle, the ramp's too (no per-cycle delay)"
        flags.append(Flag("delay-includes-ramp", text, POOLED_DELAY_FIGURES))
    return flags + _drain_flags(test)


def _drain_flags(test: RecordedTest) -> list[Flag]:
    """Push engine-floor: an in-window cycle's drain time at the engine (the longest any of
    its deliveries waited in the kernel before the engine read it) above ``TAIL_FLOOR_SHARE``
    of a delay percentile shown. It touches the delays it exceeds the share of: delay_p50
    alone, or delay_p50 and delay_p99 (p99 is never below p50)."""
    worst = push.worst_drain_us(test)
    if worst is None:
        return []
    cycle, drain = worst
    shown = {name: push.delay_us(test, name) for name in ("p50", "p99")}
    touched = {
        name: value
        for name, value in shown.items()
        if value is not None and drain > TAIL_FLOOR_SHARE * value
    }
    if not touched:
        return []
    over = " and ".join(f"{name} ({value / 1000:,.1f} ms)" for name, value in touched.items())
    figures = frozenset(f"delay_{name}" for name in touched)
    text = (
        f"engine drain time of cycle {cycle.seq} {drain / 1000:,.1f} ms is over "
        f"{TAIL_FLOOR_SHARE:.0%} of delivery delay {over}: the delay measures the engine's "
        "reading as much as the server"
    )
    return [Flag("engine-floor", text, figures)]


def _late_text(test: RecordedTest, late_ms: float) -> str:
    parts = [
        f"{c['method']} {c['path']} answered {c['late_ms']:,.0f} ms after it was due"
        for c in push.late_calls(test)
    ]
    after = push.after_window(test)
    if after:
        parts.append(f"{len(after)} cycle(s) created after the emitters' stop")
    return f"control-late ({late_ms:,.0f} ms): " + "; ".join(parts)


def _floor_flags(test: RecordedTest) -> list[Flag]:
    """A median latency within ``FLOOR_RATIO`` times the engine's floor (``floor_us``: what
    the engine adds to one exchange by itself) measures the client as much as the server."""
    if push.is_push(test):
        return []  # push shows delivery delays, not latency_us: the drain-time rule applies
    floor = summary_number(test, "floor_us")
    p50 = summary_number(test, "latency_us", "p50")
    if not floor or p50 is None or p50 > FLOOR_RATIO * floor:
        return []
    text = f"latency p50 {p50:,.0f} µs within {FLOOR_RATIO:g}x the engine's floor ({floor:,.0f} µs)"
    return [Flag("engine-floor", text, LATENCY_FIGURES)]


def _tail_floor_flags(test: RecordedTest) -> list[Flag]:
    """The engine's own read delay (``notice_us``) at p99 above ``TAIL_FLOOR_SHARE`` of
    latency p99: the tail measures the client's reading as much as the server."""
    notice = summary_number(test, "notice_us", "p99")
    p99 = summary_number(test, "latency_us", "p99")
    if push.is_push(test):
        return []  # push: the drain-time rule applies there instead
    if not notice or not p99 or notice <= TAIL_FLOOR_SHARE * p99:
        return []
    text = (
        f"engine read delay p99 {notice:,.0f} µs is {notice / p99:.0%} of latency p99 "
        f"({p99:,.0f} µs; over {TAIL_FLOOR_SHARE:.0%} measures the engine)"
    )
    return [Flag("engine-floor", text, LATENCY_FIGURES)]


def steady_lines(test: RecordedTest) -> list[float]:
    """The rates of the measured window's complete interval lines (see steady_change)."""
    end = float(test.params.get("duration_s") or math.inf) + 0.05
    lines = [
        i.data
        for i in test.intervals
        if isinstance(i.data.get("rps"), int | float)
        and float(i.data.get("elapsed_s") or i.t or 0) <= end
    ]
    nominal = max((float(line.get("interval_s") or 0) for line in lines), default=0.0)
    return [
        float(line["rps"])
        for line in lines
        if nominal and float(line.get("interval_s") or 0) >= 0.99 * nominal
    ]


def steady_change(test: RecordedTest) -> float | None:
    """The relative change of the request rate from the first to the second half of the
    measured window, over complete interval lines only (the last line of a run is usually
    cut short, and a short line's rate is noise); None with fewer than two lines. Lines
    that end after the planned duration are left out: they are the engine waiting for its
    last exchanges (a SYN retransmitted after an accept queue overflowed, say), not load."""
    complete = steady_lines(test)
    half = len(complete) // 2
    if half == 0:
        return None
    # An odd count leaves the middle line out, so both halves have the same length.
    first, second = complete[:half], complete[-half:]
    before = sum(first) / half
    return (sum(second) / half - before) / before if before else None


def _steady_flags(test: RecordedTest) -> list[Flag]:
    if push.is_push(test) or test.params.get("emit_interval_ms"):
        return []  # push tests: their rate is the plan's emits, not a request rate
    flags = _warmup_flags(test)
    change = steady_change(test)
    if change is None:
        return flags + _too_short_flags(test)
    if abs(change) <= STEADY_TOLERANCE:
        return flags
    text = f"not steady: request rate {change:+.1%} from the first to the second half"
    return [*flags, Flag("not-steady", text, STEADY_FIGURES)]


def _too_short_flags(test: RecordedTest) -> list[Flag]:
    """The steady check is never skipped: a measured window with fewer than two complete
    interval lines cannot show a steady rate, and says so."""
    complete = len(steady_lines(test))
    if test.summary is None or complete >= 2:
        return []  # no load measured (no-summary says so), or no answer at all (errors)
    lines = f"{complete} complete interval line{'s' * (complete != 1)}"
    text = f"too short: {lines}, the steady check needs 2"
    return [Flag("too-short", text, STEADY_FIGURES)]


def _warmup_flags(test: RecordedTest) -> list[Flag]:
    """A warm-up that reached its cap with the rate still moving (run_info["warmup"])."""
    warmup = test.run_info.get("warmup")
    if not isinstance(warmup, dict) or warmup.get("steady", True):
        return []
    cap = f"{warmup.get('max_s', 0):g} s"
    text = f"not steady: the warm-up reached its {cap} cap with the rate still moving"
    return [Flag("not-steady", text, STEADY_FIGURES)]


def _kernel_timer_flags(test: RecordedTest) -> list[Flag]:
    """Latency stacked at a kernel timer (the rule: ``kernel_timers``): the exchanges waited
    on the kernel, not on the server. It touches the latency figures (a push test's delivery
    delays), and a closed loop's rate too (its clients over that latency); an open loop's
    rate is the pacer's."""
    open_loop = summary_number(test, "intended_rate")
    delays = push.is_push(test)
    latency = DELAY_FIGURES if delays else LATENCY_FIGURES
    figures = latency if open_loop else latency | {"rps"}
    noun = "deliveries" if delays else "answers"
    return [
        Flag(
            "kernel-timer",
            f"latency stacked at the {s.timer_ms:,.0f} ms {s.timer} timer: {s.share:.0%} of "
            f"{noun} between {s.low_ms:,.0f} and {s.high_ms:,.0f} ms",
            figures,
        )
        for s in stacks_of(test)
    ]


def _error_figures(test: RecordedTest, errors: float) -> frozenset[str] | None:
    """Failed attempts above ``ERROR_SHARE_LIMIT`` of all put every other figure in doubt;
    a few stay on the errors figure, which counts them and is not distrusted for it."""
    attempts = max(summary_number(test, "requests") or 0.0, errors)
    if errors > ERROR_SHARE_LIMIT * attempts:
        return frozenset(m.name for m in METRICS if m.name != "errors")
    return frozenset()


def _spread_flags(test: RecordedTest) -> list[Flag]:
    """A spread test is generator-bound if any of its generators was; its delivery delays
    are only as good as the generators' clock offsets."""
    generators = test.run_info.get("generators", [])
    flags = []
    # Each generator's CPU is over its own run: for a flood, its sending window.
    bound = [
        f"{g.get('address', '?')} at {g.get('cpu_percent', '?')} % CPU"
        for g in generators
        if g.get("generator_bound")
    ]
    if bound:
        flags.append(Flag("generator-bound", f"generator-bound ({', '.join(bound)})"))
    worst = max((g.get("uncertainty_ms") or 0 for g in generators), default=0)
    if push.is_push(test) and worst > CLOCK_UNCERTAINTY_MS:
        flags.append(
            Flag("clock-uncertain", f"delivery delays uncertain by up to {worst:.1f} ms (clocks)")
        )
    return flags


def _error_kinds(test: RecordedTest) -> str:
    errors = (test.summary or {}).get("errors")
    if not isinstance(errors, dict):
        return ""
    kinds = [f"{kind} {count:,}" for kind, count in sorted(errors.items()) if count]
    return f" ({', '.join(kinds)})" if kinds else ""
