"""Attacks beside a legitimate probe (issue 35, suites/abuse.toml): in a grouped test with a
group named `probe`, every other group but the probes (`probe-NAME`: one over another of the
server's ports) is an attack, judged by the probe whose connections go where its own do
(scheme, host and port: an attack over TLS by the probe over TLS), else by `probe`. The
probe's figures before, during and after each attack come from the probe group's own
interval lines (engine), split at the attack's start and stop; its p50/p99 are read from
the interval histograms added (never averaged), its success rate is its OK answers over the
requests it was to send (an open-loop probe's rate times the seconds; a closed loop's, its
completed attempts), its throughput its OK answers a second. The verdict: the server "holds
up" when the probe's p99 during the attack stays within 2x its baseline (before the test's
first attack, less its first second when it has more: that one holds the probe's connects)
and at least 99 % of its attempts succeed; otherwise it names what broke first, and when;
"crashed" for the attack under way when the server died and every one after it (the probe's
lines end there). Recovery: how long after the attack's stop the probe's interval lines are
back within both bounds."""

from __future__ import annotations

from dataclasses import dataclass

from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.cell import tunable_text
from serverlab.results.report.charts.chart import test_label
from serverlab.results.report.figures.hdr import added, values_at_quantiles
from serverlab.results.report.flags.validity import validity_flags

PROBE = "probe"
# The verdict's bounds (issue 35): p99 within this factor of the baseline, and this share
# of the probe's attempts answered OK.
P99_FACTOR = 2.0
LEAST_SUCCESS = 0.99
HOLDS_UP = "holds up"


@dataclass(frozen=True)
class Phase:
    """The probe over part of the test: its interval lines from `start_s` to `stop_s`."""

    start_s: float
    stop_s: float
    completed: int
    ok: int
    scheduled: float | None  # an open-loop probe's arrivals due in the phase
    p50_us: int | None
    p99_us: int | None

    @property
    def success(self) -> float | None:
        return _success(self.ok, self.completed, self.scheduled)

    @property
    def throughput(self) -> float | None:
        span = self.stop_s - self.start_s
        return self.ok / span if span > 0 else None


@dataclass(frozen=True)
class AttackRow:
    test: str
    tunables: str
    attack: str  # the group's name and its behaviour
    window: str
    baseline: str  # which window the baseline is, and how warm the server was
    before: Phase | None  # the baseline: before the test's first attack
    during: Phase | None
    after: Phase | None
    recovered: str
    verdict: str
    flags: str

    def as_dict(self) -> dict:
        phases = {"before": self.before, "during": self.during, "after": self.after}
        return {
            **{k: v for k, v in self.__dict__.items() if k not in phases},
            **{name: _phase_text(phase) for name, phase in phases.items()},
        }


@dataclass(frozen=True)
class VerdictRow:
    """One test's verdict on one attack as shipped beside it hardened (suites/abuse.toml
    runs a contestant's mitigations as a second tunable set; a test with no tunables set is
    the contestant as shipped)."""

    test: str
    attack: str
    shipped: str
    hardened: str
    hardening: str  # the tunables of the hardened run

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def verdict_rows(rows: list[AttackRow]) -> list[VerdictRow]:
    """Each (test, attack) once, its shipped verdict beside each hardened one ("-" where a
    side did not run)."""
    shipped = {(r.test, r.attack): r.verdict for r in rows if not r.tunables}
    hardened = [r for r in rows if r.tunables]
    paired = {(r.test, r.attack) for r in hardened}
    out = [
        VerdictRow(r.test, r.attack, shipped.get((r.test, r.attack), "-"), r.verdict, r.tunables)
        for r in hardened
    ]
    out += [
        VerdictRow(test, attack, verdict, "-", "no mitigation set")
        for (test, attack), verdict in shipped.items()
        if (test, attack) not in paired
    ]
    return sorted(out, key=lambda row: (row.test, row.attack))


def _phase_text(phase: Phase | None) -> dict[str, str]:
    """A phase as the report writes it: its span, p50/p99 (ms), success and throughput."""
    if phase is None:
        return {"span": "-", "p50_ms": "-", "p99_ms": "-", "success": "-", "throughput": "-"}
    success, throughput = phase.success, phase.throughput
    return {
        "span": f"{phase.start_s:g}-{phase.stop_s:g} s",
        "p50_ms": "-" if phase.p50_us is None else f"{phase.p50_us / 1000:.3g}",
        "p99_ms": "-" if phase.p99_us is None else f"{phase.p99_us / 1000:.3g}",
        "success": "-" if success is None else f"{100 * success:.1f} %",
        "throughput": "-" if throughput is None else f"{throughput:,.0f}",
    }


def attack_rows(tests: list[RecordedTest]) -> list[AttackRow]:
    return [row for test in tests for row in _rows(test)]


