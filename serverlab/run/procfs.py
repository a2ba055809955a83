"""Raw readings of the kernel's process accounting, for the monitor's exact figures.

Run stage. CPU time comes from `/proc/<pid>/stat` in clock ticks: a process's own user and
system time (every thread, live or exited) plus `cutime`/`cstime`, the time of the children
it has reaped. The CPU a tree used between two moments is therefore the change of
sum(utime + stime + cutime + cstime) over the tree's members at each moment: a child that
exits and is reaped inside the window moves from its own row into its parent's, and a
process born inside the window starts from zero. Machine time comes from `/proc/stat`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    comm: str
    ticks: int  # utime + stime + cutime + cstime


def read_stat(pid: int) -> ProcStat | None:
    """One process's row, or None once it is gone (zombies still have one)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # comm may hold spaces and parentheses: the fields start after the last ')'.
    close = text.rindex(")")
    fields = text[close + 2 :].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    comm = text[text.index("(") + 1 : close]
    return ProcStat(pid, int(fields[1]), comm, utime + stime + cutime + cstime)


def all_stats() -> dict[int, ProcStat]:
    """Every process's row: one pass over /proc."""
    rows = {}
    for entry in os.listdir(PROC):
        if entry.isdigit():
            row = read_stat(int(entry))
            if row is not None:
                rows[row.pid] = row
    return rows


def tree(roots: list[int], rows: dict[int, ProcStat]) -> set[int]:
    """The roots and all their descendants, by parent pid."""
    children: dict[int, list[int]] = {}
    for row in rows.values():
        children.setdefault(row.ppid, []).append(row.pid)
    found, todo = set(), [r for r in roots if r in rows]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def ticks(pids: set[int], rows: dict[int, ProcStat]) -> int:
    return sum(rows[pid].ticks for pid in pids if pid in rows)


def machine_busy_ticks() -> int:
    """Ticks every CPU of the machine spent not idle: user, nice, system, irq, softirq and
    steal of /proc/stat's first line (guest time is already inside user)."""
    with open(PROC / "stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq + steal


def reset_peak(pid: int) -> bool:
    """Resets the process's peak resident set (VmHWM) to its current RSS."""
    try:
        (PROC / str(pid) / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def status_kib(pid: int, *keys: str) -> dict[str, int]:
    """Fields of /proc/<pid>/status in kB (VmHWM, VmRSS...); absent ones are left out."""
    found = {}
    try:
        text = (PROC / str(pid) / "status").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in keys:
            found[name] = int(value.split()[0])
    return found
