"""A seed's slow-link scenarios as seed 000 wanted its scenario 2: "the server response
against the slow http request". Per contestant: the round trip the link measured when it was
made (the proof of its delay), the goodput its clients got through it, and what the server
held meanwhile (its connections, socket memory, memory and CPU), as figures of the load
window and as time series while the clients drained. Every figure is a cell (see
``cells``): a flag travels with the cells that use the flagged tests, and no other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.cell import Cell, cell_flags, metric_values
from serverlab.results.report.cells.scenarios import scenario_key, scenario_labels
from serverlab.results.report.charts.chart import Chart, cpu_points, rss_points, time_series
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import (
    ENGINE_WINDOW,
    METRICS_BY_NAME,
    MIB,
    SUMMARIZED_STATUSES,
)

DELAY_FLAG = "link_delay_unavailable"


def _link(test: RecordedTest) -> dict:
    return test.run_info.get("link") or {}


def link_rtt_ms(test: RecordedTest) -> float | None:
    """The TCP handshake's round trip across the link, measured as it was made (kernel)."""
    rtt = _link(test).get("rtt_ms")
    return float(rtt) if isinstance(rtt, int | float) else None


def goodput_mbit(test: RecordedTest) -> float | None:
    """What the clients read (engine: bytes, headers included) over its measured run."""
    summary = test.summary or {}
    read, seconds = summary.get("bytes_read"), summary.get("duration_s")
    if not isinstance(read, int | float) or not isinstance(seconds, int | float) or seconds <= 0:
        return None
    return read * 8 / seconds / 1e6


def _readings(test: RecordedTest) -> list[dict]:
    sockets = (test.run_info.get("kernel") or {}).get("sockets") or {}
    return [r for r in (sockets.get("peak"), sockets.get("last")) if isinstance(r, dict)]


def held_connections(test: RecordedTest) -> float | None:
    """The most connections established on the server's port at a kept sock_diag reading
    (the one with the most socket memory, and the last before the engine stopped)."""
    counts = [r["established"] for r in _readings(test) if isinstance(r.get("established"), int)]
    return float(max(counts)) if counts else None


def peak_socket_mib(test: RecordedTest) -> float | None:
    """The most kernel memory the server's sockets held at one reading: for a slow client,
    mostly what the server wrote and the link has not yet carried (sock_diag skmem)."""
    sizes = [r["kernel_bytes"] for r in _readings(test) if isinstance(r.get("kernel_bytes"), int)]
    return max(sizes) / MIB if sizes else None


# Each figure qualified by the flags of the stored figure it reads as (``flagged_as``): the
# goodput is a rate as throughput is, the held connections a sock_diag reading as the
# socket memory is. The round trip was measured before the test: only a whole test's flag
# (a crash, an invalid run, a link whose delay was not applied) touches it.
SOCKMEM = frozenset({"sockmem"})
SOCK_DIAG = "kernel (sock_diag of the server's sockets)"
SOCKET_READINGS = "the kept socket readings: the peak and the last before the engine stopped"
FIGURES = (
    Figure(
        "link_rtt",
        "link RTT (kernel, at setup)",
        "ms",
        False,
        link_rtt_ms,
        window="the TCP handshake across the link, as it was set up",
        source="kernel",
    ),
    Figure(
        "goodput",
        "goodput (engine)",
        "Mbit/s",
        True,
        goodput_mbit,
        window=ENGINE_WINDOW,
        source="engine (bytes read, headers included)",
        flagged_as=frozenset({"rps"}),
    ),
    Figure(
        "held",
        "held connections (kernel)",
        "",
        False,
        held_connections,
        window=SOCKET_READINGS,
        source=SOCK_DIAG,
        flagged_as=SOCKMEM,
    ),
    Figure(
        "sockpeak",
        "socket memory peak",
        "MiB",
        False,
        peak_socket_mib,
        window=SOCKET_READINGS,
        source=SOCK_DIAG,
        flagged_as=SOCKMEM,
    ),
    METRICS_BY_NAME["rss"],
    METRICS_BY_NAME["cpu"],
)


@dataclass
class SlowLinkRow:
    contestant: str
    tests: str
    cells: list[Cell]


@dataclass
class SlowLinkBlock:
    anchor: str
    scenario: str
    link: str  # the link as asked, and what applied its delay in how many tests
    delay_flag: str  # whether link_delay_unavailable fired, and on which tests
    rows: list[SlowLinkRow] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)


def is_slow_link(test: RecordedTest) -> bool:
    return bool(_link(test)) or "link" in test.params


