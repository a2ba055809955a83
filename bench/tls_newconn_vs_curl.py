#!/usr/bin/env python3
"""The engine's latency on new TLS connections beside independent clients' (issue 32, item 5).

For every built contestant that claims `tls`, one server at a time (`ContestantServer`, its own
throwaway CA, ECDSA P-256), warmed first by WARM_REQUESTS requests of the Python client and a
WARMUP_S run of the engine, then, each timing the connect, a full handshake and GET /perf:

- serverlab-load, a new connection per request in an open loop (-R RATE -c CONNS -d DURATION),
  full handshakes (--tls-resume off), and again with resumption on: the p50 of its latency
  (from the intended send time to the answer's end);
- a Python client (CPython's `http.client` over OpenSSL, TCP_NODELAY on as curl has it),
  REQUESTS new connections one after another in one warm process, `openssl s_time`-style:
  its p50;
- curl, one process per request, REQUESTS of them: the p50 of `time_total`. Shown, not judged:
  a fresh process per request pays its own cold start inside `time_total` (OpenSSL's first
  use, page faults), several ms more than the Python client on a loaded machine.

A row passes when the engine's full-handshake p50 is within 1 ms or 2x of the Python client's,
whichever is larger, and its resumed p50 is not above that band (a resumed handshake does less
than the client's full one, so only its upper side applies; node-http stalled on resumed
handshakes only). The default rate is low (20/s on at most 4 connections) so that every
contestant sustains it: a JVM at 100 full handshakes/s on this shared machine queues them for
seconds, and that is the server's limit, not the client's. The machine's load average is
printed before and after: the figures are noisy on a shared machine.

Usage: .venv/bin/python bench/tls_newconn_vs_curl.py [--rate 20] [--conns 4] [--duration 5]
[--requests 100] [NAME ...]   (SERVERLAB_ENGINE=path measures another engine build)
Needs: curl, a built engine (cd engine && cargo build --release --locked), built contestants.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path

from serverlab.contestant.manifest import Manifest, discover, find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import engine_binary

# A JVM's first TLS handshakes take hundreds of ms each (JSSE's start, the JIT): the client's
# requests and the engine's run before the measured ones.
WARM_REQUESTS = 50
WARMUP_S = 5
HEADER = ["contestant", "engine", "resumed", "python", "curl", "engine/python", "within",
          "engine answers"]  # fmt: skip
WIDTHS = [21, 8, 8, 8, 8, 14, 7, 0]


def tls_contestants() -> list[str]:
    """Names of the built contestants that claim `tls`."""
    found = [m for m in discover() if isinstance(m, Manifest)]
    return sorted(m.name for m in found if "tls" in m.implements and m.is_built())


def engine_p50_ms(url: str, ca: Path, args, resume: str, duration: float) -> tuple[float, str]:
    """The engine's latency p50 (ms; NaN when nothing was answered) and a note of its
    answers and errors."""
    argv = [str(engine_binary()), url, "--tls-ca", str(ca), "--new-connection"]
    argv += ["-R", str(args.rate), "-c", str(args.conns), "-d", f"{duration}s"]
    argv += ["--tls-resume", resume, "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines else {}
    if summary.get("type") != "summary":
        return math.nan, f"engine exit {done.returncode}: {done.stderr.strip()[:80]}"
    errors = {kind: n for kind, n in summary["errors"].items() if n}
    p50 = summary["latency_us"]["p50"] / 1000 if summary["ok"] else math.nan
    return p50, f"{summary['ok']} ok, errors {errors or 0}"


def python_p50_ms(port: int, ca: Path, count: int) -> float:
    """The Python client's median time (ms) for a new connection, its full handshake (no
    session kept) and GET /perf read to its end, `count` of them one after another."""
    context = ssl.create_default_context(cafile=str(ca))
    times = []
    for _ in range(count):
        began = time.perf_counter()
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        connection.request("GET", "/perf")
        connection.getresponse().read()
        connection.close()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def curl_p50_ms(url: str, ca: Path, count: int) -> float:
    """curl's median `time_total` (ms) over `count` requests, one new process each."""
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}", "--cacert", str(ca), url]
    times = [
        float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        for _ in range(count)
    ]
    return statistics.median(times) * 1000


def within(engine: float, reference: float) -> bool:
    """Within 1 ms or 2x, whichever is larger (False for NaN)."""
    return abs(engine - reference) <= 1.0 or 0.5 <= engine / reference <= 2.0


def not_above(engine: float, reference: float) -> bool:
    """Not above the upper side of `within`'s band (False for NaN)."""
    return engine <= max(reference + 1.0, 2.0 * reference)


def measure(name: str, args) -> list[str]:
    with ContestantServer(find(name)) as server:
        url = f"https://127.0.0.1:{server.tls_port}/perf"
        ca, port = server.tls.ca_cert, server.tls_port
        python_p50_ms(port, ca, WARM_REQUESTS)
        engine_p50_ms(url, ca, args, "on", WARMUP_S)
        python = python_p50_ms(port, ca, args.requests)
        off, note = engine_p50_ms(url, ca, args, "off", args.duration)
        on, _ = engine_p50_ms(url, ca, args, "on", args.duration)
        curl = curl_p50_ms(url, ca, args.requests)
    figures = [f"{off:.2f}", f"{on:.2f}", f"{python:.2f}", f"{curl:.2f}", f"{off / python:.2f}"]
    passed = within(off, python) and not_above(on, python)
    return [name, *figures, "yes" if passed else "NO", note]


def line(cells: list[str]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=True))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="contestants (default: every built TLS one)")
    parser.add_argument("--rate", type=int, default=20, help="engine arrivals per second")
    parser.add_argument("--conns", type=int, default=4, help="engine connections at most")
    parser.add_argument("--duration", type=float, default=5, help="engine seconds per run")
    parser.add_argument("--requests", type=int, default=100, help="Python's and curl's each")
    args = parser.parse_args()
    print(
        f"before: {load()}; engine -R {args.rate} -c {args.conns} -d {args.duration}s, "
        f"{args.requests} requests each for Python and curl; p50 in ms",
        flush=True,
    )
    print(line(HEADER), flush=True)
    passed = True
    for name in args.names or tls_contestants():
        row = measure(name, args)
        passed &= row[6] == "yes"
        print(line(row), flush=True)
    print(f"after: {load()}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
