"""The delay line's accuracy on real namespaces, real TUN devices and real TCP/UDP: the
round trip, the rate, the loss, the order, and that nothing is left behind.

Where the kernel has netem the shaped link uses it instead; these tests are about serverlab's
own forwarder, so they ask for it by hiding netem (`_delay_line_only`)."""

import os
import socket
import statistics
import threading
import time
from pathlib import Path

import pytest

from serverlab.base import delayline, owner
from serverlab.base.netns import Namespace, NetnsError
from serverlab.run.host import shapedlink

UDP_COUNT = 10_000
# Datagrams sent back to back before the sender yields: a burst the TUN queue (500) holds.
UDP_BURST = 50
BULK_BYTES = 3_000_000
SO_RCVBUFFORCE = 33


@pytest.fixture(autouse=True)
def _delay_line_only(monkeypatch):
    """These tests measure the forwarder, so netem (if this kernel had it) is not used."""
    monkeypatch.setattr(shapedlink, "_netem", lambda namespace: False)


def _client(ns: shapedlink.ShapedNamespace) -> Namespace:
    assert ns.delay_by == "delayline" and ns.client_netns
    return Namespace(ns.client_netns)


@pytest.mark.parametrize("delay_ms", [10, 50, 200])
def test_a_tcp_connect_takes_twice_the_one_way_delay(delay_ms):
    with shapedlink.shaped_namespace(rate_mbit=100, delay_ms=delay_ms, cpus="0") as ns:
        client = _client(ns)
        try:
            again = delayline.connect_rtt_ms(client, ns, ns.server_address)
        finally:
            client.close()
    print(f"delay {delay_ms} ms: rtt at setup {ns.rtt_ms} ms ({ns.connect_ms}), again {again}")
    for rtt in (ns.rtt_ms, again["rtt_ms"]):
        assert abs(rtt - 2 * delay_ms) <= 0.1 * 2 * delay_ms, (rtt, delay_ms)
    assert ns.metadata()["rtt_ms"] == ns.rtt_ms and ns.metadata()["delay_by"] == "delayline"


def _send_bulk(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.sendall(b"x" * BULK_BYTES)


def _receive_bulk(where: tuple[str, int]) -> tuple[int, float]:
    """Bytes and seconds after the first fifth arrived (TCP's slow start left out)."""
    received, started = 0, None
    with socket.create_connection(where, timeout=30) as conn:
        while chunk := conn.recv(65536):
            received += len(chunk)
            if started is None and received >= BULK_BYTES // 5:
                started, counted_from = time.monotonic(), received
    return received - counted_from, time.monotonic() - started


def test_a_bulk_tcp_transfer_runs_at_the_link_rate():
    with shapedlink.shaped_namespace(rate_mbit=10, delay_ms=10, cpus="0") as ns:
        client = _client(ns)
        listener = ns.call(delayline._listen, ns.server_address)
        sender = threading.Thread(target=_send_bulk, args=(listener,))
        sender.start()
        try:
            counted, seconds = client.call(_receive_bulk, listener.getsockname())
        finally:
            sender.join(timeout=30)
            listener.close()
            client.close()
    # Goodput: TCP's payload, 1448 of each 1500-byte IP packet the link paces.
    mbit = counted * 8 / seconds / 1e6 * 1500 / 1448
    cost = ns.forwarder["cpu_us_per_packet"]
    print(f"rate 10 Mbit/s: {mbit:.2f} Mbit/s of IP; {cost} us CPU per packet")
    assert abs(mbit - 10) <= 1.0, mbit
    assert sum(ns.forwarder["forwarded"]) > BULK_BYTES / 1500


def _udp_receiver(address: str) -> socket.socket:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Room for every datagram, so that only the link can lose one.
    receiver.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 * 1024 * 1024)
    receiver.bind((address, 0))
    return receiver


def _send_numbered(where: tuple[str, int]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for seq in range(UDP_COUNT):
            sender.sendto(seq.to_bytes(4, "big") + b"." * 60, where)
            if seq % UDP_BURST == UDP_BURST - 1:
                time.sleep(0.001)  # lets the forwarder drain the TUN device's queue


def _received(receiver: socket.socket, quiet_s: float = 1.0) -> list[int]:
    receiver.settimeout(quiet_s)
    got = []
    try:
        while True:
            got.append(int.from_bytes(receiver.recv(2048)[:4], "big"))
    except TimeoutError:
        return got


def _udp_across(ns: shapedlink.ShapedNamespace) -> list[int]:
    """Sends UDP_COUNT numbered datagrams from the client side; the numbers received."""
    client = _client(ns)
    receiver = ns.call(_udp_receiver, ns.server_address)
    try:
        client.call(_send_numbered, receiver.getsockname())
        return _received(receiver)
    finally:
        receiver.close()
        client.close()


def test_the_loss_rate_is_within_one_point_of_what_the_link_asks():
    with shapedlink.shaped_namespace(rate_mbit=100, delay_ms=5, loss_pct=5, cpus="0") as ns:
        got = _udp_across(ns)
    lost_pct = 100 * (UDP_COUNT - len(got)) / UDP_COUNT
    print(f"loss 5 %: {lost_pct:.2f} % of {UDP_COUNT} datagrams lost; {ns.forwarder}")
    assert abs(lost_pct - 5) <= 1, lost_pct
    assert ns.metadata()["loss_pct"] == 5


def test_no_packet_is_reordered_or_lost_at_a_constant_delay():
    with shapedlink.shaped_namespace(rate_mbit=100, delay_ms=20, cpus="0") as ns:
        got = _udp_across(ns)
    assert got == list(range(UDP_COUNT)), (len(got), statistics.mean(got) if got else None)


def _ours(name: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if name.encode() in cmdline and owner.mark_of(int(entry.name)) == owner.token():
            pids.append(int(entry.name))
    return pids


def test_the_forwarder_is_pinned_marked_and_leaves_nothing_behind():
    with shapedlink.shaped_namespace(rate_mbit=10, delay_ms=10, cpus="0") as ns:
        (pid,) = _ours("serverlab-delayline")
        assert os.sched_getaffinity(pid) == {0}
        names = [ns.name, ns.client_netns]
        assert all(name in shapedlink.existing() for name in names)
    assert not _ours("serverlab-delayline")
    assert not [name for name in names if name in shapedlink.existing()]
    assert not [d for d in os.listdir("/sys/class/net") if d.startswith("dl-")]
    assert ns.forwarder["forwarded"][0] >= delayline.PROBES  # the RTT probe's SYNs


def test_a_forwarder_that_cannot_start_fails_the_link_with_its_reason(monkeypatch, tmp_path):
    broken = tmp_path / "serverlab-delayline"
    broken.write_text("#!/bin/sh\necho 'no TUN here' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv(delayline.DELAYLINE_ENV, str(broken))
    # Only this process's namespaces: tests beside it (pytest -n) make their own.
    mark = owner.token().replace(".", "-")
    before = {name for name in shapedlink.existing() if mark in name}
    link = shapedlink.shaped_namespace(rate_mbit=10, delay_ms=10)
    with pytest.raises(NetnsError, match="no TUN here"), link:
        pass
    assert {name for name in shapedlink.existing() if mark in name} <= before
