"""A push test's figures over its window (report stage): the emit cycles whose `created`
falls between the end of the ramp and the emitters' intended stop, as the executor stored
them (`run_info["emit_window"]`, Unix ms on the server's clock), and nothing else.

A cycle emitted after the window (a clear the server served late) reached clients the plan
no longer measured: its deliveries are reported apart, as "emitted after the window", never
as throughput or as deliveries to nobody. Per-second counts of a push test are a property
of its plan (cycles x subscribers / window), not of the server, so none is a headline.

Delivery delay percentiles come from the in-window cycles' own delay histograms (engine
output version 3), added together: exactly the percentiles of those deliveries, the ramp's
cycle left out. Tests stored before have only the engine's pool of every cycle.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hdrh.histogram import HdrHistogram

import serverlab.results.report.figures.hdr as hdr
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.results.records import EmitCycle, EmitRecord, RecordedTest
from serverlab.results.report.figures.engine_summary import summary_number

# A timed control call answered this much after it was due, or a cycle created this much after
# the emitters' intended stop, flags the test control-late.
LATE_MS = 100.0
# The server's own count of deliveries, per transport (spec §5, §10, §11).
DELIVERY_COUNTERS = {
    "longpoll": ("responses", "push"),
    "comet": ("responses", "push"),
    "sse": ("sse", "deliveries"),
    "websocket": ("websocket", "deliveries"),
}


# One emit cycle as the report reads it: the engine's record of the cycle or, for a test stored
# before the engine recorded cycles, the first of the cycle's sampled place rows, which
# carries its counts (event, seq, created, received, total) and nothing it measured.
Cycle = EmitCycle | EmitRecord


def measured(cycle: Cycle) -> EmitCycle | None:
    """The engine's record of what the clients measured of the cycle, when stored."""
    return cycle if isinstance(cycle, EmitCycle) else None


def is_push(test: RecordedTest) -> bool:
    return test.params.get("behaviour") in PUSH_BEHAVIOURS


def has_cycle_records(test: RecordedTest) -> bool:
    """Whether the engine recorded each cycle's delays (output version 3 on)."""
    return bool(test.cycles)


def cycles(test: RecordedTest) -> list[Cycle]:
    """One per (event, seq): the engine's per-cycle records, or for older tests the stored
    rows (one row per sampled place)."""
    if test.cycles:
        return sorted(test.cycles, key=lambda c: (c.created_ms, c.event, c.seq))
    seen: dict[tuple[str, int], Cycle] = {}
    for row in test.emits:
        if row.created_ms is None:
            continue
        key = (row.event, row.seq)
        if key not in seen:
            seen[key] = replace(row, received=row.received if row.received is not None else 0)
    return sorted(seen.values(), key=lambda c: (c.created_ms, c.event, c.seq))


def window_ms(test: RecordedTest) -> tuple[float, float] | None:
    """(end of the ramp, the emitters' intended stop), Unix ms on the server's clock."""
    window = test.run_info.get("emit_window") or {}
    if "start_ms" not in window or "stop_ms" not in window:
        return None
    return float(window["start_ms"]), float(window["stop_ms"])


def in_window(test: RecordedTest) -> list[Cycle]:
    window = window_ms(test)
    if window is None:
        return []
    return [c for c in cycles(test) if window[0] <= c.created_ms <= window[1]]


def measured_in_window(test: RecordedTest) -> list[EmitCycle]:
    """The engine's records of the in-window cycles (none for a test stored before them)."""
    return [r for r in map(measured, in_window(test)) if r is not None]


def window_delays(test: RecordedTest) -> HdrHistogram | None:
    """The in-window cycles' delivery delays (µs) added into one histogram; None for a test
    without per-cycle records (its delays are only the engine's pool over every cycle)."""
    if not has_cycle_records(test) or window_ms(test) is None:
        return None
    return hdr.added(r.delay_histogram for r in measured_in_window(test))


