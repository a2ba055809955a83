"""Issue 35, item 5: the engine's slowloris beside slowhttptest's (Debian), on two contestants.

For each server (a fresh start per tool, pinned to SERVER_CPU; each tool on GEN_CPU):
- slowhttptest -H: CONNS connections opened at RATE per second, a header line every
  INTERVAL seconds, for LENGTH seconds; its own CSV says, per second, how many connections
  it holds and whether its probe (a new connection, answered within PROBE_S) got through.
- the engine: one plan with two client groups, the same slowloris (CONNS connections, a line
  every INTERVAL seconds) and a probe group (one new connection per second, timeout
  PROBE_S), so its "service available" is its probe's answers per second.
- both runs: the server's open descriptors each second, from /proc (the kernel's count), the
  one view that belongs to neither tool.

Prints, per server and tool: the most connections the tool says it held, the server's
most descriptors, the seconds the probe was answered (of the seconds after the attack's
connections were all open), and the first second it was not. The two tools open
connections at different paces (slowhttptest RATE per second, the engine all at once), so
the first seconds differ by design; the comparison is of what holds after.

Usage: .venv/bin/python bench/slowloris-vs-slowhttptest.py   (env: SERVERS, CONNS=400,
RATE=200, INTERVAL=5, LENGTH=30, PROBE_S=3, GEN_CPU=0, SERVER_CPU=1, SET=k=v,...)
Needs: slowhttptest (`make bench` installs it), the contestants built (make build).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer

ROOT = Path(__file__).resolve().parent.parent
ENGINE = Path(os.environ.get("ENGINE", ROOT / "engine/target/release/serverlab-load"))
SERVERS = os.environ.get("SERVERS", "java-tomcat-blocking node-http").split()
CONNS = int(os.environ.get("CONNS", "400"))
RATE = int(os.environ.get("RATE", "200"))
INTERVAL = int(os.environ.get("INTERVAL", "5"))
LENGTH = int(os.environ.get("LENGTH", "30"))
PROBE_S = int(os.environ.get("PROBE_S", "3"))
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = os.environ.get("SERVER_CPU", "1")
# Tunables for every server, "k=v,k=v": e.g. SET=max_connections=300 caps Tomcat's
# connections below the attack's, to see both tools agree on a server that falls.
SETTINGS = dict(pair.split("=", 1) for pair in os.environ.get("SET", "").split(",") if pair)


class FdSampler(threading.Thread):
    """The server process tree's open descriptors once a second (/proc/PID/fd)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.counts, self.stop = pid, [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                self.counts.append(len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                self.counts.append(0)


def server_pid(server: ContestantServer) -> int:
    """The process that holds the sockets: the start command's exec'd process."""
    return server.process.pid


def run_slowhttptest(server: ContestantServer, work: Path) -> dict:
    prefix = work / "sht"
    command = ["taskset", "-c", GEN_CPU, "slowhttptest", "-H", "-c", str(CONNS), "-r", str(RATE)]
    command += ["-i", str(INTERVAL), "-l", str(LENGTH), "-p", str(PROBE_S), "-s", "8192"]
    command += ["-u", f"http://127.0.0.1:{server.port}/perf", "-g", "-o", str(prefix)]
    subprocess.run(command, capture_output=True, text=True, timeout=LENGTH + 60, check=False)
    with open(f"{prefix}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    held = [int(row["Connected"]) for row in rows]
    available = [int(row["Service Available"]) > 0 for row in rows]
    return {"held": max(held, default=0), "available": available, "settled_s": CONNS // RATE}


def engine_plan(server: ContestantServer) -> dict:
    slow = {"name": "slow", "connections": CONNS}
    slow["behaviour"] = {"kind": "slowloris", "interval_ms": INTERVAL * 1000}
    probe = {"name": "probe", "connections": 1, "behaviour": {"kind": "new-connection"}}
    probe["pacer"] = {"kind": "open", "rate": 1}
    return {
        "target": f"http://127.0.0.1:{server.port}/perf",
        "duration_s": LENGTH,
        "interval_ms": 1000,
        "timeout_ms": PROBE_S * 1000,
        "groups": [slow, probe],
    }


def run_engine(server: ContestantServer, work: Path) -> dict:
    plan = work / "plan.json"
    plan.write_text(json.dumps(engine_plan(server)))
    command = ["taskset", "-c", GEN_CPU, str(ENGINE), "--plan", str(plan), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=LENGTH + 60)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    intervals = [line for line in lines if line.get("type") == "interval"]
    if not intervals:
        sys.exit(f"slowloris-vs-slowhttptest: the engine wrote no interval line: {done.stderr}")
    # A second is down when a probe failed in it (slowhttptest judges each probe the same
    # way): counting answers per second instead would alias a 1/s probe with 1 s lines.
    available = [sum(line["groups"]["probe"]["errors"].values()) == 0 for line in intervals]
    held = [line["groups"]["slow"].get("open_connections", 0) for line in intervals]
    return {"held": max(held, default=0), "available": available, "settled_s": 1}


def measure(name: str, tool) -> dict:
    with (
        tempfile.TemporaryDirectory(prefix="serverlab-slowloris-") as folder,
        ContestantServer(find(name), cpus=SERVER_CPU, settings=SETTINGS) as server,
    ):
        sampler = FdSampler(server_pid(server))
        sampler.start()
        result = tool(server, Path(folder))
        sampler.stop.set()
        sampler.join()
        alive = server.process.poll() is None
    return {**result, "server_fds": max(sampler.counts, default=0), "alive": alive}


def line(name: str, tool: str, figures: dict) -> str:
    after = figures["available"][figures["settled_s"] :]
    answered = sum(after)
    first_down = next((i for i, up in enumerate(figures["available"]) if not up), None)
    down = "never" if first_down is None else f"s {first_down}"
    return (
        f"| {name} | {tool} | {figures['held']} | {figures['server_fds']} | "
        f"{answered}/{len(after)} | {down} | {'yes' if figures['alive'] else 'NO'} |"
    )


def main() -> None:
    if not shutil.which("slowhttptest"):
        sys.exit("slowloris-vs-slowhttptest: slowhttptest is missing (make bench installs it)")
    print(f"load average before: {os.getloadavg()[0]:.2f}; {CONNS} connections, a line every")
    print(f"{INTERVAL} s, {LENGTH} s, probe timeout {PROBE_S} s")
    columns = ("server", "tool", "held (tool)", "server fds (max)", "probe answered")
    print("| " + " | ".join((*columns, "first down", "alive")) + " |")
    print("|---|---|---|---|---|---|---|")
    for name in SERVERS:
        for tool, run in (("slowhttptest", run_slowhttptest), ("serverlab-load", run_engine)):
            print(line(name, tool, measure(name, run)), flush=True)
            time.sleep(2)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
