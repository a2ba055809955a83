"""The virtual lab's links on their own (no Ray nodes): real namespaces, the real delay line
(or netem where the kernel has it) and real TCP between two of the lab's hosts."""

import os
import socket
import subprocess

import pytest

from serverlab.base import delayline, owner, scratch
from serverlab.base.netns import Namespace, existing
from serverlab.lab import network
from serverlab.lab.topology import plan_lab

# Beside the virtual lab's own tests, never at the same time: one pytest -n worker takes them all.
pytestmark = pytest.mark.xdist_group("lab")

DELAY_MS = 10


@pytest.fixture
def delayed_lab():
    lab = plan_lab(f"n{os.getpid() % 100000}", 1, rate_mbit=100, delay_ms=DELAY_MS)
    record = network.build(lab)
    try:
        yield lab, record
    finally:
        network.remove(lab)


def test_a_lab_link_takes_twice_the_one_way_delay_between_two_hosts(delayed_lab):
    lab, record = delayed_lab
    assert record["delay_by"] in ("netem", "delayline") and record["delay_ms"] == DELAY_MS
    # Measured again here, from the server's side this time, beside the record's own figure.
    again = delayline.connect_rtt_ms(
        Namespace(lab.server.netns), Namespace(lab.generators[0].netns), lab.generators[0].address
    )
    for rtt in (record["rtt_ms"], again["rtt_ms"]):
        assert abs(rtt - 2 * DELAY_MS) <= 0.1 * 2 * DELAY_MS, (record, again)
    # Every pair of hosts crosses the same delay: the head to the server too.
    head = delayline.connect_rtt_ms(
        Namespace(lab.head.netns), Namespace(lab.server.netns), lab.server.address
    )
    assert abs(head["rtt_ms"] - 2 * DELAY_MS) <= 0.1 * 2 * DELAY_MS, head


def test_a_delayed_lab_host_has_no_route_out_of_the_lab(delayed_lab):
    lab, _ = delayed_lab
    routes = subprocess.run(
        Namespace(lab.server.netns).command(["ip", "-4", "route", "show"]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "default" not in routes and routes.strip().startswith("198.18.0.0/24"), routes

    def reach(address: str) -> OSError | None:
        try:
            socket.create_connection((address, 80), timeout=2).close()
        except OSError as err:
            return err
        return None

    refused = Namespace(lab.server.netns).call(reach, "198.51.100.1")
    assert isinstance(refused, OSError) and refused.errno == 101, refused  # ENETUNREACH


def test_a_lab_whose_links_are_removed_leaves_no_forwarder_and_no_namespace():
    lab = plan_lab(f"m{os.getpid() % 100000}", 1, delay_ms=1, loss_pct=1)
    record = network.build(lab)
    mark = owner.lab_mark(lab.name)
    if record["delay_by"] == "delayline":
        assert len(owner.owned_by(mark)) == len(lab.hosts), "one forwarder a host"
    network.remove(lab)
    assert owner.owned_by(mark) == []
    assert not [n for n in existing() if n in lab.namespaces()]
    assert not scratch.lab_folder(lab.name).exists(), "a later run would take it for a dead lab"
