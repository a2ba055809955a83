"""The report's figures of one stored test (``METRICS``: the summary's, `--json`'s, the
HTML's, compare's and the at-a-glance block's), each a ``Figure`` row with its accessor."""

from __future__ import annotations

import statistics

import serverlab.results.report.figures.efficiency as efficiency
import serverlab.results.report.figures.push as push
from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.engine_summary import summary_number
from serverlab.results.report.figures.figure import (
    PUSH,
    REQUESTS,
    Accessor,
    Figure,
    request_latency_ms,
)

MIB = 1024 * 1024
# Only these tests count towards medians; the others are shown, flagged, but not summarized.
SUMMARIZED_STATUSES = ("ok",)


def _is_stream(test: RecordedTest) -> bool:
    """A push test (long poll, comet, SSE, WebSocket): its answers are events, and a poll's
    answer time is mostly its wait for the next emit, not the server's speed."""
    return push.is_push(test)


def throughput(test: RecordedTest) -> float | None:
    """Requests per second; none for a push test, whose events per second are the plan's
    cycles x subscribers (see push.plan_events_per_s), not a property of the server."""
    return None if _is_stream(test) else summary_number(test, "rps")


def _latency_ms(percentile: str) -> Accessor:
    """Request latency; none for a push test, whose answers are events: a poll's answer
    time is mostly its wait for the next emit (delivery delay is its figure)."""
    requests = request_latency_ms(percentile)

    def of(test: RecordedTest) -> float | None:
        return None if _is_stream(test) else requests(test)

    return of


def delay_ms(percentile: str) -> Accessor:
    """Push delivery delay, the server's emit (its created stamp) to the event's arrival,
    over the window's cycles (push.delay_us), in ms; none for a request test."""

    def of(test: RecordedTest) -> float | None:
        micros = push.delay_us(test, percentile) if _is_stream(test) else None
        return None if micros is None else micros / 1000

    return of


def error_count(test: RecordedTest) -> float | None:
    if test.summary is None:
        return None
    errors = test.summary.get("errors", 0)
    if isinstance(errors, dict):
        return float(sum(v for v in errors.values() if isinstance(v, int | float)))
    return float(errors) if isinstance(errors, int | float) else None


