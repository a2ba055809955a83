"""Report stage: "What TLS and HTTP/2 cost each architecture" (issue 22), from the scenarios
of suites/tls-h2.toml, read by name. Per contestant: the highest handshake-storm rate held,
the server's CPU per full handshake beside one core's ceiling (`openssl speed`, recorded in
the run's metadata by serverlab.run.host.tlsspeed), ECDSA against RSA, resumption on against
off, the TLS tax on kept-alive requests, and the memory per held push connection with TLS
against without. Every figure is the median over a cell's repeats, with their count; a cell
without data says so, and no verdict is drawn here. Each figure carries the validity flags
of the tests it is made from that touch what it reads (a crashed or invalid repeat's too,
which gives no value), and no other test's: a flag travels with the cells that use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import plotly.graph_objects as go

from serverlab.results import stats
from serverlab.results.records import RecordedTest, Run
from serverlab.results.report.cells.cell import CellFlag, flags_touching
from serverlab.results.report.charts.chart import PALETTE, Chart, finish, flags_of
from serverlab.results.report.figures.efficiency import server_cpu_seconds
from serverlab.results.report.figures.engine_summary import summary_number
from serverlab.results.report.figures.figure import Figure, request_latency_ms
from serverlab.results.report.figures.table import (
    ENGINE_WINDOW,
    METRICS_BY_NAME,
    SUMMARIZED_STATUSES,
    error_count,
)

STORM, RESUME, TAX = "handshake-storm", "handshake-resume", "tls-tax"
PUSH_PREFIX = "push-"
H2, H1_BESIDE_H2 = "h2-multiplex", "h1-100-connections"
SCENARIOS = (STORM, RESUME, TAX, H2, H1_BESIDE_H2)
# A storm rung is held when its p99 is under this, nothing failed, and this share of the
# planned arrivals was answered (an open loop's arrivals still waiting at the end are no
# error, but they are not held either).
HELD_P99_MS = 100.0
HELD_ANSWERED = 0.95
H2_ABSENT = (
    "HTTP/2 multiplexing (1 connection x 100 streams) has no data: no HTTP/2 test ran (the "
    "dry run says why a cell was refused)"
)


@dataclass(frozen=True)
class TlsCell:
    """One table cell: its text and the flags of the tests it uses that touch it."""

    text: str
    flags: tuple[CellFlag, ...] = ()

    @property
    def codes(self) -> str:
        return " ".join(dict.fromkeys(flag.code for flag in self.flags))

    @property
    def said(self) -> str:
        """The flags as the cell prints them, a code once with its repeats: "machine-busy
        (r2)" (the full texts are in ``title``)."""
        repeats: dict[str, dict[str, None]] = {}
        for flag in self.flags:
            repeats.setdefault(flag.code, {}).update(dict.fromkeys(flag.repeats))
        return "; ".join(f"{code} ({', '.join(r)})" for code, r in repeats.items())

    @property
    def title(self) -> str:
        return "; ".join(flag.text for flag in self.flags)


Row = list[TlsCell]


@dataclass
class TlsSection:
    storm: list[Row] = field(default_factory=list)
    resume: list[Row] = field(default_factory=list)
    tax: list[Row] = field(default_factory=list)

    h2: list[Row] = field(default_factory=list)
    memory: list[Row] = field(default_factory=list)
    ceiling: str = ""
    notes: list[str] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    headings: dict[str, list[str]] = field(default_factory=lambda: _headings())


def is_tls_study(test: RecordedTest) -> bool:
    """A test of suites/tls-h2.toml's scenarios (its push tests only when they say their
    transport, so that push-modern's do not count)."""
    if test.scenario.startswith(PUSH_PREFIX):
        return "transport" in test.params
    return test.scenario in SCENARIOS


# --- figures of one test ----------------------------------------------------------------


def cpu_per_handshake_us(test: RecordedTest) -> float | None:
    """Server CPU µs per TLS handshake the engine completed (full or resumed, as the test
    ran), over the engine's measured window (efficiency.server_cpu_seconds): the whole
    server's CPU, requests included."""
    cpu, done = server_cpu_seconds(test), summary_number(test, "tls_handshakes")
    return cpu * 1e6 / done if cpu is not None and done else None


def answered_per_s(test: RecordedTest) -> float | None:
    return summary_number(test, "rps")


def resumed_share(test: RecordedTest) -> float | None:
    summary = test.summary or {}
    done = summary.get("tls_handshakes")
    return summary.get("tls_resumed", 0) / done if done else None


