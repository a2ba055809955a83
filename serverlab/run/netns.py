"""A shaped link for one test: a network namespace of our own whose loopback is rate
limited by tc, so that the server and the load engine talk over a slow link while the
traffic still never leaves the machine (seed 000's slow clients, seed 001's 80 Mbit/s).

This kernel may lack `sch_netem`; a delay then cannot be applied, and the namespace says
so (`delay_applied` False) instead of failing: the test runs at the rate only.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from serverlab.base import owner
from serverlab.base.netns import Namespace, delete, existing, ip
from serverlab.contestant.server import ContestantServer

PREFIX = "serverlab-"
# A real Ethernet link's frame size, so that tc shapes packets of a real size rather
# than loopback's 64 KiB ones.
LINK_MTU = 1500
# The link's buffer: 100 ms at the rate, at least 64 KiB, as a router would queue.
QUEUE_S = 0.1
MIN_QUEUE_BYTES = 65536
_counter = itertools.count()
T = TypeVar("T")


@dataclass
class ShapedNamespace(Namespace):
    """A namespace whose loopback is the shaped link."""

    rate_mbit: float = 0.0
    delay_ms: float = 0.0
    delay_applied: bool = False

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"netns": self.name, "rate_mbit": self.rate_mbit}
        if self.delay_ms:
            meta["delay_ms"] = self.delay_ms
            meta["delay_applied"] = self.delay_applied
        return meta


@contextlib.contextmanager
def shaped_namespace(rate_mbit: float, delay_ms: float = 0.0) -> Iterator[ShapedNamespace]:
    """A fresh namespace with `lo` up and shaped; deleted on exit, Ctrl-C included."""
    # Named by the owner's mark, so that a later run can tell whether its maker is alive.
    mark = owner.token().replace(".", "-")
    name = f"{PREFIX}{mark}-{next(_counter)}"
    namespace = ShapedNamespace(name, rate_mbit=rate_mbit, delay_ms=delay_ms)
    ip(["ip", "netns", "add", namespace.name])
    try:
        ip(namespace.command(["ip", "link", "set", "lo", "mtu", str(LINK_MTU), "up"]))
        namespace.delay_applied = _shape(namespace)
        yield namespace
    finally:
        namespace.close()
        delete(namespace.name)


def _shape(namespace: ShapedNamespace) -> bool:
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
    ip([*tc, "parent", "1:1", "handle", "10:", *tbf] if delayed else [*tc, "root", *tbf])
    return delayed


def reap_stale() -> list[str]:
    """Deletes serverlab namespaces whose creating process is gone (a run killed -9)."""
    reaped = []
    for name in existing():
        found = re.fullmatch(rf"{re.escape(PREFIX)}(\d+)-(\d+)-\d+", name)
        if found and not owner.alive(f"{found.group(1)}.{found.group(2)}"):
            delete(name)
            reaped.append(name)
    return reaped


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