def slow_link_blocks(anchor: str, tests: list[RecordedTest]) -> list[SlowLinkBlock]:
    """One block per scenario (and parameters) whose tests ran through a shaped link."""
    shaped = [t for t in tests if is_slow_link(t)]
    labels = scenario_labels(shaped)
    groups: dict[str, list[RecordedTest]] = {}
    for test in shaped:
        groups.setdefault(scenario_key(test), []).append(test)
    return [
        _block(f"{anchor}-slow{index}", labels[key], group)
        for index, (key, group) in enumerate(groups.items(), start=1)
    ]


def _block(anchor: str, label: str, tests: list[RecordedTest]) -> SlowLinkBlock:
    block = SlowLinkBlock(anchor, label, _link_text(tests), _delay_flag_text(tests))
    for contestant in dict.fromkeys(t.contestant for t in tests):
        mine = [t for t in tests if t.contestant == contestant]
        block.rows.append(_row(contestant, mine, label))
    block.charts = _charts(anchor, tests)
    return block


def _row(contestant: str, tests: list[RecordedTest], label: str) -> SlowLinkRow:
    used = [t for t in tests if t.status in SUMMARIZED_STATUSES]
    cells = []
    for metric in FIGURES:
        values = metric_values(used, metric)
        flags = cell_flags(used, metric)
        summary = stats.summarize(values)
        cells.append(Cell(label, contestant, contestant, "", metric, values, summary, flags))
    statuses = Counter(t.status for t in tests)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    return SlowLinkRow(contestant, counts, cells)


def _link_text(tests: list[RecordedTest]) -> str:
    asked = {
        (link.get("rate_mbit"), link.get("delay_ms"), link.get("loss_pct"))
        for link in map(_link, tests)
        if link
    }
    parts = []
    for rate, delay, loss in sorted(asked, key=str):
        text = f"rate {rate} Mbit/s, delay {delay or 0} ms one way"
        parts.append(text + (f", loss {loss} %" if loss else ""))
    by = Counter(_link(t).get("delay_by") or "nothing" for t in tests if _link(t))
    applied = ", ".join(f"{method} in {n}" for method, n in sorted(by.items()))
    asked_text = "; ".join(parts) or "no link recorded"
    return f"link asked: {asked_text}. Delay applied by: {applied or 'no test recorded'}"


def _delay_flag_text(tests: list[RecordedTest]) -> str:
    fired = [t for t in tests if t.validity.get(DELAY_FLAG)]
    if not fired:
        return f"{DELAY_FLAG}: fired on none of the {len(tests)} tests"
    names = ", ".join(f"{t.contestant} r{t.repeat_index + 1}" for t in fired)
    return f"{DELAY_FLAG}: fired on {len(fired)} of {len(tests)} tests ({names})"


def descriptor_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    samples = [s for s in test.samples if s.fds is not None]
    return [s.t for s in samples], [float(s.fds) for s in samples]


def goodput_points(test: RecordedTest) -> tuple[list[float], list[float]]:
    """Per engine interval, what the clients read in it, in Mbit/s."""
    x, y = [], []
    for interval in test.intervals:
        read, length = interval.data.get("bytes_read"), interval.data.get("interval_s")
        if isinstance(read, int | float) and isinstance(length, int | float) and length > 0:
            x.append(interval.t)
            y.append(read * 8 / length / 1e6)
    return x, y


WINDOW = "over the whole test, seconds since the monitor started"
# Each chart: key, title, y axis, its points, caption, and what an empty one lacks.
CHARTS = (
    (
        "fds",
        "Server's held connections over time: its open descriptors",
        "open descriptors",
        descriptor_points,
        "Open descriptors of the server's whole process tree (the monitor, /proc, 10 a "
        f"second), {WINDOW}: each held connection is one, as is each file it is sending, "
        "beside the listener and the server's own files.",
        "no monitor samples",
    ),
    (
        "rss",
        "Server memory (RSS) while the clients drain",
        "RSS (MiB)",
        rss_points,
        f"Resident memory of the server's whole process tree (the monitor, /proc), {WINDOW}.",
        "no monitor samples",
    ),
    (
        "cpu",
        "Server CPU while the clients drain",
        "CPU % (100 = one core)",
        cpu_points,
        f"CPU of the server's whole process tree (the monitor, /proc), {WINDOW}.",
        "no monitor samples",
    ),
    (
        "goodput",
        "Goodput through the link",
        "Mbit/s",
        goodput_points,
        "What the clients read in each engine interval (the engine, headers included), "
        "seconds since the engine started.",
        "no engine intervals",
    ),
)


def _charts(anchor: str, tests: list[RecordedTest]) -> list[Chart]:
    return [
        time_series(f"{anchor}-{key}", tests, title, axis, points, caption, empty)
        for key, title, axis, points, caption, empty in CHARTS
    ]