def delay_us(test: RecordedTest, percentile: str) -> float | None:
    """Delivery delay at ``percentile`` ("p50", "p99"), in µs: over the in-window cycles
    where the engine recorded them, else the engine's pool over every cycle."""
    window = window_delays(test)
    if window is not None:
        if window.get_total_count() == 0:
            return None
        quantile = float(percentile[1:]) / 100
        return float(hdr.values_at_quantiles(window, [quantile])[0])
    if has_cycle_records(test) and window_ms(test) is not None:
        return None
    return summary_number(test, "event_delay_us", percentile)


def cycle_delay_us(cycle: Cycle, percentiles: list[float]) -> list[int] | None:
    """One cycle's delay at ascending quantiles (µs); None without its record."""
    record = measured(cycle)
    if record is None or record.received == 0:
        return None
    return hdr.values_at_quantiles(hdr.decode(record.delay_histogram), percentiles)


def worst_drain_us(test: RecordedTest) -> tuple[EmitCycle, int] | None:
    """The in-window cycle whose drain at the engine was longest, and that drain (µs)."""
    drains = [(r, r.drain_us) for r in measured_in_window(test) if r.drain_us is not None]
    return max(drains, key=lambda pair: pair[1], default=None)


def resubscribe_gap_us(test: RecordedTest, percentile: str) -> float | None:
    """Long poll: from an answer's arrival to the next poll (engine, µs), over the test."""
    gap = (test.summary or {}).get("resubscribe_gap_us") or {}
    if test.params.get("behaviour") != "longpoll" or not gap.get("count"):
        return None
    value = gap.get(percentile)
    return float(value) if isinstance(value, int | float) else None


def after_window(test: RecordedTest) -> list[Cycle]:
    """Cycles created after the emitters' intended stop (a late clear's)."""
    window = window_ms(test)
    return [] if window is None else [c for c in cycles(test) if c.created_ms > window[1]]


def admitted(test: RecordedTest) -> int | None:
    """Subscribers connected at the end of the ramp: the engine's open connections in its
    first interval line at or after the ramp's end."""
    ramp = float(test.params.get("ramp_up_s", 0))
    for interval in sorted(test.intervals, key=lambda i: i.t):
        if interval.t >= ramp and isinstance(interval.data.get("open_connections"), int):
            return int(interval.data["open_connections"])
    return None


def completeness(test: RecordedTest) -> list[tuple[Cycle, float]]:
    """Per in-window cycle, the plan's subscribers it reached: deliveries received / the
    clients the plan holds. Not / the subscribers open at the end of the ramp: that count is
    one instant of the engine's (999 while a client reconnected), and a cycle a moment later
    reaches all 1,000. A cycle's deliveries past one per client are duplicates, counted as
    such (events duplicated), so no cycle reads above 100 %."""
    clients = int(test.params.get("clients") or 0)
    if not clients:
        return []
    return [(c, min(c.received, clients) / clients) for c in in_window(test)]


def worst_completeness_percent(test: RecordedTest) -> float | None:
    shares = [share for _, share in completeness(test)]
    return 100 * min(shares) if shares else None


def delivered_to_nobody(test: RecordedTest) -> float | None:
    """Deliveries the server made (its snapshot `total`) in cycles up to the emitters'
    intended stop that no client received; a late cycle's are reported apart."""
    window = window_ms(test)
    if window is None or not test.emits:
        return None
    kept = [c for c in cycles(test) if c.created_ms <= window[1]]
    return float(sum(max(0, c.total - c.received) for c in kept))


def server_deliveries(test: RecordedTest) -> int | None:
    """Deliveries the server counted during the test (its /stats, end minus start)."""
    path = DELIVERY_COUNTERS.get(test.params.get("behaviour", ""))
    phases = {s.phase: s.stats for s in test.server_stats}
    if path is None or "start" not in phases or "end" not in phases:
        return None
    try:
        group, key = path
        return int(phases["end"][group][key]) - int(phases["start"][group][key])
    except (KeyError, TypeError, ValueError):
        return None


