"""The gRPC section (issue 36): which architecture serves gRPC best, from the tests of
suites/grpc.toml, read by behaviour, not by scenario name.

Per contestant:
- unary calls/s: the knee of its `grpc-unary` capacity searches (the highest offered rate
  sustained in every repeat below any that was not, serverlab.base.capacity.knee; each
  search's curve is in the capacity section), where one ran;
- per unary load (transport and offered rate): answered calls/s, the server's CPU per call
  (kernel CPU of the server tree over the engine's measured run ÷ calls answered), p50 and
  p99 (engine, from each arrival's intended send time);
- the same figures of GET /perf at the same offered rate on the same server, over HTTP/1.1
  and h2, cleartext and TLS (kept-alive open-loop tests of that contestant and rate): what
  gRPC's framing and protobuf cost beside plain requests; gRPC over h2c beside gRPC over TLS;
- per held `Subscribe` load (transport and subscribers): memory per held stream (peak RSS
  gained plus socket memory ÷ established connections, one stream to a connection), CPU per
  delivered event, and delivery delay p50 and p99 per cycle over the push window.
Each figure is the median over a cell's repeats, with its interval and n, its window and
source in the table's heading, and the codes of the flags of its tests that touch it.

Verdicts: each load is a family of its own (as a scenario is in the "at a glance" block):
every pair of contestants is judged on its headline figures (unary: CPU per call and p99;
streams: memory per held stream and delay p99) by serverlab.results.report.cells.verdicts
(no verdict on a flagged repeat, too few repeats said as such, Holm-Bonferroni within the
family). A contestant "serves best" on a figure only where it is supported better than every
other contestant of that load; otherwise the section says why not, pair by pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

from serverlab.base import capacity
from serverlab.results import stats
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.cell import Cell, make_cell
from serverlab.results.report.cells.verdicts import Judgement, by_effect, judge
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.table import METRICS_BY_NAME, SUMMARIZED_STATUSES
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.sections.capacity import is_capacity_search
from serverlab.results.report.sections.glance import sentence, why_not

UNARY, STREAM = "grpc-unary", "grpc-stream"
BESIDE = "keepalive"  # GET /perf on kept-alive connections, the requests gRPC stands beside
UNARY_FIGURES = tuple(METRICS_BY_NAME[name] for name in ("rps", "cpu_req", "p50", "p99"))
STREAM_FIGURES = tuple(
    METRICS_BY_NAME[name] for name in ("memory", "cpu_event", "delay_p50", "delay_p99")
)
UNARY_HEADLINE = ("cpu_req", "p99")
STREAM_HEADLINE = ("memory", "delay_p99")
# How each load's protocol and transport are named in the tables.
PROTOCOLS = {UNARY: "gRPC Perf", BESIDE: "GET /perf", STREAM: "gRPC Subscribe"}
TRANSPORTS = {
    "clear": "HTTP/1.1",
    "tls": "HTTP/1.1 over TLS",
    "h2c": "h2c",
    "h2": "h2 over TLS",
}


@dataclass(frozen=True)
class GrpcCell:
    text: str
    interval: str
    codes: str  # the codes of the flags of its tests that touch it


@dataclass
class GrpcRow:
    load: str  # "5,000/s offered" or "1,000 subscribers"
    protocol: str  # "gRPC Perf over h2c", "GET /perf over HTTP/1.1"
    contestant: str
    tests: int
    cells: list[GrpcCell]

    def as_dict(self, figures: Sequence[Figure]) -> dict:
        return {
            "load": self.load,
            "protocol": self.protocol,
            "contestant": self.contestant,
            "tests": self.tests,
            **{
                f.name: {"median": c.text, "interval": c.interval, "flags": c.codes}
                for f, c in zip(figures, self.cells, strict=True)
            },
        }


@dataclass
class Family:
    """One load's verdicts between contestants."""

    name: str
    best: list[str] = field(default_factory=list)  # "on X, A serves best: ..." or why none
    sentences: list[str] = field(default_factory=list)  # every supported difference
    why_not: list[str] = field(default_factory=list)  # each headline pair without a verdict

    def as_dict(self) -> dict:
        return {
            "load": self.name,
            "best": self.best,
            "supported": self.sentences,
            "not_supported": self.why_not,
        }


