"""One engine plan split over n generators, as k6 splits its execution segments: counts
divided with the remainders spread over the first generators; arrivals and user starts
interleaved, so that the generators together make the plan's own schedule rather than n
identical bursts; syslog numbering in disjoint ranges, so that loss stays exact. Pure.

A plan with fewer clients than generators (one sequential connection, three users over
four generators) runs on as many generators as it has clients; the others get no plan,
None in their place.

Client groups (the plan's `groups`) are split each as a plan of its own is: each generator
runs every group, with its share of the group's clients and arrivals, so that the engine's
`--merge` adds every generator's figures group by group (it refuses outputs whose groups
differ). A grouped plan therefore runs on as many generators as its smallest group keeps
busy.
"""

from __future__ import annotations

import copy
from typing import Any


class SplitError(ValueError):
    pass


def share(total: int, n: int, i: int) -> int:
    """Generator i's part of `total` things: equal parts, the remainder to the first ones."""
    return total // n + (1 if i < total % n else 0)


def split(plan: dict[str, Any], n: int) -> list[dict[str, Any] | None]:
    if n < 1:
        raise SplitError(f"cannot split a plan over {n} generators")
    # The engine prints absent options as null (`--print-plan`); null means "not given".
    plan = {key: value for key, value in plan.items() if value is not None}
    groups = [(_group_plan(plan, group), group) for group in plan.get(GROUPS, ())]
    used = min(n, _clients(plan), *(_clients(whole) for whole, _ in groups))
    parts = [_part(plan, used, i) if i < used else None for i in range(n)]
    for i, part in enumerate(parts[:used]):
        if groups:
            part[GROUPS] = [_group_part(whole, group, used, i) for whole, group in groups]
    return parts


GROUPS = "groups"
# What a group says of its clients, beyond the plan's (engine/README.md, "groups").
GROUP_OWN = ("name", "start_s", "stop_s", "method", "paths")


def _group_plan(plan: dict[str, Any], group: dict[str, Any]) -> dict[str, Any]:
    """The plan a group runs: its own settings over the plan's."""
    whole = {k: v for k, v in plan.items() if k != GROUPS}
    whole.update({k: v for k, v in group.items() if v is not None})
    return whole


def _group_part(whole: dict[str, Any], group: dict[str, Any], n: int, i: int) -> dict:
    """Generator i's share of one group, split as its plan would be."""
    part = _part(whole, n, i)
    mine = {k: group[k] for k in GROUP_OWN if group.get(k) is not None}
    mine.update({k: part[k] for k in ("behaviour", "pacer", "connections") if k in part})
    return mine


def _clients(plan: dict[str, Any]) -> int:
    """How many generators a plan can keep busy: one per client at most."""
    pacer = plan.get("pacer", {"kind": "closed"})
    kind = pacer["kind"]
    if kind == "sequential":
        return 1  # one connection at a time is one client
    if kind == "users":
        return int(pacer["users"])
    counts = [int(plan["requests"])] if "requests" in plan else []
    if kind == "closed":
        counts.append(int(plan.get("connections", 10)))
    # An open loop with no count has no limit: every generator takes part.
    return max(1, min(counts)) if counts else 1 << 30


def _part(plan: dict[str, Any], n: int, i: int) -> dict[str, Any]:
    pacer = plan.get("pacer", {"kind": "closed"})
    part = copy.deepcopy(plan)
    part.pop("sources", None)  # a generator's own address is its source
    # The engine plan's `seed` is its RNG seed: each generator picks its own weighted paths.
    part["seed"] = int(plan.get("seed", 1)) + i
    if "requests" in plan:
        part["requests"] = share(int(plan["requests"]), n, i)
    part["pacer"] = _pacer(pacer, n, i)
    connections = int(plan.get("connections", 10))
    if pacer["kind"] == "closed":
        part["connections"] = share(connections, n, i)
    elif pacer["kind"] == "open" and connections:
        # A keep-alive pool, or a cap on open connections (0: none): at least one each.
        part["connections"] = max(1, share(connections, n, i))
    _number_syslog(part, plan, n, i)
    return part


def _pacer(pacer: dict[str, Any], n: int, i: int) -> dict[str, Any]:
    kind = pacer["kind"]
    if n == 1:
        return dict(pacer)
    if kind == "open":
        rate = float(pacer["rate"])
        part = {**pacer, "rate": rate / n, "offset_s": i / rate}
        if pacer.get("ramp_to_rate") is not None:
            part["ramp_to_rate"] = float(pacer["ramp_to_rate"]) / n
        return part
    if kind == "users":
        return _users(pacer, n, i)
    return dict(pacer)


def _users(pacer: dict[str, Any], n: int, i: int) -> dict[str, Any]:
    """User j of the whole plan starts at j * ramp / users; generator i runs the users
    j = i, i + n, i + 2n ..., all stopping when the whole plan stops. The engine starts
    user k at offset + k * ramp_up / users and stops them all at ramp_up + hold, so the
    part's ramp covers its users' starts and its hold the rest of the plan."""
    total, ramp, hold = int(pacer["users"]), float(pacer["ramp_up_s"]), float(pacer["hold_s"])
    mine = share(total, n, i)
    step = ramp / total if total else 0.0
    # A ramp of mine * n * step spaces its users exactly n * step apart. It may end after the
    # plan's ramp (its last user still starts within it); when the plan holds less than
    # that overrun, the part's ramp is cut to the plan's so that its hold stays >= 0, and
    # its users start a little closer together than the whole plan's would.
    ramp_part = min(mine * n * step, ramp + hold)
    return {
        "kind": "users",
        "users": mine,
        "ramp_up_s": ramp_part,
        "hold_s": max(0.0, ramp + hold - ramp_part),
        "offset_s": i * step,
    }


# The engine's first syslog number when a plan names none.
FIRST_SEQ = 1
# A generator's numbers when a flood is timed rather than counted: a range of this many
# each, far beyond what one generator sends, so that the ranges never meet.
SEQ_RANGE = 10**10


def _number_syslog(part: dict, plan: dict, n: int, i: int) -> None:
    behaviour = plan.get("behaviour", {})
    if behaviour.get("kind") != "syslog":
        return
    if "requests" in plan:
        first = sum(share(int(plan["requests"]), n, k) for k in range(i))
    else:
        first = i * SEQ_RANGE
    start = int(behaviour.get("seq_start", FIRST_SEQ)) + first
    part["behaviour"] = {**behaviour, "seq_start": start}
