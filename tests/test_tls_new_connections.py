"""New TLS connections as an independent client sees them (issue 32, item 5): the engine's
latency p50 for a new TLS connection per request against go-nethttp is within 2x (or 1 ms) of
CPython's own client's (OpenSSL through `http.client`) against the same server. The engine
once left Nagle on there, so its request waited behind its unacknowledged Finished for the
server's 40 ms delayed ACK, and its p50 read ~44 ms against the client's ~3 ms.

Both sides take full handshakes (the engine with --tls-resume off; the client keeps no
session) and time the connect, the handshake and the exchange. The engine's p50 with
resumption on may be lower (it does less) but not above that band: node-http's stall came on
resumed handshakes only. It judges timing, so it runs alone."""

import http.client
import json
import ssl
import statistics
import subprocess
import time

import pytest

from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import engine_binary

pytestmark = pytest.mark.alone

REQUESTS = 100


def independent_p50_ms(port: int, context: ssl.SSLContext) -> float:
    """The median time (ms) of a new connection, its handshake and GET /perf, one at a time."""
    times = []
    for _ in range(REQUESTS):
        began = time.perf_counter()
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
        connection.request("GET", "/perf")
        answer = connection.getresponse()
        assert answer.status == 200 and len(answer.read()) == 84
        connection.close()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def engine_summary(port: int, ca, seconds: float, resume: str, priming: bool = False) -> dict:
    argv = [str(engine_binary()), f"https://127.0.0.1:{port}/perf", "--tls-ca", str(ca)]
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
    with ContestantServer(find(contestant)) as server:
        port, ca = server.tls_port, server.tls.ca_cert
        context = ssl.create_default_context(cafile=str(ca))
        engine_summary(port, ca, 1, "on", priming=True)  # the first handshakes out of the way
        full = engine_summary(port, ca, 3, "off")
        resumed = engine_summary(port, ca, 3, "on")
        independent = independent_p50_ms(port, context)
    assert full["tls_resumed"] == 0 and resumed["tls_resumed"] > 0
    engine, said = p50_ms(full), f"independent client's p50 {independent:.2f} ms"
    # Within 2x or 1 ms, whichever is larger; a resumed handshake not above that band.
    high = max(2 * independent, independent + 1.0)
    low = min(independent / 2, independent - 1.0)
    assert low <= engine <= high, f"engine full-handshake p50 {engine:.2f} ms, {said}"
    assert p50_ms(resumed) <= high, f"engine resumed p50 {p50_ms(resumed):.2f} ms, {said}"
