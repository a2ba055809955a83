"""Findings about an architecture: what a contestant's own tests of one push scenario show
of it (what it could not do, or what held it up), stated with its figures, under the
verdicts of the "at a glance" block.

A verdict compares two contestants; a finding is one contestant against the plan it was
given. Three kinds are read from the stored tests:

- its /stats went unanswered after the load (the executor waited ``stats_unanswered_s``),
  and, where the plan held at least as many requests as its pool has request threads
  (``request_threads_held``), that every request thread was held;
- a timed control call was answered late: "waited" where it was late beyond the server's
  own fan-out (a call starved of a thread, say), "behind its own fan-out" where it was not
  (``push.late_within_fan_out``: then it is no control-late flag either);
- it registered fewer subscribers than the plan's clients by the end of the ramp: the
  median over repeats of its snapshot total of the window's first cycle under
  ``REGISTERED_SHARE`` of the clients. Not every client: a long-poll client between an
  answer and its next poll is in no snapshot, and a test whose ramp ends as a cycle starts
  has a few still connecting.

Every figure comes with the repeats it was seen in; a finding is made from the tests that
ran to the end (status ok), like the figures."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import serverlab.results.report.figures.push as push
from serverlab.base.spec import HELD_REQUESTS
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.cell import grouped, tunable_text
from serverlab.results.report.cells.scenarios import scenario_key, scenario_labels
from serverlab.results.report.figures.table import SUMMARIZED_STATUSES
from serverlab.results.report.flags.groups import repeat_ranges

REGISTERED_SHARE = 0.95
# Tests stored before the executor kept these figures apart said them in the flag's text
# only (serverlab.run.execution.executor.stats_silence); read from there, and only there.
_LEGACY_THREADS = re.compile(r"^all ([\d,]+) request threads")
_LEGACY_WAIT = re.compile(r"unanswered for ([\d.]+) s")


@dataclass(frozen=True)
class CallWait:
    """One timed control call's lateness in each repeat it was late in: (repeat, ms late,
    the repeat's longest fan-out in ms where the lateness was within it, else None)."""

    call: str  # "POST /event/clear"
    answers: tuple[tuple[int, float, float | None], ...]

    @property
    def within_fan_out(self) -> bool:
        return all(fan_out is not None for _, _, fan_out in self.answers)

    @property
    def text(self) -> str:
        waited = _duration_range([late for _, late, _ in self.answers])
        where = repeat_ranges([repeat for repeat, _, _ in self.answers])
        if self.within_fan_out:
            longest = _duration_range([max(f for _, _, f in self.answers if f is not None)])
            return (
                f"{self.call} answered {waited} late, behind its own fan-out "
                f"(up to {longest}; {where})"
            )
        return f"{self.call} waited {waited} ({where})"

    def as_dict(self) -> dict:
        return {
            "call": self.call,
            "within_fan_out": self.within_fan_out,
            "answers": [
                {"repeat": f"r{repeat + 1}", "late_ms": late, "fan_out_ms": fan_out}
                for repeat, late, fan_out in self.answers
            ],
        }


@dataclass(frozen=True)
class Finding:
    """What one contestant (and tunables) showed in one scenario's tests, figure by figure."""

    key: str  # the comparison key of its tests (scenario, parameters, contestant, tunables)
    scenario: str  # the scenario's label
    contestant: str
    tunables: str
    behaviour: str
    clients: int
    repeats: int  # the tests it is made from
    threads: int | None  # the request-thread pool the held requests filled, where known
    stats_silent: tuple[int, ...]  # repeats whose /stats went unanswered after the load
    stats_wait_s: float | None
    calls: tuple[CallWait, ...]
    registered: tuple[int, ...]  # per repeat, the subscribers of the window's first cycle

    @property
    def short_of_subscribers(self) -> bool:
        if not self.registered or not self.clients:
            return False
        return statistics.median(self.registered) < REGISTERED_SHARE * self.clients

    @property
    def starved(self) -> bool:
        """Evidence of a server out of request threads: a silent /stats, or a call that
        waited beyond its fan-out while the plan held every request thread."""
        waited = self.threads and any(not c.within_fan_out for c in self.calls)
        return bool(self.stats_silent or waited)

    @property
    def shown_calls(self) -> list[CallWait]:
        """The late calls that say something of the architecture: those behind its own
        fan-out, and those beyond it where every request thread was held (elsewhere a call
        late beyond the fan-out is a control-late flag, not a finding)."""
        return [c for c in self.calls if c.within_fan_out or self.threads]

    @property
    def parts(self) -> list[str]:
        parts = []
        if self.threads and self.starved:
            held = HELD_REQUESTS.get(self.behaviour, "held requests")
            parts.append(f"all {self.threads:,} request threads held by {self.clients:,} {held}")
        if self.stats_silent:
            wait = "" if self.stats_wait_s is None else f" for {self.stats_wait_s:g} s"
            where = repeat_ranges(self.stats_silent)
            parts.append(f"GET /stats unanswered{wait} after the load ({where})")
        parts += [call.text for call in self.shown_calls]
        if self.short_of_subscribers:
            low, high = min(self.registered), max(self.registered)
            span = f"{low:,}" if low == high else f"{low:,}–{high:,}"
            median = statistics.median(self.registered)
            over = f" (median {median:,.0f} over {len(self.registered)} repeats)"
            parts.append(
                f"{span} of {self.clients:,} subscribers registered by the end of the ramp"
                + (over if len(self.registered) > 2 else "")
            )
        return parts

    @property
    def who(self) -> str:
        return f"{self.contestant} ({self.tunables})" if self.tunables else self.contestant

    @property
    def sentence(self) -> str:
        """ "java-tomcat-blocking: all 1,000 request threads held by 1,000 long polls; ..." """
        return f"{self.who}: " + "; ".join(self.parts)

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "contestant": self.contestant,
            "tunables": self.tunables,
            "behaviour": self.behaviour,
            "clients": self.clients,
            "tests": self.repeats,
            "request_threads_held": self.threads if self.starved else None,
            "stats_unanswered": [f"r{r + 1}" for r in self.stats_silent],
            "stats_unanswered_s": self.stats_wait_s,
            "late_calls": [call.as_dict() for call in self.shown_calls],
            "subscribers_registered": list(self.registered),
            "short_of_subscribers": self.short_of_subscribers,
            "sentence": self.sentence,
        }


