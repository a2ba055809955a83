"""The lab's wiring: a switch namespace, and per host a namespace with a link to the switch,
its address, `lo`, and no route beyond the lab's own subnet.

A lab's links may have a rate, a one-way delay and a loss, each a figure between any two
hosts. What applies them, recorded with the lab (`link_record`) with the round trip
measured across it:
- a rate alone: tbf on each host's veth to a bridge;
- a delay or loss, where the kernel has netem: netem (tbf under it) on each host's veth,
  egress only, so a path between two hosts crosses one of each way;
- otherwise serverlab's delay line (serverlab.base.delayline): each host reaches the switch
  through a forwarder of its own between two TUN devices, and the switch routes instead of
  bridging (TUN carries IP, not Ethernet). A forwarder delays both ways, and a path crosses
  two, so each gets half the delay and the loss that, met twice, makes the lab's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil

from serverlab.base import delayline, owner, scratch
from serverlab.base.netns import Namespace, delete, existing, ip
from serverlab.lab.topology import SUBNET, Host, Lab, LabError, is_lab_namespace

BRIDGE = "br0"
HOST_LINK = "eth0"
# tbf's burst and queue at a rate: 10 ms of data, at least two full frames.
BURST_S = 0.01
QUEUE_S = 0.1
MTU = 1500
NETEM, DELAY_LINE, TBF = "netem", "delayline", "tbf"
FORWARDER_STOP_S = 5.0


def build(lab: Lab) -> dict:
    """Makes every namespace and link and returns the link's record (`link_record`); on
    failure removes what it made, then raises."""
    try:
        ip(["ip", "netns", "add", lab.switch])
        ip(["ip", "-n", lab.switch, "link", "set", "lo", "up"])
        method = _method(lab)
        if method == DELAY_LINE:
            _route(lab.switch)
        else:
            ip(["ip", "-n", lab.switch, "link", "add", BRIDGE, "type", "bridge"])
            ip(["ip", "-n", lab.switch, "link", "set", BRIDGE, "up"])
        for host in lab.hosts:
            if method == DELAY_LINE:
                _through_delay_line(lab, host)
            else:
                _attach(lab, host, method)
        return link_record(lab, method)
    except BaseException:
        remove(lab)
        raise


def _method(lab: Lab) -> str | None:
    """What shapes the lab's links: netem or the delay line for a delay or loss, tbf for a
    rate alone, None for neither."""
    if lab.delayed:
        return NETEM if _has_netem(lab.switch) else DELAY_LINE
    return TBF if lab.rate_mbit else None


def _has_netem(netns: str) -> bool:
    """Whether this kernel has sch_netem, tried on the switch's own loopback."""
    tc = ["tc", "-n", netns, "qdisc"]
    added = subprocess.run(
        [*tc, "add", "dev", "lo", "root", "netem", "delay", "1ms"], capture_output=True
    )
    if added.returncode != 0:
        return False
    subprocess.run([*tc, "del", "dev", "lo", "root"], capture_output=True)
    return True


def _attach(lab: Lab, host: Host, method: str | None) -> None:
    port = f"p-{host.role}"
    ip(["ip", "netns", "add", host.netns])
    veth = ["link", "add", port, "type", "veth", "peer", "name", HOST_LINK]
    ip(["ip", "-n", lab.switch, *veth, "netns", host.netns])
    ip(["ip", "-n", lab.switch, "link", "set", port, "master", BRIDGE, "up"])
    _address(host)
    if method == NETEM:
        _netem(host.netns, lab)
    elif method == TBF:
        _shape(host.netns, lab.rate_mbit, [])


def _address(host: Host) -> None:
    ip(["ip", "-n", host.netns, "link", "set", "lo", "up"])
    # The subnet's own route is all a host gets: no default route, so nothing leaves the lab.
    prefix = f"{host.address}/{SUBNET.prefixlen}"
    ip(["ip", "-n", host.netns, "addr", "add", prefix, "dev", HOST_LINK])
    ip(["ip", "-n", host.netns, "link", "set", HOST_LINK, "mtu", str(MTU), "up"])


def _netem(netns: str, lab: Lab) -> None:
    netem = ["tc", "-n", netns, "qdisc", "add", "dev", HOST_LINK, "root", "handle", "1:"]
    netem += ["netem", "delay", f"{lab.delay_ms}ms"]
    if lab.loss_pct:
        netem += ["loss", f"{lab.loss_pct}%"]
    ip(netem)
    if lab.rate_mbit:
        _shape(netns, lab.rate_mbit, ["parent", "1:1", "handle", "10:"])


