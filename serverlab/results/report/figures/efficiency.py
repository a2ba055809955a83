"""Efficiency figures of one stored test: what the server spent per unit of work, each over
a stated window and from a stated source.

- CPU per request (µs): the server tree's CPU seconds over the engine's measured window, ÷
  the requests the engine answered in it (summary ``answered``). The window runs from the
  engine's start (summary ``started_at_ms``) for the summary's ``duration_s``, which ends at
  its last counted attempt: the span ``answered`` was counted over. The CPU seconds are the
  monitor's readings of the kernel's CPU clocks (/proc/<pid>/stat, about 10 a second, each
  the mean since the one before) integrated over that span. The load window's single
  kernel figure (``server_cpu_ticks``) closes once the engine has exited, up to seconds
  later, and a JIT still compiling in that overhang is not the load's: it is used only
  where the readings do not cover the window (``server_cpu_seconds``).
- CPU per delivered event (µs), push: the same readings between the end of the ramp and
  the emitters' intended stop, ÷ the deliveries the clients received of the cycles created
  in that window (``serverlab.results.report.figures.push``). The ramp's connection set-up, and
  deliveries of a late cycle, are left out.
- Memory per held connection (KiB): what the server's user and kernel memory grew by over
  the load, per connection: (peak RSS - RSS when the load window opened + its sockets'
  kernel memory at the last socket reading) ÷ the connections established at that reading
  (kernel figures, serverlab.run.execution.monitor). Tests stored before those: (largest
  RSS sample - first sample) ÷ the plan's clients. Only where connections are held
  (keep-alive, push, slow clients): a new connection per request, or syslog over UDP, holds
  none, and the figure reads "n/a: no held connections" (``not_held``) instead of dividing
  by whichever connections the kernel caught open at its last reading.
- CPU over the load (%, ``cpu_percent_in_window``): the same CPU seconds ÷ the window.
- The CPU a test allowed its server (``allowed_cpu_percent``): 100 % per CPU it was pinned
  to, the ceiling of its CPU figure in a closed loop (``cpu_ceiling_percent``).
"""

from __future__ import annotations

import serverlab.results.report.figures.push as push
from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.engine_summary import summary_number

KIB = 1024
# Why a test has no memory per held connection: its connections carry one request each, or
# there are none (UDP).
NO_HELD_CONNECTIONS = "n/a: no held connections"


def _monitor_origin_ms(test: RecordedTest) -> float | None:
    """Where the monitor's samples start (their t = 0), in Unix ms."""
    offset = test.run_info.get("monitor_t0_s")
    return None if offset is None else (test.started_at + float(offset)) * 1000


def cpu_seconds_between(samples: list, start: float, stop: float) -> float | None:
    """CPU seconds in [start, stop] (seconds on the samples' clock): each CPU reading is
    the mean since the previous one, the first since the monitor's start (t = 0, where it
    took its first count), and counts for its share of that span inside. None where the
    readings do not cover the span."""
    read = [s.t for s in samples if s.cpu_percent is not None]
    percent = [s.cpu_percent for s in samples if s.cpu_percent is not None]
    if not read or start < 0 or read[-1] < stop:
        return None
    seconds = 0.0
    for since, until, cpu in zip([0.0, *read], read, percent, strict=False):
        inside = min(until, stop) - max(since, start)
        if inside > 0:
            seconds += cpu / 100 * inside
    return seconds


def cpu_seconds_in_ms(test: RecordedTest, start_ms: float, stop_ms: float) -> float | None:
    """The server's CPU seconds between two Unix ms instants (the monitor's readings)."""
    origin = _monitor_origin_ms(test)
    if origin is None or stop_ms <= start_ms:
        return None
    return cpu_seconds_between(test.samples, (start_ms - origin) / 1000, (stop_ms - origin) / 1000)


def measured_window_ms(test: RecordedTest) -> tuple[float, float] | None:
    """(engine start, its last counted attempt), Unix ms: the span of ``answered``."""
    started = summary_number(test, "started_at_ms")
    duration = summary_number(test, "duration_s")
    if started is None or duration is None:
        return None
    return started, started + 1000 * duration