def emitted_after_window(test: RecordedTest) -> float | None:
    """Deliveries the server made after the emitters' intended stop: its /stats count less
    the snapshot totals of the cycles up to the stop (those no client saw included)."""
    window, counted = window_ms(test), server_deliveries(test)
    if window is None or counted is None:
        return None
    before = sum(c.total for c in cycles(test) if c.created_ms <= window[1])
    return float(max(0, counted - before))


def plan_events_per_s(test: RecordedTest) -> float | None:
    """In-window cycles x subscribers admitted / the window: what the plan asks for, not
    what the server achieved."""
    window, subscribers = window_ms(test), admitted(test)
    if window is None or not subscribers or window[1] <= window[0]:
        return None
    return len(in_window(test)) * subscribers / ((window[1] - window[0]) / 1000)


def late_calls(test: RecordedTest) -> list[dict[str, Any]]:
    """Timed calls (the plan gave them a due time) answered more than LATE_MS after it."""
    calls = test.run_info.get("control_calls") or []
    return [c for c in calls if c.get("made", 1) and (c.get("late_ms") or 0) > LATE_MS]


def control_late_ms(test: RecordedTest) -> float | None:
    """How late the server was: its latest-answered timed call, or its latest cycle past the
    emitters' intended stop, past LATE_MS; None when neither."""
    lateness = [float(c["late_ms"]) for c in late_calls(test)]
    window = window_ms(test)
    if window is not None:
        lateness += [c.created_ms - window[1] for c in after_window(test)]
    worst = max(lateness, default=0.0)
    return worst if worst > LATE_MS else None


def registered(test: RecordedTest) -> int | None:
    """Subscribers the server held when the window began: its snapshot total of the first
    cycle created at or after the end of the ramp (what it delivered that cycle to)."""
    first = in_window(test)[:1]
    return first[0].total if first else None


def fan_out_ms(test: RecordedTest) -> float | None:
    """The server's longest in-window fan-out: from a cycle's created stamp to the arrival
    of its last delivery at the clients (server's clock), in ms; None without the engine's
    per-cycle records."""
    spans = [r.last_arrival_ms - r.created_ms for r in measured_in_window(test) if r.received]
    return max(spans, default=None)


def cycles_after_stop(test: RecordedTest) -> int:
    """Cycles the server created after the emitters' intended stop: those a client received
    and, where its /stats was read after the load, the sequence numbers it reached beyond
    the last cycle created up to the stop (cycles no client saw any more); the larger."""
    window = window_ms(test)
    if window is None:
        return 0
    seen = len(after_window(test))
    end = next((s.stats for s in test.server_stats if s.phase == "end"), None)
    events = end.get("events") if isinstance(end, dict) else None
    if not isinstance(events, dict):
        return seen
    last_before: dict[str, int] = {}
    for c in cycles(test):
        if c.created_ms <= window[1]:
            last_before[c.event] = max(c.seq, last_before.get(c.event, 0))
    beyond = sum(
        max(0, int(events.get(name, {}).get("last_seq") or 0) - seq)
        for name, seq in last_before.items()
        if isinstance(events.get(name), dict)
    )
    return max(seen, beyond)


def late_within_fan_out(test: RecordedTest) -> bool:
    """Whether the test's late timed calls are the server's own fan-out: each answered no
    later than its longest in-window fan-out took, and no cycle created after the stop.
    Such a call was queued behind the deliveries being measured: that is a finding about
    the server, and nothing the plan did not ask for entered the load's figures."""
    calls, fan_out = late_calls(test), fan_out_ms(test)
    if not calls or fan_out is None or cycles_after_stop(test):
        return False
    return all(float(c["late_ms"]) <= fan_out for c in calls)
