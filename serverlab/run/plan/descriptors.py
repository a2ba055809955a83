"""Plan stage: the tests a descriptor cap cannot hold, found before anything runs. A
connection is a descriptor at each end, and one process cannot hold more than its
RLIMIT_NOFILE: 20,000 held clients against a server of one process, under a cap of 20,000,
would fail part-way through the ramp and be lost. Such a test is refused up front, with
the reason, and the dry run and the run list it. Pure: the cap is the caller's to give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from serverlab.base.paramtext import params_text
from serverlab.run.execution.testplan import TestPlan

# Descriptors a process holds besides its connections: a JVM's jars, pipes and epoll, the
# engine's timers and its output, a few libraries' own.
RESERVED = 512
# The one tunable that makes a contestant several processes sharing the listening socket
# (node-http's node:cluster workers); a contestant without it is one process.
PROCESSES_TUNABLE = "workers"
SHARED_PARAMS = ("behaviour", "pacer", "ramp_up_s", "duration_s")


@dataclass(frozen=True)
class Refused:
    plan: TestPlan
    why: str
    # The client groups refused, where the test runs without them (protocols.left_out);
    # empty: the whole test is refused.
    groups: tuple[str, ...] = ()

    def point(self) -> str:
        """The matrix point without what every test of a scenario shares (for groups left
        out, just their names: the test itself runs)."""
        if self.groups:
            return f"groups {', '.join(self.groups)}"
        return params_text(self.plan.params, leave_out=SHARED_PARAMS)

    def line(self) -> str:
        tuned = f" ({tunable_text(self.plan)})" if self.groups and self.plan.tunables else ""
        where = f"{self.plan.scenario} x {self.plan.contestant}{tuned} {self.point()}"
        return f"{where}: {self.why}"

    @property
    def key(self) -> str:
        """The refused point's key: the test's, or for groups left out the test's with
        their names (the test itself runs, and a report lists points that did not)."""
        return f"{self.plan.key}|without {','.join(self.groups)}" if self.groups else self.plan.key


def tunable_text(plan: TestPlan) -> str:
    """A test's tunables as the report writes a row's (report.cells.tunable_text)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(plan.tunables.items()))


def stored(refused: list[Refused]) -> list[dict]:
    """The refused tests as a run stores them (its info's `not_run`): one entry per
    permutation, its repeats counted, in the order they were refused."""
    entries: dict[str, dict] = {}
    for one in refused:
        plan = one.plan
        entry = entries.setdefault(
            one.key,
            {
                "key": one.key,
                "scenario": plan.scenario,
                "contestant": plan.contestant,
                "point": one.point(),
                "tunables": tunable_text(plan),
                "why": one.why,
                "repeats": 0,
            },
        )
        entry["repeats"] += 1
    return list(entries.values())


def refusal(plan: TestPlan, cap: int, engines: int | None) -> str | None:
    """Why this machine's cap cannot hold the test, or None. `engines`: how many engine
    processes share its clients (1 locally, the generators under --ray on the virtual
    lab); None when they run on hosts whose cap is not known here."""
    clients = planned_clients(plan)
    processes = max(1, int(plan.tunables.get(PROCESSES_TUNABLE, 1)))
    server = _need(clients, processes)
    if server > cap:
        shape = "one process" if processes == 1 else f"each of {processes} processes"
        return (
            f"{plan.contestant} as {shape} would need {server:,} descriptors (its "
            f"connections and {RESERVED} more), over this machine's cap of {cap:,}"
        )
    if engines is not None and (engine := _need(clients, engines)) > cap:
        shape = "one engine" if engines == 1 else f"each of {engines} engines"
        return (
            f"{shape} would need {engine:,} descriptors, over this machine's cap of "
            f"{cap:,} (more generators: --ray lab)"
        )
    return None


def planned_clients(plan: TestPlan) -> int:
    """The connections the test holds at most: every client group's together (their
    windows may overlap), else the test's clients."""
    groups = plan.measured.get("groups")
    if groups:
        return sum(int(group["connections"]) for group in groups)
    return int(plan.params.get("clients", 1))


def _need(clients: int, processes: int) -> int:
    """The descriptors each of `processes` needs to share `clients` connections."""
    return math.ceil(clients / processes) + RESERVED


def refuse(
    plans: list[TestPlan], cap: int, engines: int | None
) -> tuple[list[TestPlan], list[Refused]]:
    """(the tests the cap holds, in order; the refused ones, each with its reason)."""
    kept, refused = [], []
    for plan in plans:
        why = refusal(plan, cap, engines)
        if why is None:
            kept.append(plan)
        else:
            refused.append(Refused(plan, why))
    return kept, refused
