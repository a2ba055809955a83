"""What a lab is made of, as data: its hosts, their roles, namespaces and addresses. Pure,
so that `lab up`, `lab down` and the reaper of half-made labs agree on every name."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

# RFC 2544's benchmarking range; every lab uses 198.18.0.0/24 of it on its own bridge.
LAB_RANGE = ipaddress.ip_network("198.18.0.0/15")
SUBNET = ipaddress.ip_network("198.18.0.0/24")
RAY_PORT = 6379
PREFIX = "serverlab-lab-"
HEAD, SERVER, GENERATOR, SWITCH = "head", "server", "gen", "sw"
# Ray custom resources: the node that runs the contestant, and those that load it.
SERVER_RESOURCE = "serverlab_server"
LOADGEN_RESOURCE = "serverlab_loadgen"
MAX_GENERATORS = 32
# A one-way delay above this is no network a server meets (a geostationary hop is 270 ms).
MAX_DELAY_MS = 5000
# The ceiling of a suite's links too (run.plan.suite.tables LINK_RANGES): `inf` passed the old
# positive-only check and reached tc, which refused it only after the namespaces were made.
MAX_RATE_MBIT = 100_000
NAME = re.compile(r"[a-z0-9]{1,8}")


class LabError(RuntimeError):
    pass


@dataclass(frozen=True)
class Host:
    role: str  # head, server or gen<N>
    netns: str
    address: str
    resources: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Lab:
    name: str
    hosts: tuple[Host, ...]
    rate_mbit: float | None = None
    # Between any two hosts: the one-way delay (the round trip is twice it) and the loss.
    delay_ms: float = 0.0
    loss_pct: float = 0.0

    @property
    def delayed(self) -> bool:
        """Whether its links need a delay (or loss) as well as a rate."""
        return bool(self.delay_ms or self.loss_pct)

    @property
    def switch(self) -> str:
        return f"{PREFIX}{self.name}-{SWITCH}"

    @property
    def head(self) -> Host:
        return next(h for h in self.hosts if h.role == HEAD)

    @property
    def server(self) -> Host:
        return next(h for h in self.hosts if h.role == SERVER)

    @property
    def generators(self) -> list[Host]:
        return [h for h in self.hosts if h.role.startswith(GENERATOR)]

    @property
    def ray_address(self) -> str:
        return f"{self.head.address}:{RAY_PORT}"

    def namespaces(self) -> list[str]:
        return [self.switch, *(h.netns for h in self.hosts)]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_file(cls, path: Path) -> Lab:
        raw = json.loads(path.read_text())
        hosts = tuple(Host(**h) for h in raw["hosts"])
        link = (raw.get("rate_mbit"), raw.get("delay_ms", 0.0), raw.get("loss_pct", 0.0))
        return cls(raw["name"], hosts, *link)


def plan_lab(
    name: str,
    generators: int,
    rate_mbit: float | None = None,
    delay_ms: float = 0.0,
    loss_pct: float = 0.0,
) -> Lab:
    """A head (Ray's GCS and the driver), a server host and `generators` load hosts."""
    if not NAME.fullmatch(name):
        raise LabError(f"lab name {name!r}: 1 to 8 lower-case letters or digits")
    if not 1 <= generators <= MAX_GENERATORS:
        raise LabError(f"--generators must be 1..{MAX_GENERATORS}, got {generators}")
    if rate_mbit is not None and not 0 < rate_mbit <= MAX_RATE_MBIT:
        raise LabError(f"--rate-mbit must be above 0 and at most {MAX_RATE_MBIT}, got {rate_mbit}")
    if not 0 <= delay_ms <= MAX_DELAY_MS:
        raise LabError(f"--delay-ms must be 0..{MAX_DELAY_MS}, got {delay_ms}")
    if not 0 <= loss_pct < 100:
        raise LabError(f"--loss-pct must be at least 0 and below 100, got {loss_pct}")
    roles = [(HEAD, {}), (SERVER, {SERVER_RESOURCE: 1.0})]
    roles += [(f"{GENERATOR}{i}", {LOADGEN_RESOURCE: 1.0}) for i in range(1, generators + 1)]
    hosts = tuple(
        Host(role, f"{PREFIX}{name}-{role}", str(SUBNET[index]), resources)
        for index, (role, resources) in enumerate(roles, start=1)
    )
    return Lab(name, hosts, rate_mbit, delay_ms, loss_pct)


def is_lab_namespace(netns: str) -> str | None:
    """The lab name a namespace belongs to, if it is one of a lab's."""
    found = re.fullmatch(rf"{re.escape(PREFIX)}([a-z0-9]+)-[a-z0-9]+", netns)
    return found.group(1) if found else None
