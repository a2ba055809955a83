"""The virtual lab's links on their own (no Ray nodes): real namespaces, the real delay line
(or netem where the kernel has it) and real TCP between two of the lab's hosts.

Each lab here is made by `manage.up` with its state file, as a user's is: a lab built
without one is a dead lab's leftovers to any `serverlab run` on another pytest worker, whose
start reaps it (the namespace of a generator once vanished mid-test that way)."""

import os
import socket
import subprocess

import pytest

from serverlab.base import delayline, owner, scratch
from serverlab.base.netns import Namespace, existing
from serverlab.lab import manage

# Beside the virtual lab's own tests, never at the same time: one pytest -n worker takes them all.
pytestmark = pytest.mark.xdist_group("lab")

DELAY_MS = 10


@pytest.fixture
def delayed_lab():
    name = f"n{os.getpid() % 100000}"
    lab = manage.up(1, rate_mbit=100, name=name, delay_ms=DELAY_MS, ray_nodes=False)
    try:
        yield lab, manage.link(name)
    finally:
        manage.down(name)


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


def test_a_lab_in_use_outlives_the_reaping_another_runs_start_does(delayed_lab):
    lab, _ = delayed_lab
    assert lab.name not in manage.reap_stale()  # what `serverlab run` does as it starts
    assert set(lab.namespaces()) <= set(existing())


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
    name = f"m{os.getpid() % 100000}"
    lab = manage.up(1, name=name, delay_ms=1, loss_pct=1, ray_nodes=False)
    mark = owner.lab_mark(lab.name)
    if manage.link(name)["delay_by"] == "delayline":
        assert len(owner.owned_by(mark)) == len(lab.hosts), "one forwarder a host"
    manage.down(name)
    assert owner.owned_by(mark) == []
    assert not [n for n in existing() if n in lab.namespaces()]
    assert not scratch.lab_folder(lab.name).exists(), "a later run would take it for a dead lab"