@dataclass
class GrpcSection:
    knees: list[tuple[str, str, str]]  # (contestant, calls/s sustained, its flags)
    unary: list[GrpcRow]
    streams: list[GrpcRow]
    families: list[Family]
    unary_figures: tuple[Figure, ...] = UNARY_FIGURES
    stream_figures: tuple[Figure, ...] = STREAM_FIGURES

    def as_dict(self) -> dict:
        return {
            "unary_capacity": [
                {"contestant": c, "calls_per_s": text, "flags": flags}
                for c, text, flags in self.knees
            ],
            "unary": [row.as_dict(self.unary_figures) for row in self.unary],
            "streams": [row.as_dict(self.stream_figures) for row in self.streams],
            "figures": {
                f.name: {"label": f.label, "unit": f.unit, "window": f.window, "source": f.source}
                for f in (*self.unary_figures, *self.stream_figures)
            },
            "verdicts": [family.as_dict() for family in self.families],
        }


def grpc_section(tests: list[RecordedTest], alpha: float = stats.DEFAULT_ALPHA):
    """The section, or None when no gRPC test was recorded."""
    grpc = [t for t in tests if str(t.params.get("behaviour", "")).startswith("grpc-")]
    if not grpc:
        return None
    searches = [t for t in grpc if t.params.get("behaviour") == UNARY and is_capacity_search(t)]
    unary = [t for t in grpc if t.params.get("behaviour") == UNARY and not is_capacity_search(t)]
    streams = [t for t in grpc if t.params.get("behaviour") == STREAM]
    streams = [t for t in streams if not is_capacity_search(t)]
    unary_groups = _groups([*unary, *beside(unary, tests)], _unary_load)
    stream_groups = _groups(streams, _stream_load)
    unary_cells = {key: _cells(group, UNARY_FIGURES) for key, group in unary_groups.items()}
    stream_cells = {key: _cells(group, STREAM_FIGURES) for key, group in stream_groups.items()}
    return GrpcSection(
        knees=knees(searches),
        unary=[_row(key, group, unary_cells[key]) for key, group in unary_groups.items()],
        streams=[_row(key, group, stream_cells[key]) for key, group in stream_groups.items()],
        families=[
            *_families(unary_cells, UNARY_HEADLINE, UNARY, alpha),
            *_families(stream_cells, STREAM_HEADLINE, STREAM, alpha),
        ],
    )


def beside(unary: list[RecordedTest], tests: list[RecordedTest]) -> list[RecordedTest]:
    """The GET /perf tests at the offered rate of a gRPC unary test of the same contestant
    in the same run, open loop on kept-alive connections."""
    rates = {(t.run_id, t.contestant, t.params.get("rate")) for t in unary}
    return [
        t
        for t in tests
        if t.params.get("behaviour") == BESIDE
        and t.params.get("pacer") == "open"
        and not is_capacity_search(t)
        and (t.run_id, t.contestant, t.params.get("rate")) in rates
    ]


# --- loads and their cells ----------------------------------------------------------------


def _transport(test: RecordedTest) -> str:
    return TRANSPORTS.get(str(test.params.get("transport", "clear")), "")


def _unary_load(test: RecordedTest) -> tuple:
    """(offered rate, protocol: gRPC first, then /perf, each cleartext first)."""
    behaviour = test.params["behaviour"]
    transport = str(test.params.get("transport", "clear"))
    order = (behaviour != UNARY, list(TRANSPORTS).index(transport))
    return (
        float(test.params.get("rate", 0)),
        order,
        f"{PROTOCOLS[behaviour]} over {_transport(test)}",
    )


def _stream_load(test: RecordedTest) -> tuple:
    transport = str(test.params.get("transport", "h2c"))
    return (
        int(test.params.get("clients", 0)),
        (False, list(TRANSPORTS).index(transport)),
        f"{PROTOCOLS[STREAM]} over {_transport(test)}",
    )


def _groups(tests: list[RecordedTest], load) -> dict[tuple, list[RecordedTest]]:
    """Tests by (load, contestant), loads in order and contestants in the order they ran."""
    groups: dict[tuple, list[RecordedTest]] = {}
    for test in tests:
        groups.setdefault((*load(test), test.contestant), []).append(test)
    return {key: groups[key] for key in sorted(groups, key=lambda key: key[:3])}


def _cells(tests: list[RecordedTest], figures: Sequence[Figure]) -> list[Cell]:
    key = tests[0].permutation_key
    return [make_cell(tests, figure, tests[0].scenario, key) for figure in figures]


def _load_text(key: tuple, behaviour: str) -> str:
    level = key[0]
    return f"{level:,.0f} subscribers" if behaviour == STREAM else f"{level:,.0f}/s offered"


