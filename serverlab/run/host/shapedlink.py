"""A shaped link for one test (host preparation stage): network namespaces of our own, so that
the server and the load engine talk over a slow link while the traffic still never leaves
the machine (seed 000's slow clients, seed 001's 80 Mbit/s).

A rate alone is tbf on the server namespace's loopback. A delay or loss is netem on that
loopback where the kernel has `sch_netem`; where it has not, serverlab's own delay line
(serverlab.base.delayline) forwards the packets between a client namespace, where the load
runs, and the server's. Only when neither exists is the delay not applied, and the
namespace says so (`delay_applied` False) instead of failing: the test runs at the rate.
Either way the TCP-connect RTT measured at setup is recorded, proving the delay.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from serverlab.base import delayline, owner
from serverlab.base.netns import Namespace, delete, existing, ip
from serverlab.contestant.server import LOOPBACK, ContestantServer

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
    """The server's namespace of a shaped link. With netem (or no delay) the link is its
    loopback; with the delay line, the load runs in `client_netns` and reaches the server
    at `server_address` through the forwarder."""

    rate_mbit: float = 0.0
    delay_ms: float = 0.0
    loss_pct: float = 0.0
    delay_applied: bool = False
    delay_by: str | None = None  # "netem", "delayline", or None: nothing delays
    client_netns: str | None = None
    server_address: str = LOOPBACK
    rtt_ms: float | None = None  # the TCP-connect round trip measured at setup (kernel)
    connect_ms: float | None = None  # the same connects' wall time
    forwarder: dict[str, Any] = field(default_factory=dict)  # the delay line's own counts

    @property
    def load_netns(self) -> str:
        """Where the load engine runs."""
        return self.client_netns or self.name

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"netns": self.name, "rate_mbit": self.rate_mbit}
        if self.delay_ms or self.loss_pct:
            meta.update(delay_ms=self.delay_ms, delay_applied=self.delay_applied)
            meta.update(delay_by=self.delay_by, rtt_ms=self.rtt_ms, connect_ms=self.connect_ms)
        if self.loss_pct:
            meta["loss_pct"] = self.loss_pct
        if self.client_netns:
            meta.update(client_netns=self.client_netns, server_address=self.server_address)
            meta["delayline"] = self.forwarder
        return meta


def _new_name() -> str:
    # Named by the owner's mark, so that a later run can tell whether its maker is alive.
    mark = owner.token().replace(".", "-")
    return f"{PREFIX}{mark}-{next(_counter)}"


def _make(name: str) -> Namespace:
    ip(["ip", "netns", "add", name])
    ip(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "mtu", str(LINK_MTU), "up"])
    return Namespace(name)


@contextlib.contextmanager
def shaped_namespace(
    rate_mbit: float, delay_ms: float = 0.0, loss_pct: float = 0.0, cpus: str | None = None
) -> Iterator[ShapedNamespace]:
    """A fresh shaped link; its namespaces, forwarder and devices are gone on exit, Ctrl-C
    included. `cpus` pins the delay line, when one is needed."""
    namespace = ShapedNamespace(_new_name(), rate_mbit=rate_mbit, delay_ms=delay_ms)
    namespace.loss_pct = loss_pct
    made: list[Namespace] = []  # the client's, when the delay line needs one
    forwarder = None
    try:
        _make(namespace.name)
        if (delay_ms or loss_pct) and _netem(namespace):
            namespace.delay_by = "netem"
        elif (delay_ms or loss_pct) and delayline.binary():
            made.append(_make(_new_name()))
            forwarder = _delay_line(namespace, made[-1], cpus)
        else:
            _tbf(namespace, namespace.command(["tc", "qdisc", "add", "dev", "lo", "root"]))
        namespace.delay_applied = namespace.delay_by is not None
        if namespace.delay_applied:
            probe = _probe(namespace, made[-1] if made else namespace)
            namespace.rtt_ms, namespace.connect_ms = probe["rtt_ms"], probe["connect_ms"]
        yield namespace
    finally:
        if forwarder is not None:
            namespace.forwarder = forwarder.stop()
        for each in [namespace, *made]:
            each.close()
            delete(each.name)


def _netem(namespace: ShapedNamespace) -> bool:
    """netem (delay, loss) at the root of lo with tbf under it for the rate, when this
    kernel has sch_netem; False otherwise."""
    tc = namespace.command(["tc", "qdisc", "add", "dev", "lo"])
    netem = [*tc, "root", "handle", "1:", "netem", "delay", f"{namespace.delay_ms}ms"]
    if namespace.loss_pct:
        netem += ["loss", f"{namespace.loss_pct}%"]
    if subprocess.run(netem, capture_output=True).returncode != 0:
        return False
    _tbf(namespace, [*tc, "parent", "1:1", "handle", "10:"])
    return True


def _tbf(namespace: ShapedNamespace, where: list[str]) -> None:
    rate_bytes = namespace.rate_mbit * 1_000_000 / 8
    burst = max(2 * LINK_MTU + 100, int(rate_bytes / 100))
    limit = max(MIN_QUEUE_BYTES, int(rate_bytes * QUEUE_S))
    ip(
        [
            *where,
            "tbf",
            "rate",
            f"{namespace.rate_mbit}mbit",
            "burst",
            str(burst),
            "limit",
            str(limit),
        ]
    )


def _delay_line(namespace: ShapedNamespace, client: Namespace, cpus: str | None):
    """The forwarder between a client namespace and the server's: it does the rate too."""
    link = {"delay_ms": namespace.delay_ms, "rate_mbit": namespace.rate_mbit}
    forwarder = delayline.start(client, namespace, {**link, "loss_pct": namespace.loss_pct}, cpus)
    namespace.delay_by = "delayline"
    namespace.client_netns = client.name
    namespace.server_address = delayline.SERVER_ADDRESS
    return forwarder


def _probe(namespace: ShapedNamespace, client: Namespace) -> dict[str, float | None]:
    """The TCP-connect RTT across the link (None if loss ate every try)."""
    try:
        return delayline.connect_rtt_ms(client, namespace, namespace.server_address)
    except OSError:
        return {"rtt_ms": None, "connect_ms": None}


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
    name = _new_name()
    try:
        _make(name)
        tc = ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]
        return subprocess.run(Namespace(name).command(tc), capture_output=True).returncode == 0
    finally:
        delete(name)


def delay_method() -> str | None:
    """What would delay a shaped link here: "netem", "delayline", or None (nothing)."""
    if netem_available():
        return "netem"
    return "delayline" if delayline.binary() else None


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