def _rows(test: RecordedTest) -> list[AttackRow]:
    plan = _plan(test)
    attacks = _attacks(plan)
    if PROBE not in _group_names(plan) or not attacks:
        return []
    rows = []
    for index, (name, kind, start, stop) in enumerate(attacks):
        probe_name = _probe_of(plan, name)
        rate = _probe_rate(plan, probe_name)
        lines = [(line.data.get("groups") or {}).get(probe_name) for line in test.intervals]
        probe = [_scheduled(line, rate) for line in lines if line]
        # Every probe's baseline is before the test's first attack, whatever it attacks.
        baseline = _baseline(probe, attacks[0][2])
        following = [a[2] for a in attacks[index + 1 :] if a[2] >= stop]
        end = min(following, default=float(plan.get("duration_s") or stop))
        during, after = _phase(probe, start, stop), _phase(probe, stop, end)
        rows.append(
            AttackRow(
                test=test_label(test),
                tunables=tunable_text(test),
                attack=f"{name} ({kind})",
                window=f"{start:g}-{stop:g} s",
                baseline=_baseline_text(test, baseline),
                before=baseline,
                during=during,
                after=after,
                recovered=_recovered(probe, baseline, stop, end),
                verdict=_verdict(test, probe, baseline, during, start, stop),
                flags="; ".join(flag.text for flag in validity_flags(test)),
            )
        )
    return rows


def attack_windows(test: RecordedTest) -> list[tuple[str, str, float, float]]:
    """(name, behaviour, start, stop) of each attack of a test beside a probe, by start;
    none for any other test."""
    plan = _plan(test)
    if PROBE not in _group_names(plan):
        return []
    return _attacks(plan)


def _group_names(plan: dict) -> set:
    return {g.get("name") for g in plan.get("groups") or [] if isinstance(g, dict)}


def is_probe(name: object) -> bool:
    """A probe group: `probe`, or `probe-NAME` for one over another of the server's ports
    (a probe over TLS beside the one in clear)."""
    return name == PROBE or (isinstance(name, str) and name.startswith(PROBE + "-"))


def _probe_of(plan: dict, attack: str) -> str:
    """The probe an attack is judged by: the one whose connections go where the attack's
    do (scheme, host and port), else `probe`."""
    groups = [g for g in plan.get("groups") or [] if isinstance(g, dict)]
    where = {g.get("name"): _origin(g.get("target") or plan.get("target")) for g in groups}
    same = [name for name in where if is_probe(name) and where[name] == where.get(attack)]
    return PROBE if PROBE in same or not same else same[0]


def _origin(target: object) -> str:
    """A target's scheme, host and port (its path aside)."""
    text = str(target or "")
    scheme, _, rest = text.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def _plan(test: RecordedTest) -> dict:
    """The engine plan the test ran (kept whether or not the engine wrote a summary: a
    server that crashed may have cost it one)."""
    plan = test.run_info.get("engine_plan") or (test.summary or {}).get("plan")
    return plan if isinstance(plan, dict) else {}


def _probe_rate(plan: dict, name: str) -> float | None:
    """The probe's arrivals a second when its pacer is an open loop at a fixed rate."""
    probe = next((g for g in plan.get("groups") or [] if g.get("name") == name), {})
    pacer = probe.get("pacer") or plan.get("pacer") or {}
    if pacer.get("kind") != "open" or pacer.get("ramp_to_rate") is not None:
        return None
    return float(pacer["rate"]) if isinstance(pacer.get("rate"), int | float) else None


def _scheduled(line: dict, rate: float | None) -> dict:
    """The probe's interval line with the arrivals its pacer had due in it."""
    if rate is None:
        return line
    return {**line, "scheduled": rate * float(line.get("interval_s") or 0.0)}


def _success(ok: int, completed: int, scheduled: float | None) -> float | None:
    """OK answers over the requests due (at most all of them), else over those completed:
    a probe the server stalls completes few, all of them perhaps OK."""
    if scheduled:
        return min(1.0, ok / scheduled)
    return ok / completed if completed else None


def _attacks(plan: dict) -> list[tuple[str, str, float, float]]:
    """(name, behaviour, start, stop) of every group but the probes, by start."""
    run_s = float(plan.get("duration_s") or 0.0)
    found = []
    for group in plan.get("groups") or []:
        if not isinstance(group, dict) or is_probe(group.get("name")):
            continue
        kind = (group.get("behaviour") or plan.get("behaviour") or {}).get("kind")
        start, stop = float(group.get("start_s") or 0.0), float(group.get("stop_s") or run_s)
        found.append((str(group.get("name")), str(kind), start, stop))
    return sorted(found, key=lambda attack: (attack[2], attack[0]))