def _kernel(test: RecordedTest, key: str) -> float | None:
    """A figure of the load window, read from the kernel (serverlab.run.execution.monitor)."""
    value = (test.run_info.get("kernel") or {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def mean_server_cpu(test: RecordedTest) -> float | None:
    """The server tree's CPU time over the engine's measured window, as % of a core: the
    kernel's CPU clocks as the monitor read them, from the engine's start to its last
    counted attempt (efficiency.cpu_percent_in_window), with nothing of what the server
    burns after the load. Tests stored without the engine's start fall back to the load
    window's kernel reading (which closes after the engine exits), and older ones to the
    mean of the 10 Hz samples."""
    windowed = efficiency.cpu_percent_in_window(test)
    if windowed is not None:
        return windowed
    if "kernel" in test.run_info:
        return _kernel(test, "server_cpu_percent")
    values = [s.cpu_percent for s in test.samples if s.cpu_percent is not None]
    return sum(values) / len(values) if values else None


def peak_rss_mib(test: RecordedTest) -> float | None:
    """The sum of the server processes' VmHWM over the engine's run (kernel); older tests:
    the largest 10 Hz sample."""
    if "kernel" in test.run_info:
        peak = _kernel(test, "peak_rss_bytes")
        return None if peak is None else peak / MIB
    values = [s.rss_bytes for s in test.samples if s.rss_bytes is not None]
    return max(values) / MIB if values else None


def socket_memory_mib(test: RecordedTest) -> float | None:
    """Kernel memory of the server's own sockets, last read before the engine stopped. A
    reading the monitor could only take after the stop (`after_engine_stop`: its sampler
    was starved through the window) is kept with the test but is not this figure: most of
    the load's connections had closed by then."""
    sockets = (test.run_info.get("kernel") or {}).get("sockets") or {}
    last = sockets.get("last") or {}
    if last.get("after_engine_stop"):
        return None
    value = last.get("kernel_bytes")
    return value / MIB if isinstance(value, int) else None


def median_engine_cpu(test: RecordedTest) -> float | None:
    """The generator's typical CPU (median, as the runner's own flag uses): a short peak at
    start-up does not make a whole test generator-bound. A spinning engine burns CPU by
    choice: the share its summary says it spent spinning is taken out of every sample."""
    values = [s.engine_cpu_percent for s in test.samples if s.engine_cpu_percent]
    return statistics.median(values) * _working_share(test) if values else None


def _working_share(test: RecordedTest) -> float:
    """The share of the engine's CPU that was work, not spinning (``spin_cpu_s`` of
    ``client_cpu_s`` in its summary); 1 when it did not spin."""
    total = summary_number(test, "client_cpu_s")
    spun = summary_number(test, "spin_cpu_s")
    if not total or not spun:
        return 1.0
    return max(0.0, 1.0 - spun / total)


FASTER = ("faster", "slower")
COMET_NOTE = (
    "For push (long poll, comet, SSE, WebSocket) there is no request latency and no throughput: "
    "delivery delay is the delay from the server's emit (its created stamp) to the event's "
    "arrival, and events per second are the plan's cycles x subscribers; the push section has "
    "each test's per-cycle figures."
)
ENGINE_WINDOW = "the engine's measured run"
LOAD_WINDOW = "from just before the engine starts to its stop"
PUSH_WINDOW = "the end of the ramp to the emitters' intended stop"
# A socket's kernel memory moves in pages (4 KiB) with each request or event sitting unread
# at the instant of the reading: a difference under 256 pages (1 MiB: a page on each of 256
# sockets) is one instant's traffic, not the server's.
SOCKET_MEMORY_MIN_DIFFERENCE_MIB = 1.0
# The window and source of a delivery delay.
DELAY_READ = {
    "window": PUSH_WINDOW,
    "source": "engine: the event's arrival less the server's created stamp",
    "applies_to": PUSH,
}
# Throughput and latency: a request test's, over the engine's run.
REQUEST_READ = {"window": ENGINE_WINDOW, "source": "engine", "applies_to": REQUESTS}
METRICS = (
    # Push rows: no throughput and no request latency, but a delivery delay (COMET_NOTE).
    Figure("rps", "throughput", "req/s", True, throughput, *FASTER, **REQUEST_READ),
    Figure("p50", "latency p50", "ms", False, _latency_ms("p50"), *FASTER, **REQUEST_READ),
    Figure("p99", "latency p99", "ms", False, _latency_ms("p99"), *FASTER, **REQUEST_READ),
    Figure("delay_p50", "delivery delay p50", "ms", False, delay_ms("p50"), *FASTER, **DELAY_READ),
    Figure("delay_p99", "delivery delay p99", "ms", False, delay_ms("p99"), *FASTER, **DELAY_READ),
    Figure("errors", "errors", "", False, error_count, window=ENGINE_WINDOW, source="engine"),
    Figure(
        "cpu",
        "server CPU over the load",
        "%",
        False,
        mean_server_cpu,
        window=ENGINE_WINDOW + ", its start to its last counted attempt",
        source="kernel CPU clocks of the server's processes (monitor, 10 Hz)",
        ceiling=efficiency.cpu_ceiling_percent,
    ),
    Figure(
        "cpu_req",
        "server CPU per request",
        "µs",
        False,
        efficiency.cpu_per_request_us,
        window=ENGINE_WINDOW + ", its start to its last counted attempt",
        source="kernel CPU clocks (monitor, 10 Hz; the load window's reading where they do "
        "not cover it) ÷ requests answered (engine)",
        applies_to=REQUESTS,
    ),
    Figure(
        "cpu_event",
        "server CPU per delivered event",
        "µs",
        False,
        efficiency.cpu_per_event_us,
        window=PUSH_WINDOW,
        source="kernel CPU clocks (monitor, 10 Hz) ÷ events received of the window's cycles",
        applies_to=PUSH,
    ),
    Figure(
        "rss",
        "server RSS peak",
        "MiB",
        False,
        peak_rss_mib,
        window=LOAD_WINDOW,
        source="kernel (VmHWM of the server's processes)",
    ),
    Figure(
        "memory",
        "server memory per held connection",
        "KiB",
        False,
        efficiency.memory_per_connection_kib,
        window=LOAD_WINDOW,
        source="kernel: peak RSS less RSS at the start, plus socket memory, ÷ established",
        absent=efficiency.not_held,
    ),
    Figure(
        "sockmem",
        "server socket memory",
        "MiB",
        False,
        socket_memory_mib,
        window="one reading, the last before the engine stopped",
        source="kernel (sock_diag of the server's sockets)",
        min_difference=SOCKET_MEMORY_MIN_DIFFERENCE_MIB,
    ),
)
METRICS_BY_NAME = {m.name: m for m in METRICS}