def cpu_percent_in_window(test: RecordedTest) -> float | None:
    """The server's CPU over the engine's measured window, as % of one core."""
    window = measured_window_ms(test)
    seconds = None if window is None else cpu_seconds_in_ms(test, *window)
    return None if seconds is None else 100 * seconds / ((window[1] - window[0]) / 1000)


def server_cpu_seconds(test: RecordedTest) -> float | None:
    """The server's CPU seconds over the engine's measured window (the monitor's readings);
    where they do not cover it, the load window's kernel reading (``server_cpu_ticks``,
    which closes after the engine exits)."""
    window = measured_window_ms(test)
    seconds = None if window is None else cpu_seconds_in_ms(test, *window)
    if seconds is not None:
        return seconds
    kernel = test.run_info.get("kernel") or {}
    ticks, per_s = kernel.get("server_cpu_ticks"), kernel.get("ticks_per_s")
    return ticks / per_s if ticks is not None and per_s else None


def cpu_per_request_us(test: RecordedTest) -> float | None:
    """Server CPU µs per answered request over the measured window (module docstring);
    none for push, whose answers are events."""
    seconds, answered = server_cpu_seconds(test), summary_number(test, "answered")
    if push.is_push(test) or seconds is None or not answered:
        return None
    return seconds * 1e6 / answered


def cpu_per_event_us(test: RecordedTest) -> float | None:
    """Server CPU µs per event the clients received, over the push window (module
    docstring); None where the readings do not cover the window."""
    window = push.window_ms(test)
    received = sum(c.received for c in push.in_window(test))
    if window is None or not received:
        return None
    seconds = cpu_seconds_in_ms(test, *window)
    return None if seconds is None else seconds * 1e6 / received


def holds_connections(test: RecordedTest) -> bool:
    """Whether the test's clients hold their connections open: not a new connection per
    request (closed after its answer), nor syslog over UDP."""
    behaviour = test.params.get("behaviour")
    if behaviour == "new-connection":
        return False
    return not (behaviour == "syslog" and test.params.get("syslog_transport") == "udp")


def not_held(test: RecordedTest) -> str | None:
    """Why the test has no memory per held connection, where that is by design."""
    return None if holds_connections(test) else NO_HELD_CONNECTIONS


def memory_per_connection_kib(test: RecordedTest) -> float | None:
    """KiB of user and kernel memory per held connection (module docstring); None where
    the test holds none."""
    if not holds_connections(test):
        return None
    kernel = test.run_info.get("kernel") or {}
    last = (kernel.get("sockets") or {}).get("last") or {}
    if kernel.get("peak_rss_bytes") is not None and last.get("established"):
        user = max(0, kernel["peak_rss_bytes"] - kernel.get("rss_at_open_bytes", 0))
        return (user + last["kernel_bytes"]) / last["established"] / KIB
    rss = [s.rss_bytes for s in test.samples if s.rss_bytes]
    clients = test.params.get("clients")
    if len(rss) < 2 or not clients:
        return None
    return max(0, max(rss) - rss[0]) / clients / KIB


def allowed_cpu_percent(test: RecordedTest) -> float | None:
    """100 % per CPU the server was pinned to (its run info's ``cpus.server``: "1", "0,1",
    "2-3"); None where the test did not record it."""
    listed = (test.run_info.get("cpus") or {}).get("server")
    if not isinstance(listed, str) or not listed.strip():
        return None
    count = 0
    for part in listed.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        count += int(high) - int(low) + 1 if high else 1
    return 100.0 * count


def cpu_ceiling_percent(test: RecordedTest) -> float | None:
    """The CPU % a saturating test could reach at most: the allowed CPU of a closed-loop
    request test (each client sends its next request once answered, so the server is kept
    as busy as it can be). None for an open loop (a fixed rate: its CPU % is a measure of
    cost, not of a ceiling) and for push (the plan's emits set the work)."""
    if push.is_push(test) or summary_number(test, "intended_rate") or test.params.get("rate"):
        return None
    return allowed_cpu_percent(test)