def _baseline(lines: list[dict], first_attack_s: float) -> Phase | None:
    """The probe before the test's first attack, less its first interval when another
    follows it: that one holds its connections' opening (and TLS handshakes)."""
    before = _within(lines, 0.0, first_attack_s)
    start = _span(before[1])[0] if len(before) >= 2 else 0.0
    return _phase(lines, start, first_attack_s)


def _baseline_text(test: RecordedTest, baseline: Phase | None) -> str:
    """The baseline's window and the warm-up before the test (run_info["warmup"]): a
    JVM's first seconds are its JIT's, so a cold baseline is said to be one."""
    window = "-" if baseline is None else f"{baseline.start_s:g}-{baseline.stop_s:g} s"
    warmup = test.run_info.get("warmup")
    if not isinstance(warmup, dict):
        return f"{window}, cold: no warm-up before the test"
    ran = warmup.get("ran_s")
    length = "a" if ran is None else f"a {ran:g} s"
    steady = "steady" if warmup.get("steady") else "not steady at its cap"
    return f"{window}, after {length} warm-up ({steady})"


def _span(line: dict) -> tuple[float, float]:
    end = float(line.get("elapsed_s") or 0.0)
    return end - float(line.get("interval_s") or 0.0), end


def _within(lines: list[dict], start: float, stop: float) -> list[dict]:
    """The lines whose interval overlaps [start, stop): one cut by the attack's start or
    stop counts in the phase of the attack."""
    return [line for line in lines if _span(line)[1] > start and _span(line)[0] < stop]


def _phase(lines: list[dict], start: float, stop: float) -> Phase | None:
    mine = _within(lines, start, stop)
    if not mine:
        return None
    histogram = added(line["latency_histogram"] for line in mine if line.get("latency_histogram"))
    p50 = p99 = None
    if histogram is not None and histogram.get_total_count():
        p50, p99 = values_at_quantiles(histogram, [0.5, 0.99])
    return Phase(
        start_s=_span(mine[0])[0],
        stop_s=_span(mine[-1])[1],
        completed=sum(int(line.get("completed") or 0) for line in mine),
        ok=sum(int(line.get("ok") or 0) for line in mine),
        scheduled=sum(line["scheduled"] for line in mine) if "scheduled" in mine[0] else None,
        p50_us=p50,
        p99_us=p99,
    )


def _broken(line: dict, baseline: Phase) -> list[str]:
    """What of the verdict's bounds one probe interval line breaks."""
    broke = []
    p99 = line.get("latency_p99_us")
    if baseline.p99_us and p99 is not None and p99 > P99_FACTOR * baseline.p99_us:
        broke.append(f"p99 {p99 / baseline.p99_us:.1f}x its baseline")
    completed, ok = int(line.get("completed") or 0), int(line.get("ok") or 0)
    success = _success(ok, completed, line.get("scheduled"))
    if success is None or success < LEAST_SUCCESS:
        rate = "no attempt completed" if success is None else f"{100 * success:.0f} %"
        broke.append(f"success {rate}")
    return broke


def _verdict(test, lines, baseline, during, start: float, stop: float) -> str:
    # A server that crashed in a later attack was measured through this one (the probe's
    # lines go past its stop): it keeps its verdict; the attack under way and those after
    # it read "crashed".
    if test.status == "crashed" and not any(_span(line)[1] > stop for line in lines):
        at = test.crash.time if test.crash else None
        return "crashed" + (f", {at:g} s into the test" if at is not None else "")
    if baseline is None or baseline.p99_us is None:
        return "no baseline: the probe had no answer before the first attack"
    if during is None:
        return "no probe figures during the attack"
    p99_held = during.p99_us is not None and during.p99_us <= P99_FACTOR * baseline.p99_us
    if p99_held and (during.success or 0.0) >= LEAST_SUCCESS:
        return HOLDS_UP
    for line in _within(lines, start, stop):
        broke = _broken(line, baseline)
        if broke:
            return f"{' and '.join(broke)} first, at {_span(line)[1] - start:g} s into it"
    return _overall(baseline, during)


def _overall(baseline: Phase, during: Phase) -> str:
    """What broke over the whole attack, though no one interval broke it."""
    if during.p99_us is None or during.p99_us > P99_FACTOR * baseline.p99_us:
        return "p99 over the attack above 2x its baseline"
    return f"success over the attack {100 * (during.success or 0):.1f} %"


def _recovered(lines: list[dict], baseline: Phase | None, stop: float, end: float) -> str:
    """Seconds from the attack's stop to the first probe line after it from which every
    line up to `end` keeps both bounds."""
    if baseline is None or baseline.p99_us is None:
        return "-"
    after = [line for line in lines if _span(line)[1] > stop and _span(line)[0] < end]
    if not after:
        return "no figures after the attack"
    for index, line in enumerate(after):
        if not any(_broken(later, baseline) for later in after[index:]):
            return f"{max(0.0, _span(line)[0] - stop):g} s"
    return "not within the test"