def findings(tests: Sequence[RecordedTest], labels: dict[str, str] | None = None) -> list[Finding]:
    """A finding per scenario and contestant (and tunables) whose push tests showed any of
    the three kinds, in the order the tests give them; `labels` are the scenario labels
    (``scenario_labels`` of the whole selection)."""
    labels = labels or scenario_labels(list(tests))
    made = []
    for key, group in grouped([t for t in tests if push.is_push(t)]).items():
        used = [t for t in group if t.status in SUMMARIZED_STATUSES]
        finding = _finding(used, key, labels[scenario_key(group[0])]) if used else None
        if finding is not None and finding.parts:
            made.append(finding)
    return made


def _finding(tests: list[RecordedTest], key: str, scenario: str) -> Finding:
    first = tests[0]
    silent = [t for t in tests if t.validity.get("stats_unreadable")]
    registered = [n for n in map(push.registered, tests) if n is not None]
    return Finding(
        key=key,
        scenario=scenario,
        contestant=first.contestant,
        tunables=tunable_text(first),
        behaviour=str(first.params.get("behaviour", "")),
        clients=int(first.params.get("clients") or 0),
        repeats=len(tests),
        threads=max((n for n in map(_threads_held, tests) if n), default=None),
        stats_silent=tuple(t.repeat_index for t in silent),
        stats_wait_s=max((s for s in map(_stats_wait_s, silent) if s), default=None),
        calls=_call_waits(tests),
        registered=tuple(registered),
    )


def _threads_held(test: RecordedTest) -> int | None:
    held = test.run_info.get("request_threads_held")
    if isinstance(held, int):
        return held
    match = _LEGACY_THREADS.match(str(test.validity.get("stats_unreadable") or ""))
    return int(match.group(1).replace(",", "")) if match else None


def _stats_wait_s(test: RecordedTest) -> float | None:
    waited = test.run_info.get("stats_unanswered_s")
    if isinstance(waited, int | float):
        return float(waited)
    match = _LEGACY_WAIT.search(str(test.validity.get("stats_unreadable") or ""))
    return float(match.group(1)) if match else None


def _call_waits(tests: list[RecordedTest]) -> tuple[CallWait, ...]:
    """Per late call and per kind (beyond the fan-out, or within it), the repeats it was late
    in and by how much: the calls that waited first."""
    found: dict[tuple[bool, str], list[tuple[int, float, float | None]]] = {}
    for test in tests:
        within = push.late_within_fan_out(test)
        fan_out = push.fan_out_ms(test) if within else None
        for call in push.late_calls(test):
            name = f"{call.get('method', '?')} {call.get('path', '?')}"
            found.setdefault((within, name), []).append(
                (test.repeat_index, float(call["late_ms"]), fan_out)
            )
    return tuple(CallWait(name, tuple(seen)) for (_, name), seen in sorted(found.items()))


def _duration_range(values: Sequence[float]) -> str:
    """Milliseconds as people read them: "136–159 ms", "1.5–2.6 s", "2.1 s"."""
    low, high = min(values), max(values)
    if high >= 1000:
        ends = dict.fromkeys(f"{v / 1000:.1f}" for v in (low, high))
        return "–".join(ends) + " s"
    ends = dict.fromkeys(f"{v:,.0f}" for v in (low, high))
    return "–".join(ends) + " ms"
