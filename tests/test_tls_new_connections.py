"""New TLS connections as an independent client sees them (issue 32, item 5): the engine's
latency p50 for a new TLS connection per request against go-nethttp is within 2x (or 1 ms) of
CPython's own client's (OpenSSL through `http.client`) against the same server. The engine
once left Nagle on there, so its request waited behind its unacknowledged Finished for the
server's 40 ms delayed ACK, and its p50 read ~44 ms against the client's ~3 ms.

Both sides take full handshakes (the engine with --tls-resume off; the client keeps no
session) and time the connect, the handshake and the exchange. The engine's p50 with
resumption on may be lower (it does less) but not above that band: node-http's stall came on
resumed handshakes only. It judges timing, so it runs alone.

The two clients take turns (ROUNDS of each; the engine's p50 is the median of its rounds',
the client's that of all its times), both on the engine's CPUs and the server on its own:
measured one after the other, a burst of the machine's other load in one client's seconds
could tell them apart. node-http's TLS port once left Nagle's algorithm on, and this
client's answers waited for its own delayed ACK (49 ms against the engine's 3), once in a
while or every time, as the two processes' CPUs fell."""

import http.client
import json
import os
import ssl
import statistics
import subprocess
import time

import pytest

from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import engine_binary
from serverlab.run.host.machine import Pinning

pytestmark = pytest.mark.alone

ROUNDS = 3
REQUESTS = 40  # the independent client's, a round
ROUND_S = 1.5  # the engine's, a round: about 150 new connections at 100 a second


def independent_times_ms(port: int, context: ssl.SSLContext, cpus: str) -> list[float]:
    """The times (ms) of new connections, each with its handshake and GET /perf, one at a
    time, from this thread pinned to the engine's CPUs while it runs."""
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})
    try:
        return _timed_requests(port, context)
    finally:
        os.sched_setaffinity(0, pinned)


def _timed_requests(port: int, context: ssl.SSLContext) -> list[float]:
    times = []
    for _ in range(REQUESTS):
        began = time.perf_counter()
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
        connection.request("GET", "/perf")
        answer = connection.getresponse()
        assert answer.status == 200 and len(answer.read()) == 84
        connection.close()
        times.append((time.perf_counter() - began) * 1000)
    return times


def engine_summary(port: int, ca, seconds: float, resume: str, priming: bool = False) -> dict:
    argv = ["taskset", "-c", Pinning.default().engine, str(engine_binary())]
    argv += [f"https://127.0.0.1:{port}/perf", "--tls-ca", str(ca)]
    argv += ["--new-connection", "--tls-resume", resume, "-R", "100", "-c", "10"]
    argv += ["-d", f"{seconds}s", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    summary = json.loads(done.stdout.splitlines()[-1])
    # The priming pass only takes the first handshakes out of the way: its rate is not judged
    # (node-http's first TLS handshakes answered 89 of 100 in its second on a busy machine).
    assert priming or summary["ok"] >= 95 * seconds, summary
    return summary


def p50_ms(summary: dict) -> float:
    return summary["latency_us"]["p50"] / 1000


@pytest.mark.parametrize("contestant", ["go-nethttp", "node-http"])
def test_the_engines_p50_on_new_tls_connections_is_an_independent_clients_within_2x(
    contestant,
):
    pinning = Pinning.default()
    with ContestantServer(find(contestant), cpus=pinning.server) as server:
        port, ca = server.tls_port, server.tls.ca_cert
        context = ssl.create_default_context(cafile=str(ca))
        engine_summary(port, ca, 1, "on", priming=True)  # the first handshakes out of the way
        fulls, times = [], []
        for _ in range(ROUNDS):
            fulls.append(engine_summary(port, ca, ROUND_S, "off"))
            times += independent_times_ms(port, context, pinning.engine)
        resumed = engine_summary(port, ca, 3, "on")
    assert all(full["tls_resumed"] == 0 for full in fulls) and resumed["tls_resumed"] > 0
    independent = statistics.median(times)
    engine = statistics.median(p50_ms(full) for full in fulls)
    said = f"independent client's p50 {independent:.2f} ms"
    # Within 2x or 1 ms, whichever is larger; a resumed handshake not above that band.
    high = max(2 * independent, independent + 1.0)
    low = min(independent / 2, independent - 1.0)
    assert low <= engine <= high, f"engine full-handshake p50 {engine:.2f} ms, {said}"
    assert p50_ms(resumed) <= high, f"engine resumed p50 {p50_ms(resumed):.2f} ms, {said}"
