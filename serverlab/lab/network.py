"""The lab's wiring: a switch namespace holding a bridge, and per host a namespace with a
veth to that bridge, its address, `lo`, and no route beyond the lab's own subnet. A
`--rate-mbit` lab shapes every host's link with tbf (this kernel has no netem)."""

from __future__ import annotations

from serverlab.base.netns import delete, existing, ip
from serverlab.lab.topology import SUBNET, Host, Lab, is_lab_namespace

BRIDGE = "br0"
HOST_LINK = "eth0"
# tbf's burst and queue at a rate: 10 ms of data, at least two full frames.
BURST_S = 0.01
QUEUE_S = 0.1
MTU = 1500


def build(lab: Lab) -> None:
    """Makes every namespace and link; on failure removes what it made, then raises."""
    try:
        ip(["ip", "netns", "add", lab.switch])
        ip(["ip", "-n", lab.switch, "link", "set", "lo", "up"])
        ip(["ip", "-n", lab.switch, "link", "add", BRIDGE, "type", "bridge"])
        ip(["ip", "-n", lab.switch, "link", "set", BRIDGE, "up"])
        for host in lab.hosts:
            _attach(lab, host)
    except BaseException:
        remove(lab)
        raise


def _attach(lab: Lab, host: Host) -> None:
    port = f"p-{host.role}"
    ip(["ip", "netns", "add", host.netns])
    ip(
        [
            "ip",
            "-n",
            lab.switch,
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            HOST_LINK,
            "netns",
            host.netns,
        ]
    )
    ip(["ip", "-n", lab.switch, "link", "set", port, "master", BRIDGE, "up"])
    ip(["ip", "-n", host.netns, "link", "set", "lo", "up"])
    # The subnet's own route is all a host gets: no default route, so nothing leaves the lab.
    ip(
        [
            "ip",
            "-n",
            host.netns,
            "addr",
            "add",
            f"{host.address}/{SUBNET.prefixlen}",
            "dev",
            HOST_LINK,
        ]
    )
    ip(["ip", "-n", host.netns, "link", "set", HOST_LINK, "up"])
    if lab.rate_mbit:
        _shape(host.netns, lab.rate_mbit)


def _shape(netns: str, rate_mbit: float) -> None:
    rate_bytes = rate_mbit * 1_000_000 / 8
    burst = max(2 * MTU + 100, int(rate_bytes * BURST_S))
    limit = max(burst, int(rate_bytes * QUEUE_S))
    ip(
        [
            "tc",
            "-n",
            netns,
            "qdisc",
            "add",
            "dev",
            HOST_LINK,
            "root",
            "tbf",
            "rate",
            f"{rate_mbit}mbit",
            "burst",
            str(burst),
            "limit",
            str(limit),
        ]
    )


def remove(lab: Lab) -> list[str]:
    """Deletes every namespace of the lab that exists, those of hosts a half-made lab never
    wrote down included (a host's veth goes with it)."""
    gone = [name for name in existing() if is_lab_namespace(name) == lab.name]
    for name in gone:
        delete(name)
    return gone
