"""The machine limits that large connection counts run into (seed 003's 10,000 clients,
seed 004's 20,000 threads): what is in force, what a suite's `[needs]` asks for, and, as
root, setting what is short. `serverlab run` raises its own descriptor limit and refuses a
suite whose needs the machine does not meet, naming `serverlab tune SUITE --apply`.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from serverlab.run.host.machine import read_sysctl

# The widest ephemeral range the kernel allows: ports below 1024 stay for services.
LOWEST_EPHEMERAL_PORT = 1024
HIGHEST_PORT = 65535


@dataclass(frozen=True)
class Row:
    limit: str
    in_force: str
    needed: int | None
    ok: bool
    note: str = ""


@dataclass(frozen=True)
class _Sysctl:
    """A /proc/sys value checked against one `[needs]` key."""

    name: str
    need_key: str | None
    measure: Callable[[str], int] = int
    # tcp_tw_reuse 2 reuses on loopback only, which is all our traffic: it counts as on.
    wanted_value: Callable[[int, str], str] = lambda need, _current: str(need)

    def current(self) -> str | None:
        return read_sysctl(self.name)

    def row(self, needs: dict[str, int]) -> Row:
        value = self.current()
        need = needs.get(self.need_key) if self.need_key else None
        if value is None:
            return Row(self.name, "unreadable", need, need is None)
        return Row(self.name, value, need, need is None or self.measure(value) >= need)


def _port_range_size(value: str) -> int:
    low, high = (int(v) for v in value.split())
    return high - low + 1


def _port_range_for(need: int, current: str) -> str:
    high = HIGHEST_PORT
    return f"{max(LOWEST_EPHEMERAL_PORT, high - need + 1)} {high}"


def _tw_reuse(value: str) -> int:
    return 1 if int(value) in (1, 2) else 0


SYSCTLS = (
    _Sysctl("fs.nr_open", "nofile"),
    _Sysctl("fs.file-max", "nofile"),
    _Sysctl("net.core.somaxconn", "somaxconn"),
    _Sysctl("net.ipv4.ip_local_port_range", "local_ports", _port_range_size, _port_range_for),
    _Sysctl("net.ipv4.tcp_tw_reuse", "tcp_tw_reuse", _tw_reuse),
    _Sysctl("vm.max_map_count", "max_map_count"),
    _Sysctl("kernel.threads-max", None),
)


CAP_SYS_RESOURCE = 24
RLIMIT_FIX = "raise the hard RLIMIT_NOFILE (ulimit -Hn, limits.conf, or CAP_SYS_RESOURCE)"


def is_root() -> bool:
    return os.geteuid() == 0


def can_raise_hard_limits() -> bool:
    """CAP_SYS_RESOURCE in force: root in a container may lack it and then cannot raise
    a hard rlimit either."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError):
        pass
    return False


def reachable_nofile() -> int:
    """The descriptor limit `serverlab run` can give itself: the hard limit, or with
    CAP_SYS_RESOURCE (root, normally) anything up to fs.nr_open."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nr_open = int(read_sysctl("fs.nr_open") or hard)
    return max(hard, nr_open) if can_raise_hard_limits() else hard


def _nofile_row(needs: dict[str, int]) -> Row:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = needs.get("nofile")
    reach = reachable_nofile()
    note = f"serverlab run raises it to {min(reach, max(need or 0, hard))}"
    if need and need > reach:
        note = RLIMIT_FIX
    return Row(
        "RLIMIT_NOFILE soft/hard", f"{soft}/{hard}", need, need is None or reach >= need, note
    )


def rows(needs: dict[str, int]) -> list[Row]:
    return [_nofile_row(needs), *(s.row(needs) for s in SYSCTLS)]


def shortfalls(needs: dict[str, int]) -> list[Row]:
    return [row for row in rows(needs) if not row.ok]


def apply(needs: dict[str, int], proc_sys: Path = Path("/proc/sys")) -> list[str]:
    """Raises every sysctl that is short of `needs` (root only); returns what it changed.
    The descriptor rlimit follows fs.nr_open: `serverlab run` raises it per process."""
    changes = []
    for sysctl in SYSCTLS:
        row = sysctl.row(needs)
        if row.ok or row.needed is None:
            continue
        wanted = sysctl.wanted_value(row.needed, row.in_force)
        path = proc_sys.joinpath(*sysctl.name.split("."))
        path.write_text(wanted + "\n")
        changes.append(f"{sysctl.name}: {row.in_force} -> {wanted}")
    return changes


def raise_nofile(need: int | None = None) -> dict[str, dict[str, int]]:
    """Raises this process's RLIMIT_NOFILE (inherited by every child it starts): soft to
    hard, and as root hard to `need` (at most fs.nr_open). Returns before and after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new_hard = hard
    if need and need > hard and can_raise_hard_limits():
        new_hard = min(need, reachable_nofile())
    if (soft, hard) != (new_hard, new_hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (new_hard, new_hard))
    return {
        "before": {"soft": soft, "hard": hard},
        "after": {"soft": new_hard, "hard": new_hard},
    }


def in_force() -> dict[str, str | None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"RLIMIT_NOFILE": f"{soft}/{hard}", **{s.name: s.current() for s in SYSCTLS}}


def refusal(suite_path: str, short: list[Row]) -> str:
    what = "; ".join(f"{r.limit} is {r.in_force}, needs {r.needed}" for r in short)
    fixes = [f"run `serverlab tune {suite_path} --apply` as root"]
    if any(r.limit.startswith("RLIMIT") for r in short):
        fixes = [RLIMIT_FIX, *fixes]
    return f"this machine does not meet the suite's [needs]: {what}; " + "; ".join(fixes)