def held(test: RecordedTest) -> bool:
    """p99 < 100 ms, no error, and 95% of the planned arrivals answered."""
    summary, p = test.summary or {}, test.params
    planned = float(p.get("rate", 0)) * float(p.get("duration_s", 0))
    p99 = LATENCY.of(test)
    return (
        test.status in SUMMARIZED_STATUSES
        and p99 is not None
        and p99 < HELD_P99_MS
        and error_count(test) == 0
        and summary.get("answered", 0) >= HELD_ANSWERED * planned
    )


# The figures of the tables. Each is qualified by the validity flags of what it reads
# (``Figure.flagged_as``, figure names as ``metrics.METRICS`` has them): handshake and
# request counts are the engine's, as throughput is; CPU is the kernel's; memory is RSS and
# sockets'.
ENGINE_COUNTS = frozenset({"rps"})
ANSWERED = Figure(
    "answered",
    "answered per second",
    "",
    True,
    answered_per_s,
    window=ENGINE_WINDOW,
    source="engine",
    flagged_as=ENGINE_COUNTS,
    heading="answered/s",
)
RESUMED = Figure(
    "resumed",
    "resumed share of the handshakes",
    "",
    True,
    resumed_share,
    window=ENGINE_WINDOW,
    source="engine",
    flagged_as=ENGINE_COUNTS,
    heading="resumed share",
)
LATENCY = METRICS_BY_NAME["p99"].view("p99", of=request_latency_ms("p99"), heading="p99 ms")
CPU_HANDSHAKE = Figure(
    "cpu_handshake",
    "server CPU per TLS handshake",
    "µs",
    False,
    cpu_per_handshake_us,
    window=METRICS_BY_NAME["cpu_req"].window,
    source="kernel CPU clocks (monitor) ÷ TLS handshakes completed (engine)",
    flagged_as=ENGINE_COUNTS | {"cpu"},
    heading="server CPU µs/handshake",
)
CPU_REQUEST = METRICS_BY_NAME["cpu_req"].view(
    "cpu_req", flagged_as=ENGINE_COUNTS | {"cpu"}, heading="server CPU µs/request"
)
MEMORY = METRICS_BY_NAME["memory"].view(
    "memory", flagged_as=frozenset({"rss", "sockmem", "memory"}), heading="KiB"
)
# "Held" reads a rung's rate, its latency p99 and its errors.
HELD_READS = ENGINE_COUNTS | {"p99", "errors"}
RESUME_FIGURES = (RESUMED, CPU_HANDSHAKE, ANSWERED, LATENCY)
TAX_FIGURES = (ANSWERED, CPU_REQUEST)
H2_FIGURES = (ANSWERED, LATENCY, CPU_REQUEST)


def _versus_headings(figures, sides: tuple[str, str]) -> list[str]:
    """Each figure's heading on the first side, then the second side's and their ratio."""
    first, second = sides
    cells = [[f"{f.heading} {first}", second, f"{second} ÷ {first}"] for f in figures]
    return ["contestant", *(cell for three in cells for cell in three)]


def _headings() -> dict[str, list[str]]:
    """The column headings of each table, from its figures."""
    kib = MEMORY.heading
    return {
        "storm": [
            *("contestant", "key", "held"),
            f"{ANSWERED.heading} at top rate",
            f"{LATENCY.heading} at top rate",
            CPU_HANDSHAKE.heading,
            "one core's ceiling",
        ],
        "resume": [
            "contestant",
            *(cell for f in RESUME_FIGURES for cell in (f"{f.heading} on", "off")),
        ],
        "tax": _versus_headings(TAX_FIGURES, ("clear", "TLS")),
        "h2": _versus_headings(H2_FIGURES, ("h1", "h2")),
        "memory": [
            *("behaviour", "clients", "contestant"),
            *(f"{kib} clear", f"{kib} TLS", "TLS ÷ clear", f"{kib} h2", "h2 ÷ TLS"),
        ],
    }


# --- the section ---------------------------------------------------------------------------


def tls_section(tests: list[RecordedTest], runs: list[Run]) -> TlsSection | None:
    study = [t for t in tests if is_tls_study(t)]
    if not study:
        return None
    speed = _speed(runs)
    storm = _of(study, STORM)
    section = TlsSection(
        storm=_storm_rows(storm, speed),
        resume=_pair_rows(_of(study, RESUME), "tls_resume", ("on", "off"), RESUME_FIGURES),
        tax=_tax_rows(_of(study, TAX)),
        h2=_h2_rows(_of(study, H2) + _of(study, H1_BESIDE_H2)),
        memory=_memory_rows([t for t in study if t.scenario.startswith(PUSH_PREFIX)]),
        ceiling=_ceiling_text(speed),
        charts=[_storm_chart(storm)],
    )
    if not any(t.params.get("transport") in ("h2", "h2c") for t in study):
        section.notes.append(H2_ABSENT)
    if any(len(_of(study, s)) and _repeats(_of(study, s)) == 1 for s in SCENARIOS):
        section.notes.append("Some cells ran once (one repeat): a median of one, no interval.")
    return section


