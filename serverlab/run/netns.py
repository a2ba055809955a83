"""A shaped link for one test: a network namespace of our own whose loopback is rate
limited by tc, so that the server and the load engine talk over a slow link while the
traffic still never leaves the machine (seed 000's slow clients, seed 001's 80 Mbit/s).

This kernel may lack `sch_netem`; a delay then cannot be applied, and the namespace says
so (`delay_applied` False) instead of failing: the test runs at the rate only.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from serverlab.base import owner
from serverlab.contestant.server import ContestantServer

PREFIX = "serverlab-"
NETNS_DIR = Path("/var/run/netns")
CLONE_NEWNET = 0x40000000
# A real Ethernet link's frame size, so that tc shapes packets of a real size rather
# than loopback's 64 KiB ones.
LINK_MTU = 1500
# The link's buffer: 100 ms at the rate, at least 64 KiB, as a router would queue.
QUEUE_S = 0.1
MIN_QUEUE_BYTES = 65536
_counter = itertools.count()
T = TypeVar("T")


class NetnsError(RuntimeError):
    """A namespace could not be made or shaped; the message names the failing command."""


@dataclass
class Namespace:
    name: str
    rate_mbit: float
    delay_ms: float = 0.0
    delay_applied: bool = False
    _executor: ThreadPoolExecutor | None = field(default=None, repr=False)

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def shell(self, script: str) -> str:
        """A `/bin/sh -c` script that runs `script` inside the namespace."""
        return f"exec ip netns exec {self.name} /bin/sh -c {shlex.quote(script)}"

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Runs `function` on a thread that lives in the namespace: sockets it makes are
        on the namespace's loopback."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=self.name, initializer=_enter, initargs=(self,)
            )
        return self._executor.submit(function, *args, **kwargs).result()

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"netns": self.name, "rate_mbit": self.rate_mbit}
        if self.delay_ms:
            meta["delay_ms"] = self.delay_ms
            meta["delay_applied"] = self.delay_applied
        return meta


def _enter(namespace: Namespace) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(namespace.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(f"setns({namespace.path}) failed: {os.strerror(err)}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def shaped_namespace(rate_mbit: float, delay_ms: float = 0.0) -> Iterator[Namespace]:
    """A fresh namespace with `lo` up and shaped; deleted on exit, Ctrl-C included."""
    # Named by the owner's mark, so that a later run can tell whether its maker is alive.
    mark = owner.token().replace(".", "-")
    namespace = Namespace(f"{PREFIX}{mark}-{next(_counter)}", rate_mbit, delay_ms)
    _run(["ip", "netns", "add", namespace.name])
    try:
        _run(namespace.command(["ip", "link", "set", "lo", "mtu", str(LINK_MTU), "up"]))
        namespace.delay_applied = _shape(namespace)
        yield namespace
    finally:
        if namespace._executor is not None:
            namespace._executor.shutdown(wait=False, cancel_futures=True)
        delete(namespace.name)


def _shape(namespace: Namespace) -> bool:
    """Puts tbf at the rate on lo, under netem when a delay is wanted and netem exists.
    Returns whether the delay was applied."""
    rate_bytes = namespace.rate_mbit * 1_000_000 / 8
    burst = max(2 * LINK_MTU + 100, int(rate_bytes / 100))
    limit = max(MIN_QUEUE_BYTES, int(rate_bytes * QUEUE_S))
    tbf = ["tbf", "rate", f"{namespace.rate_mbit}mbit", "burst", str(burst), "limit", str(limit)]
    tc = namespace.command(["tc", "qdisc", "add", "dev", "lo"])
    delayed = False
    if namespace.delay_ms:
        netem = [*tc, "root", "handle", "1:", "netem", "delay", f"{namespace.delay_ms}ms"]
        delayed = subprocess.run(netem, capture_output=True).returncode == 0
    _run([*tc, "parent", "1:1", "handle", "10:", *tbf] if delayed else [*tc, "root", *tbf])
    return delayed


def delete(name: str) -> None:
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def existing() -> list[str]:
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    except OSError:
        return []  # no iproute2: no namespace of ours can exist either
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


def reap_stale() -> list[str]:
    """Deletes serverlab namespaces whose creating process is gone (a run killed -9)."""
    reaped = []
    for name in existing():
        found = re.fullmatch(rf"{re.escape(PREFIX)}(\d+)-(\d+)-\d+", name)
        if found and not owner.alive(f"{found.group(1)}.{found.group(2)}"):
            delete(name)
            reaped.append(name)
    return reaped


def _run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NetnsError(f"{shlex.join(argv)}: {err}") from err
    if done.returncode != 0:
        hint = " (shaped links need root and iproute2)" if os.geteuid() != 0 else ""
        raise NetnsError(f"{shlex.join(argv)} failed: {done.stderr.strip()}{hint}")


def netem_available() -> bool:
    """Whether this kernel can delay packets (sch_netem), tried in a throwaway namespace."""
    with shaped_namespace(rate_mbit=1000, delay_ms=1) as probe:
        return probe.delay_applied


class NamespacedServer(ContestantServer):
    """A contestant started inside a namespace; readiness and /stats go through it."""

    def __init__(self, namespace: Namespace, manifest, **kwargs):
        super().__init__(manifest, **kwargs)
        self.namespace = namespace

    @property
    def start_command(self) -> str:
        return self.namespace.shell(super().start_command)

    def is_ready(self) -> bool:
        return self.namespace.call(super().is_ready)

    def stats(self, timeout_s: float = 5.0) -> dict:
        return self.namespace.call(super().stats, timeout_s)

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self.namespace.call(function, *args, **kwargs)
