"""Shaped links: real namespaces, real tc, real sockets on the namespace's loopback."""

import os
import socket
import subprocess
import threading
import time

from serverlab.base import delayline, owner
from serverlab.run.host import shapedlink

PAYLOAD_BYTES = 2_000_000


def _serve_once(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.sendall(b"x" * PAYLOAD_BYTES)


def _listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


def _download(port: int) -> tuple[int, float]:
    started = time.monotonic()
    received = 0
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        while chunk := conn.recv(65536):
            received += len(chunk)
    return received, time.monotonic() - started


def _timed_download(run=lambda f, *a: f(*a)) -> tuple[int, float]:
    """A 2 MB download; `run` makes the sockets (so in a namespace when it is ns.call)."""
    listener = run(_listener)
    server = threading.Thread(target=_serve_once, args=(listener,))
    server.start()
    try:
        return run(_download, listener.getsockname()[1])
    finally:
        server.join(timeout=30)
        listener.close()


def test_a_10_mbit_link_takes_its_time_and_plain_loopback_does_not():
    with shapedlink.shaped_namespace(rate_mbit=10) as ns:
        received, shaped_s = _timed_download(ns.call)
    assert received == PAYLOAD_BYTES
    # 2 MB at 10 Mbit/s is 1.6 s; allow for TCP's ramp and the token bucket's burst.
    assert 1.3 < shaped_s < 2.6, shaped_s
    received, plain_s = _timed_download()
    assert received == PAYLOAD_BYTES
    assert plain_s < 0.4, plain_s


def test_the_namespace_has_its_own_loopback_and_is_deleted_after():
    with shapedlink.shaped_namespace(rate_mbit=80) as ns:
        assert ns.name in shapedlink.existing()
        links = subprocess.run(
            ns.command(["ip", "-o", "link"]), capture_output=True, text=True, check=True
        ).stdout
        assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
        qdisc = subprocess.run(
            ns.command(["tc", "qdisc", "show", "dev", "lo"]), capture_output=True, text=True
        ).stdout
        assert "tbf" in qdisc and "80Mbit" in qdisc
        shell = subprocess.run(
            ["/bin/sh", "-c", ns.shell("readlink /proc/self/ns/net")],
            capture_output=True,
            text=True,
        ).stdout
        assert shell.strip() != os.readlink("/proc/self/ns/net")
    assert ns.name not in shapedlink.existing()


def test_a_delay_nothing_here_can_apply_is_reported_not_fatal(monkeypatch, tmp_path):
    # No delay line built: only netem, if this kernel has it, can delay.
    monkeypatch.setenv(delayline.DELAYLINE_ENV, str(tmp_path / "not-built"))
    with shapedlink.shaped_namespace(rate_mbit=10, delay_ms=50) as ns:
        qdisc = subprocess.run(
            ns.command(["tc", "qdisc", "show", "dev", "lo"]), capture_output=True, text=True
        ).stdout
        assert ns.delay_applied == ("netem" in qdisc) == (ns.delay_by == "netem")
        assert "tbf" in qdisc
        assert ns.metadata()["delay_applied"] == ns.delay_applied
    assert shapedlink.delay_method() == ("netem" if shapedlink.netem_available() else None)


def test_a_delay_is_applied_by_netem_or_else_by_the_delay_line():
    with shapedlink.shaped_namespace(rate_mbit=10, delay_ms=25) as ns:
        meta = ns.metadata()
    assert meta["delay_applied"] and meta["delay_by"] == shapedlink.delay_method()
    assert meta["delay_by"] == ("netem" if shapedlink.netem_available() else "delayline")
    assert 45 <= meta["rtt_ms"] <= 55, meta


def test_an_exception_inside_still_deletes_the_namespace():
    name = None
    try:
        with shapedlink.shaped_namespace(rate_mbit=10) as ns:
            name = ns.name
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert name and name not in shapedlink.existing()


def test_stale_namespaces_of_dead_runs_are_reaped_and_live_ones_kept():
    dead = subprocess.Popen(["sleep", "10"])
    mark = owner.token(dead.pid).replace(".", "-")
    dead.kill()
    dead.wait()
    stale = f"{shapedlink.PREFIX}{mark}-0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    with shapedlink.shaped_namespace(rate_mbit=10) as live:
        reaped = shapedlink.reap_stale()
        assert stale in reaped
        assert live.name not in reaped and live.name in shapedlink.existing()
    assert stale not in shapedlink.existing()
