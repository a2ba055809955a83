"""The delay line (base, for two stages: a test's shaped link, serverlab.run.host.shapedlink,
and the virtual lab's host links, serverlab.lab.network): where the kernel has no netem,
serverlab's own IP forwarder (tools/delayline) carries a link's packets between two
namespaces, through a TUN device in each, delaying, pacing and dropping them. It forwards IP
packets, never TCP streams, so the server sees the real round trip and flow control.

Also the link's TCP-connect RTT probe, which proves the delay on every shaped link.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serverlab.base import owner
from serverlab.base.netns import Namespace, NetnsError, ip
from serverlab.base.paths import REPO_ROOT

DELAYLINE_ENV = "SERVERLAB_DELAYLINE"
# The link's two ends, from the benchmarking range (RFC 2544), in namespaces of their own:
# point to point, and no route anywhere else.
CLIENT_ADDRESS = "198.18.0.1"
SERVER_ADDRESS = "198.18.0.2"
CLIENT_TUN = "dl-client"
SERVER_TUN = "dl-server"
LINK_MTU = 1500
READY_S = 10.0
PROBES = 5
# struct tcp_info: tcpi_rtt (microseconds) follows 8 bytes of flags and 15 u32 fields.
TCPI_RTT_OFFSET = 68
TCP_INFO_BYTES = 104


def binary() -> Path | None:
    """The forwarder, when it is built (`make build`); None otherwise."""
    override = os.environ.get(DELAYLINE_ENV)
    path = (
        Path(override)
        if override
        else REPO_ROOT / "tools/delayline/target/release/serverlab-delayline"
    )
    return path if path.is_file() else None


@dataclass
class Forwarder:
    """A running delay line between two namespaces; `stop` returns its own counts."""

    process: subprocess.Popen
    counts: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""

    def stop(self) -> dict[str, Any]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            out, self.stderr = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, self.stderr = self.process.communicate()
        lines = [line for line in (out or "").splitlines() if line.startswith("{")]
        self.counts = json.loads(lines[-1]) if lines else {}
        return _with_cost(self.counts)


def _with_cost(counts: dict[str, Any]) -> dict[str, Any]:
    """Adds the CPU time per forwarded packet (source: the forwarder's getrusage)."""
    forwarded = sum(counts.get("forwarded", []))
    if forwarded and "cpu_s" in counts:
        counts["cpu_us_per_packet"] = round(counts["cpu_s"] * 1e6 / forwarded, 2)
    return counts


def start(
    client: Namespace,
    server: Namespace,
    link: dict[str, float],
    cpus: str | None = None,
    rng_seed: int = 1,
) -> Forwarder:
    """Starts the forwarder (pinned to `cpus`, marked as ours), then addresses both ends.
    `link` has delay_ms, rate_mbit and loss_pct."""
    argv = command(client, server, (CLIENT_TUN, SERVER_TUN), link, rng_seed)
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    process = owner.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    forwarder = Forwarder(process)
    if not _ready(process):
        forwarder.stop()
        raise NetnsError(f"delay line did not start: {forwarder.stderr.strip()[:500]}")
    _address(client, CLIENT_TUN, CLIENT_ADDRESS, SERVER_ADDRESS)
    _address(server, SERVER_TUN, SERVER_ADDRESS, CLIENT_ADDRESS)
    return forwarder


def command(
    client: Namespace,
    server: Namespace,
    tuns: tuple[str, str],
    link: dict[str, float],
    rng_seed: int = 1,
) -> list[str]:
    """The forwarder's command line: a TUN device named `tuns[0]` in `client` and one named
    `tuns[1]` in `server`, the link's delay_ms (one way), rate_mbit and loss_pct."""
    path = binary()
    if path is None:
        raise NetnsError("delay line not built: run `make build` (tools/delayline)")
    argv = [str(path), "--client-ns", str(client.path), "--server-ns", str(server.path)]
    argv += ["--client-tun", tuns[0], "--server-tun", tuns[1], "--seed", str(rng_seed)]
    for key in ("delay_ms", "rate_mbit", "loss_pct"):
        argv += [f"--{key.replace('_', '-')}", str(link.get(key) or 0)]
    return argv


def _ready(process: subprocess.Popen) -> bool:
    """Whether the forwarder said `ready` (both devices made) within READY_S."""
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(READY_S)
    return bool(said) and said[0].strip() == "ready"


def _address(namespace: Namespace, device: str, local: str, peer: str) -> None:
    ip(namespace.command(["ip", "addr", "add", local, "peer", f"{peer}/32", "dev", device]))
    # An Ethernet device's queue (1000), not TUN's 500: room for a burst while the
    # forwarder wakes.
    link = ["ip", "link", "set", device, "mtu", str(LINK_MTU), "txqueuelen", "1000", "up"]
    ip(namespace.command(link))


def connect_rtt_ms(client: Namespace, server: Namespace, address: str) -> dict[str, float]:
    """The link's round trip as a TCP connect sees it (SYN out, SYN-ACK back), the median
    of PROBES connects from the client's namespace to a listener in the server's:
    `rtt_ms`, the kernel's own RTT sample of the handshake (TCP_INFO), and `connect_ms`,
    the connect call's wall time, which adds the prober's wake-up latency on a busy CPU."""
    listener = server.call(_listen, address)
    try:
        samples = [client.call(_connect, listener.getsockname()) for _ in range(PROBES)]
    finally:
        listener.close()
    return {
        "rtt_ms": round(statistics.median(kernel for kernel, _ in samples) * 1000, 3),
        "connect_ms": round(statistics.median(wall for _, wall in samples) * 1000, 3),
    }


def _listen(address: str) -> socket.socket:
    listener = socket.socket()
    listener.bind((address, 0))
    listener.listen(PROBES)
    return listener


def _connect(where: tuple[str, int]) -> tuple[float, float]:
    """The kernel's handshake RTT and the connect's wall time, in seconds."""
    started = time.perf_counter()
    with socket.create_connection(where, timeout=10) as conn:
        wall = time.perf_counter() - started
        info = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES)
    return struct.unpack_from("I", info, TCPI_RTT_OFFSET)[0] / 1e6, wall