def _shape(netns: str, rate_mbit: float, where: list[str]) -> None:
    rate_bytes = rate_mbit * 1_000_000 / 8
    burst = max(2 * MTU + 100, int(rate_bytes * BURST_S))
    limit = max(burst, int(rate_bytes * QUEUE_S))
    tbf = ["tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst), "limit", str(limit)]
    ip(["tc", "-n", netns, "qdisc", "add", "dev", HOST_LINK, *(where or ["root"]), *tbf])


def _route(switch: str) -> None:
    """The switch as a router: it forwards between its ports, one host route each."""
    ip(["ip", "netns", "exec", switch, "sysctl", "-qw", "net.ipv4.ip_forward=1"])


def port_link(lab: Lab) -> dict[str, float]:
    """One forwarder's share: half the one-way delay, and the loss which, met on both
    ports of a path, loses the lab's `loss_pct`."""
    loss = 100 * (1 - (1 - lab.loss_pct / 100) ** 0.5)
    return {"delay_ms": lab.delay_ms / 2, "rate_mbit": lab.rate_mbit or 0, "loss_pct": loss}


def _through_delay_line(lab: Lab, host: Host) -> None:
    """The host's link: a forwarder between a TUN device in the host (its eth0) and one in
    the switch, marked as the lab's so that `lab down` stops it with the Ray nodes."""
    port = f"p-{host.role}"
    ip(["ip", "netns", "add", host.netns])
    argv = delayline.command(
        Namespace(host.netns), Namespace(lab.switch), (HOST_LINK, port), port_link(lab)
    )
    out = _forwarder_output(lab, host)
    env = {**os.environ, owner.OWNER_ENV: owner.lab_mark(lab.name)}
    with out.open("w") as handle:
        process = subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    if not _said_ready(process, out):
        raise LabError(f"the delay line of {host.role} did not start: {out.read_text()[:300]}")
    _address(host)
    ip(["ip", "-n", lab.switch, "link", "set", port, "mtu", str(MTU), "txqueuelen", "1000", "up"])
    ip(["ip", "-n", lab.switch, "route", "add", f"{host.address}/32", "dev", port])


def _forwarder_output(lab: Lab, host: Host):
    folder = scratch.lab_folder(lab.name)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"delayline-{host.role}.out"


def _said_ready(process: subprocess.Popen, out) -> bool:
    deadline = time.monotonic() + delayline.READY_S
    while time.monotonic() < deadline and process.poll() is None:
        if out.read_text().startswith("ready"):
            return True
        time.sleep(0.02)
    process.kill()
    return False


def link_record(lab: Lab, method: str | None) -> dict:
    """What the run's metadata says of the lab's links: their figures, what applied them,
    and the round trip a TCP connect measured from the first generator to the server."""
    record: dict = {"rate_mbit": lab.rate_mbit, "delay_ms": lab.delay_ms}
    record.update(loss_pct=lab.loss_pct, shaped_by=method)
    record["delay_by"] = method if method in (NETEM, DELAY_LINE) else None
    if method == DELAY_LINE:
        record["per_forwarder"] = port_link(lab)
    client = lab.generators[0]
    try:
        probe = delayline.connect_rtt_ms(
            Namespace(client.netns), Namespace(lab.server.netns), lab.server.address
        )
    except OSError as err:
        probe = {"rtt_ms": None, "connect_ms": None, "error": str(err)}
    source = "kernel TCP_INFO RTT of the handshake, median of 5 connects"
    return {**record, **probe, "measured": f"{client.role} -> {lab.server.role}, {source}"}


def remove(lab: Lab) -> list[str]:
    """Stops the lab's delay lines, then deletes every namespace of the lab that exists,
    those of hosts a half-made lab never wrote down included (a host's link goes with it)."""
    stop_forwarders(lab.name)
    gone = [name for name in existing() if is_lab_namespace(name) == lab.name]
    for name in gone:
        delete(name)
    folder = scratch.lab_folder(lab.name)
    for output in folder.glob("delayline-*.out"):
        output.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty: a lab's Ray nodes keep theirs until `lab down`
    return gone


def stop_forwarders(lab_name: str) -> int:
    """SIGTERM to the lab's delay lines (each writes its counts as it goes), SIGKILL to any
    that outlives FORWARDER_STOP_S; returns how many there were."""
    found = []
    for pid in owner.owned_by(owner.lab_mark(lab_name)):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.name().startswith("serverlab-delay"):
                process.send_signal(signal.SIGTERM)
                found.append(process)
    _, alive = psutil.wait_procs(found, timeout=FORWARDER_STOP_S)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return len(found)