def _row(key: tuple, tests: list[RecordedTest], cells: list[Cell]) -> GrpcRow:
    behaviour = STREAM if tests[0].params.get("behaviour") == STREAM else UNARY
    return GrpcRow(
        load=_load_text(key, behaviour),
        protocol=key[2],
        contestant=key[3],
        tests=len(tests),
        cells=[_cell(cell) for cell in cells],
    )


def _cell(cell: Cell) -> GrpcCell:
    text, interval = cell.text()
    codes = " ".join(dict.fromkeys(flag.code for flag in cell.flags))
    return GrpcCell(text, interval, codes)


# --- verdicts -----------------------------------------------------------------------------


def _families(
    cells: dict[tuple, list[Cell]], headline: tuple[str, ...], behaviour: str, alpha: float
) -> list[Family]:
    """One family per gRPC load (its protocol is gRPC's): every pair of contestants."""
    loads: dict[tuple, list[list[Cell]]] = {}
    for key, row in cells.items():
        if key[2].startswith(PROTOCOLS[behaviour]):
            loads.setdefault(key[:3], []).append(row)
    return [
        _family(f"{_load_text(load, behaviour)}, {load[2]}", rows, headline, alpha)
        for load, rows in loads.items()
    ]


def _family(name: str, rows: list[list[Cell]], headline, alpha: float) -> Family:
    family = Family(name)
    if len(rows) < 2:
        family.best = [f"No verdict: only {rows[0][0].contestant} ran this load."]
        return family
    pairs = [
        (a, b)
        for column in zip(*rows, strict=True)
        if column[0].metric.name in headline
        for a, b in combinations([c for c in column if c.summary.n], 2)
    ]
    judgements = by_effect(judge(pairs, alpha))
    family.sentences = [sentence(j) for j in judgements if j.supported]
    family.why_not = [why_not(j) for j in judgements if not j.supported]
    contestants = [row[0].contestant for row in rows]
    family.best = [_best(name, judgements, contestants) for name in headline]
    return family


def _best(metric: str, judgements: list[Judgement], contestants: list[str]) -> str:
    """The contestant supported better than every other on one figure, or why none is."""
    mine = [j for j in judgements if j.metric.name == metric]
    label = METRICS_BY_NAME[metric].label
    for contestant in contestants:
        beaten = {_loser(j) for j in mine if j.supported and _winner(j) == contestant}
        if len(beaten) == len(contestants) - 1:
            return f"{label}: {contestant} serves best (supported against each of the others)."
    supported = sum(j.supported for j in mine)
    return (
        f"{label}: no architecture is supported as best ({supported} of {len(mine)} pairs "
        "with a supported verdict; the others say why below)."
    )


def _winner(judgement: Judgement) -> str:
    better = judgement.verdict is stats.Verdict.BETTER
    return (judgement.a if better else judgement.b).contestant


def _loser(judgement: Judgement) -> str:
    better = judgement.verdict is stats.Verdict.BETTER
    return (judgement.b if better else judgement.a).contestant


# --- unary capacity -----------------------------------------------------------------------


def knees(searches: list[RecordedTest]) -> list[tuple[str, str, str]]:
    """Per contestant, the calls/s its searches sustained: the knee of all their steps (a
    step counts as sustained only in a search that ended well)."""
    steps: dict[str, list[capacity.StepResult]] = {}
    tops: dict[str, float] = {}
    flags: dict[str, list[str]] = {}
    for test in searches:
        ok = test.status in SUMMARIZED_STATUSES
        found = test.run_info["capacity"]
        steps.setdefault(test.contestant, []).extend(
            capacity.StepResult(s["level"], ok and s["sustained"], s["reason"])
            for s in found["steps"]
        )
        tops[test.contestant] = max(tops.get(test.contestant, 0.0), float(found["maximum"]))
        mine = flags.setdefault(test.contestant, [])
        mine += [f"r{test.repeat_index + 1} {flag.code}" for flag in validity_flags(test)]
    return [(name, _knee_text(steps[name], tops[name]), ", ".join(flags[name])) for name in steps]


def _knee_text(steps: list[capacity.StepResult], top: float) -> str:
    found = capacity.knee(steps)
    if found is None:
        first = min(steps, key=lambda s: s.level)
        return f"< {first.level:,.0f}/s (none sustained)"
    if found >= top:
        return f"≥ {found:,.0f}/s (the search's maximum)"
    return f"{found:,.0f}/s"