def _of(tests: list[RecordedTest], scenario: str) -> list[RecordedTest]:
    """Every test of the scenario, whatever its status: only ok ones give values (``_median``)
    but the others' flags go on their cells."""
    return [t for t in tests if t.scenario == scenario]


def _repeats(tests: list[RecordedTest]) -> int:
    cells: dict[str, int] = {}
    for test in tests:
        cells[test.permutation_key] = cells.get(test.permutation_key, 0) + 1
    return min(cells.values(), default=0)


def _speed(runs: list[Run]) -> dict:
    """The openssl-speed figures of the last run that measured them."""
    measured = [r.machine.get("tls_speed") for r in runs if (r.machine or {}).get("tls_speed")]
    return measured[-1] if measured else {}


def _summarized(tests: list[RecordedTest]) -> list[RecordedTest]:
    return [t for t in tests if t.status in SUMMARIZED_STATUSES]


def _median(tests: list[RecordedTest], figure: Figure) -> TlsCell:
    """The median of the summarized tests, with every test's flags that touch what the
    figure reads: a crashed, invalid or abandoned repeat gives no value, and its flag (which
    touches every figure) says so."""
    values = [v for v in (figure.of(t) for t in _summarized(tests)) if v is not None]
    summary = stats.summarize(values)
    text = f"{summary.median:,.1f} (n={summary.n})" if summary.n else "-"
    return TlsCell(text, flags_touching(tests, figure.flag_names))


def _ceiling_text(speed: dict) -> str:
    if not speed or "error" in speed:
        return "no openssl-speed figure in the runs' metadata" + (
            f" ({speed['error']})" if speed.get("error") else ""
        )
    per_core = speed["handshakes_per_s_per_core"]
    return (
        f"one core's full-handshake ceiling (CPU {speed['cpu']}, {speed.get('version', '')}): "
        f"ECDSA P-256 {per_core['ecdsa-p256']:,.0f}/s, RSA-2048 {per_core['rsa-2048']:,.0f}/s "
        f"(one signature at {speed['sign_per_s']['ecdsa-p256']:,.0f} and "
        f"{speed['sign_per_s']['rsa-2048']:,.0f} signs/s, plus one X25519 at "
        f"{speed['x25519_per_s']:,.0f}/s; source: {speed['source']})"
    )


def _storm_rows(tests: list[RecordedTest], speed: dict) -> list[Row]:
    """Per contestant and key type: the highest rate held in every repeat, the server's
    CPU per full handshake at the highest rung run, and the ceiling's CPU per handshake."""
    rows = []
    per_core = speed.get("handshakes_per_s_per_core", {})
    for (contestant, key), cell in sorted(_group(tests, "tls_key").items()):
        rungs = _group(cell, "rate", by_contestant=False)
        at_top = rungs[(None, max(rate for _, rate in rungs))]
        limit = per_core.get(key)
        rows.append(
            [
                TlsCell(contestant),
                TlsCell(key),
                _held(cell, rungs),
                _median(at_top, ANSWERED),
                _median(at_top, LATENCY),
                _median(at_top, CPU_HANDSHAKE),
                TlsCell(f"{1e6 / limit:,.0f} µs ({limit:,.0f}/s)" if limit else "-"),
            ]
        )
    return rows


def _held(cell: list[RecordedTest], rungs: dict[tuple, list[RecordedTest]]) -> TlsCell:
    """The highest rate held in every repeat: it reads every rung's tests, so it carries
    their flags (a crashed repeat holds nothing)."""
    held_rates = [rate for (_, rate), mine in rungs.items() if all(held(t) for t in mine)]
    text = f"{max(held_rates):,}/s" if held_rates else f"none of {sorted(r for _, r in rungs)}"
    return TlsCell(text, flags_touching(cell, HELD_READS))


def _pair_rows(tests, key: str, sides: tuple[str, str], figures) -> list[Row]:
    """Per contestant: each figure on one side, then the other."""
    rows = []
    for contestant in sorted({t.contestant for t in tests}):
        mine = [t for t in tests if t.contestant == contestant]
        row = [TlsCell(contestant)]
        for figure in figures:
            for side in sides:
                row.append(_median([t for t in mine if t.params.get(key) == side], figure))
        rows.append(row)
    return rows


