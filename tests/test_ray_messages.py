"""What Ray sends a distributed run's driver when a node dies reaches the run's output cut
short: tests/data/ray-raylet-terminated.txt is one such message as Ray 2.60 sent it, captured
from a virtual lab whose generator node was killed (tests/test_cluster.py has the whole run),
with its 20 lines of the raylet's log (`[state-dump]` counters among them)."""

from pathlib import Path

import pytest
from ray._private import worker

from serverlab.cluster import driver

MESSAGE = (Path(__file__).parent / "data" / "ray-raylet-terminated.txt").read_text()


@pytest.fixture
def printer(monkeypatch):
    """Ray's own printer, wrapped as a driver's connect wraps it, restored afterwards."""
    monkeypatch.setattr(worker, "print_to_stdstream", worker.print_to_stdstream)
    driver._print_ray_messages_without_log_tails()
    return worker.print_to_stdstream


def sent(printer, message: str) -> None:
    printer({"lines": [message], "pid": "raylet", "is_err": False}, ignore_prefix=False)


def test_a_dead_raylets_message_is_printed_without_its_log_tail_and_once(printer, capsys):
    assert MESSAGE.count("[state-dump]") == 10 and len(MESSAGE.splitlines()) == 21
    sent(printer, MESSAGE)
    sent(printer, MESSAGE)  # each of the node's agents sends it
    out = capsys.readouterr().out
    assert "[state-dump]" not in out and "(raylet) accessor.cc" not in out
    (line,) = out.strip().splitlines()
    assert "Raylet is terminated. Termination is unexpected." in line
    assert line.endswith("(its log: raylet.out in that node's Ray session folder)")


def test_other_messages_from_ray_are_printed_whole(printer, capsys):
    dead = (
        "The node with node id: f120 and address: 198.18.0.4 has been marked dead because the "
        "detector has missed too many heartbeats from it.\n\t(1) raylet crashes unexpectedly"
    )
    sent(printer, dead)
    out = capsys.readouterr().out
    assert "has been marked dead" in out and "(1) raylet crashes unexpectedly" in out
