"""Raw readings of the kernel's process accounting, for the monitor's exact figures.

Execution stage. CPU time comes from `/proc/<pid>/stat` in clock ticks: a process's own user and
system time (every thread, live or exited) plus `cutime`/`cstime`, the time of the children
it has reaped. The CPU a tree used between two moments is therefore the change of
sum(utime + stime + cutime + cstime) over the tree's members at each moment: a child that
exits and is reaped inside the window moves from its own row into its parent's, and a
process born inside the window starts from zero. Machine time comes from `/proc/stat`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# The clock type of a process's CPU clock that counts every nanosecond it ran.
CPUCLOCK_SCHED = 2


def _read_text(path: str) -> str:
    # Plain strings, not pathlib: these paths are made hundreds of times a second.
    with open(path) as file:
        return file.read()


def cpu_ticks(pid: int) -> int | None:
    """utime + stime + cutime + cstime of one process, or None once it is gone (a zombie
    still has its row). Costs more for a process with many threads: the kernel sums them."""
    try:
        fields = _stat_fields(f"/proc/{pid}/stat")
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15])


def _stat_fields(path: str) -> list[str]:
    """A stat file's fields from the state on (fields[11:13]: utime, stime)."""
    text = _read_text(path)
    # comm may hold spaces and parentheses: the fields start after the last ')'.
    return text[text.rindex(")") + 2 :].split()


def parents() -> dict[int, tuple[int, str]]:
    """Every process's (parent pid, command name), from the head of /proc/<pid>/status,
    which unlike stat costs the same however many threads a process has."""
    found = {}
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as file:
                head = file.read(512)
        except OSError:
            continue
        start = head.find(b"\nPPid:") + 6
        if start > 5:
            name = head[6 : head.find(b"\n")].decode(errors="replace")
            found[int(entry)] = (int(head[start : head.find(b"\n", start)]), name)
    return found


def tree(roots: list[int], family: dict[int, tuple[int, str]]) -> set[int]:
    """The roots and all their descendants (`family`: from `parents`)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in family.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [r for r in roots if r in family]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def descendants(root: int) -> set[int]:
    """The root and its descendants through /proc/<pid>/task/<pid>/children: cheap, but it
    lists the children each process's main thread made, not those of its other threads."""
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        try:
            children = _read_text(f"/proc/{pid}/task/{pid}/children").split()
        except OSError:
            continue
        found.add(pid)
        todo.extend(int(c) for c in children if int(c) not in found)
    return found


def ticks(pids: set[int], family: dict[int, tuple[int, str]] | None = None) -> int:
    """The members' CPU ticks, read children before parents when `family` gives their
    parents: a child reaped before its own read is then in its parent's row, read after.
    (One reaped between the two reads counts twice: a window of microseconds.)"""
    return sum(cpu_ticks(pid) or 0 for pid in _deepest_first(pids, family or {}))


def _deepest_first(pids: set[int], family: dict[int, tuple[int, str]]) -> list[int]:
    def depth(pid: int) -> int:
        count = 0
        while pid in pids and count < len(pids):
            pid, count = family.get(pid, (0, ""))[0], count + 1
        return count

    return sorted(pids, key=depth, reverse=True)


def thread_ticks(pids: set[int], names: tuple[str, ...]) -> int | None:
    """utime + stime of the members' threads whose name (the kernel's 15-character comm)
    starts with one of `names`; None when no member has such a thread. A thread that exited
    takes its ticks with it: for threads that live as long as their process (a JVM's
    compiler threads)."""
    found, total = False, 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                if not _read_text(f"/proc/{pid}/task/{tid}/comm").startswith(names):
                    continue
                fields = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
            except OSError:
                continue
            found, total = True, total + int(fields[11]) + int(fields[12])
    return total if found else None


def machine_busy_ticks() -> int:
    """Ticks every CPU of the machine spent not idle: user, nice, system, irq, softirq and
    steal of /proc/stat's first line (guest time is already inside user)."""
    return machine_ticks()[0]