def _tax_rows(tests: list[RecordedTest]) -> list[Row]:
    """Per contestant: answered/s and server CPU µs per request, clear and TLS, and the
    ratio of their medians TLS ÷ clear."""
    return _versus_rows(
        tests,
        lambda t: t.params["transport"],
        ("clear", "tls"),
        TAX_FIGURES,
    )


def _h2_rows(tests: list[RecordedTest]) -> list[Row]:
    """Per contestant: 100 HTTP/1.1 connections against 1 HTTP/2 connection of 100 streams
    (answered/s, p99, server CPU µs per request), and the ratio h2 ÷ h1 of each."""
    return _versus_rows(
        tests,
        lambda t: "h1" if t.scenario == H1_BESIDE_H2 else "h2",
        ("h1", "h2"),
        H2_FIGURES,
    )


def _versus_rows(tests, side_of: Callable, sides: tuple[str, str], figures) -> list[Row]:
    """Per contestant, for each figure: the median of one side, of the other, and the ratio
    of the second's median to the first's."""
    rows = []
    for contestant in sorted({t.contestant for t in tests}):
        mine = [t for t in tests if t.contestant == contestant]
        first, second = ([t for t in mine if side_of(t) == side] for side in sides)
        row = [TlsCell(contestant)]
        for figure in figures:
            row += [_median(first, figure), _median(second, figure)]
            row.append(_ratio(second, first, figure))
        rows.append(row)
    return rows


def _ratio(top: list[RecordedTest], bottom: list[RecordedTest], figure: Figure) -> TlsCell:
    """The ratio of two medians: it uses both sides' tests, so it carries both sides' flags."""
    flags = flags_touching(top + bottom, figure.flag_names)
    a = [v for v in map(figure.of, _summarized(top)) if v is not None]
    b = [v for v in map(figure.of, _summarized(bottom)) if v is not None]
    if not a or not b or stats.summarize(b).median == 0:
        return TlsCell("-", flags)
    return TlsCell(f"{stats.summarize(a).median / stats.summarize(b).median:.2f}", flags)


def _memory_rows(tests: list[RecordedTest]) -> list[Row]:
    """Per push behaviour, client count and contestant: KiB per held connection (peak RSS
    growth + socket kernel memory, per established connection), clear, TLS and h2 (a stream
    per client over TLS, as many connections: h2's own cost beside HTTP/1.1's over TLS)."""
    cells: dict[tuple, dict[str, list[RecordedTest]]] = {}
    for test in tests:
        key = (test.params["behaviour"], test.params.get("clients", 0), test.contestant)
        cells.setdefault(key, {}).setdefault(test.params["transport"], []).append(test)
    rows = []
    for (behaviour, clients, contestant), sides in sorted(cells.items()):
        clear, tls, h2 = (sides.get(side, []) for side in ("clear", "tls", "h2"))
        rows.append(
            [
                TlsCell(behaviour),
                TlsCell(f"{clients:,}"),
                TlsCell(contestant),
                _median(clear, MEMORY),
                _median(tls, MEMORY),
                _ratio(tls, clear, MEMORY),
                _median(h2, MEMORY),
                _ratio(h2, tls, MEMORY),
            ]
        )
    return rows


def _group(tests, key: str, by_contestant: bool = True) -> dict[tuple, list[RecordedTest]]:
    groups: dict[tuple, list[RecordedTest]] = {}
    for test in tests:
        who = test.contestant if by_contestant else None
        groups.setdefault((who, test.params.get(key)), []).append(test)
    return groups


def _storm_chart(tests: list[RecordedTest]) -> Chart:
    """Answered handshakes per second against the offered rate, a line per contestant and
    key type: where a line leaves the diagonal, the server stopped keeping up."""
    fig = go.Figure()
    for index, ((contestant, key), cell) in enumerate(sorted(_group(tests, "tls_key").items())):
        # Only summarized repeats are drawn; the others' flags are listed beside the chart.
        rungs = sorted(_group(_summarized(cell), "rate", by_contestant=False).items())
        if not rungs:
            continue
        xs = [rate for (_, rate), _ in rungs]
        ys = [stats.summarize([answered_per_s(t) or 0 for t in mine]).median for _, mine in rungs]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=f"{contestant} ({key})",
                mode="lines+markers",
                line={"color": PALETTE[index % len(PALETTE)]},
            )
        )
    chart = Chart(
        "tls-storm",
        "handshake storm: answered per second by offered rate",
        "Engine: answered requests per second (each a new TLS connection, resumption off) over "
        "its measured run, median of the repeats, against the open loop's offered rate.",
        flags=flags_of(tests),
    )
    return finish(chart, fig, ("offered rate (new TLS connections/s)", "answered/s"), "no storm")
