"""What a run records about the machine it ran on, so that a figure can be traced back
to the kernel, CPU, limits and tool versions behind it (DESIGN.md §5)."""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from serverlab import __version__
from serverlab.base.paths import REPO_ROOT

SYSCTLS = (
    "net.core.somaxconn",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_fin_timeout",
    "fs.file-max",
    "fs.nr_open",
)
TOOL_VERSIONS = {
    "python": ["python3", "--version"],
    "node": ["node", "--version"],
    "java": ["java", "-version"],
    "go": ["go", "version"],
    "rustc": ["rustc", "--version"],
    "ruby": ["ruby", "--version"],
    "nginx": ["nginx", "-v"],
}


@dataclass(frozen=True)
class Pinning:
    """Which CPUs the server and the engine run on. On 2 cores: engine on 0, server on 1,
    so that the generator never competes with the server it measures."""

    server: str
    engine: str

    @classmethod
    def default(cls) -> Pinning:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return cls(server=str(cpus[0]), engine=str(cpus[0]))
        half = len(cpus) // 2
        return cls(server=_cpu_list(cpus[half:]), engine=_cpu_list(cpus[:half]))

    @property
    def shared(self) -> bool:
        return bool(set(_cpus(self.server)) & set(_cpus(self.engine)))

    def with_server_cpus(self, count: int | None) -> Pinning:
        """The server on `count` CPUs: its own first, then the engine's if it needs more
        (which the `shared` flag then says)."""
        if not count:
            return self
        own, engine = _cpus(self.server), _cpus(self.engine)
        chosen = (own + [c for c in engine if c not in own])[:count]
        return Pinning(server=",".join(chosen), engine=self.engine)


def _cpus(listed: str) -> list[str]:
    return [c for c in listed.split(",") if c]


def _cpu_list(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip().replace("\t", " ")
    except OSError:
        return None


def _first_line(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def describe(pinning: Pinning, extra_tools: dict[str, list[str]] | None = None) -> dict:
    """A JSON-ready description of the machine, the limits in force and the tools."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    tools = {**TOOL_VERSIONS, **(extra_tools or {})}
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "pinning": {"server": pinning.server, "engine": pinning.engine},
        "rlimit_nofile": {"soft": soft, "hard": hard},
        "sysctls": {name: read_sysctl(name) for name in SYSCTLS},
        "tools": {name: _first_line(cmd) for name, cmd in tools.items()},
    }


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
GIB = 1024**3


def fingerprint() -> dict:
    """What makes two runs comparable at all: the hardware and kernel they ran on (DESIGN.md
    §11). Memory is in whole GiB so that a kernel's reserve does not split a series; the
    governor is None where the machine does not expose it (most VMs and containers)."""
    try:
        governor: str | None = GOVERNOR.read_text().strip() or None
    except OSError:
        governor = None
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "memory_gib": int(memory / GIB + 0.5),
        "governor": governor,
    }


def software_versions(engine: Path | None, contestants: dict[str, str], tools: dict) -> dict:
    """The software behind a run, kept beside the fingerprint and never in it, so that a
    series can cross a version change and show it. The engine is named by its binary's hash
    too: two builds of one version are two engines."""
    return {
        "serverlab": _serverlab_version(),
        "engine": _engine_version(engine) if engine else None,
        "contestants": dict(contestants),
        "tools": {name: line for name, line in tools.items() if line},
    }


def _serverlab_version() -> str:
    commit = _first_line(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"])
    return f"{__version__} ({commit})" if commit else __version__


def _engine_version(binary: Path) -> str | None:
    line = _first_line([str(binary), "--version"])
    try:
        digest = hashlib.sha256(binary.read_bytes()).hexdigest()[:12]
    except OSError:
        return line
    return f"{line or binary.name} (sha256 {digest})"