def machine_ticks() -> tuple[int, int]:
    """(busy, busy + idle + iowait) ticks of every CPU of the machine, from /proc/stat."""
    with open("/proc/stat", "rb") as stat:
        fields = [int(f) for f in stat.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def reset_peak(pid: int) -> bool:
    """Resets the process's peak resident set (VmHWM) to its current RSS."""
    try:
        (PROC / str(pid) / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def status(pid: int, *keys: str) -> dict[str, str]:
    """Fields of /proc/<pid>/status as text; absent ones (or a gone process) are left out."""
    found = {}
    try:
        text = _read_text(f"/proc/{pid}/status")
    except OSError:
        return found
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in keys:
            found[name] = value.strip()
    return found


def status_kib(pid: int, *keys: str) -> dict[str, int]:
    """Fields of /proc/<pid>/status in kB (VmHWM, VmRSS...)."""
    return {k: int(v.split()[0]) for k, v in status(pid, *keys).items()}


def cpu_seconds(pid: int) -> float | None:
    """A process's own CPU time (every thread, reaped children not included) through its
    CPU clock: nanoseconds, and a quarter of the cost of formatting /proc/<pid>/stat for a
    process with thousands of threads. None once it is gone.

    The clock's id is made here as glibc's clock_getcpuclockid makes it, not by calling
    that through ctypes: a foreign call lets go of the interpreter's lock, and taking it
    back from the runner's other threads cost the monitor 0.3-0.8 ms of its own CPU a
    sample, which thinned the CPU series of a one-process server (_TreeClock)."""
    try:
        return time.clock_gettime(process_cpu_clock(pid))
    except OSError:
        return None


def process_cpu_clock(pid: int) -> int:
    """The kernel's id of a process's CPU clock, the one clock_getcpuclockid(3) gives:
    MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) from linux/posix-timers.h, a fixed part of
    the kernel's ABI."""
    return ((~pid) << 3) | CPUCLOCK_SCHED


def _field(text: bytes, key: bytes) -> bytes:
    """The value of one `Key:\tvalue` line of a status file (b"" when absent)."""
    start = text.find(b"\n" + key + b":")
    if start < 0:
        return b""
    start += len(key) + 2
    return text[start : text.find(b"\n", start)].strip()


def sample(pid: int) -> tuple[int, int, int, int] | None:
    """(context switches, RSS bytes, threads, open descriptors) of a live process; None
    for a zombie or a gone one. Read for every member ten times a second: kept to one
    status read and one stat of its descriptor folder (its CPU is `cpu_seconds`, read apart
    because its cost grows with the process's threads)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            text = file.read()
    except OSError:
        return None
    if _field(text, b"State").startswith(b"Z") or not text:
        return None
    fds = open_descriptors(pid)
    switches = int(_field(text, b"voluntary_ctxt_switches") or 0) + int(
        _field(text, b"nonvoluntary_ctxt_switches") or 0
    )
    rss = 1024 * int((_field(text, b"VmRSS") or b"0").split()[0])
    return switches, rss, int(_field(text, b"Threads") or 0), fds


def open_descriptors(pid: int) -> int:
    """How many descriptors a process holds. Linux 6.2 on gives the count as the size of
    /proc/<pid>/fd, read from the descriptor table's bitmap; listing the folder instead costs
    a directory entry per descriptor (milliseconds for a server holding 20,000 streams).
    Older kernels say 0 there, and are listed. 0 for a gone process."""
    path = f"/proc/{pid}/fd"
    try:
        return os.stat(path).st_size or len(os.listdir(path))
    except OSError:
        return 0


def memory_used_bytes() -> int:
    """The machine's memory in use: MemTotal - MemAvailable (as psutil reports it)."""
    values = {}
    with open(PROC / "meminfo", "rb") as meminfo:
        for line in meminfo:
            if line.startswith((b"MemTotal:", b"MemAvailable:")):
                values[line.split(b":")[0]] = int(line.split()[1])
                if len(values) == 2:
                    break
    return 1024 * (values[b"MemTotal"] - values[b"MemAvailable"])
