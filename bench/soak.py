#!/usr/bin/env python3
"""`make soak`: does memory stay flat over an hour of held push connections? (issue 20, 13)

5,000 comet clients and 5,000 SSE clients at once, one event (e1) emitted every 5 s: 60
minutes against node-http, then 30 minutes against go-nethttp, one server at a time. The
load comes from the project's engine, two serverlab-load processes (one per behaviour, since
a plan holds one behaviour) pinned to CPU 0; the server runs as `serverlab serve` runs it
(ContestantServer) pinned to CPU 1, watched by the run's own Monitor
(serverlab.run.execution.monitor, 10 samples a second, as in a run).

Every minute one row: each engine's RSS (kernel, /proc/PID/status VmRSS), the server tree's
RSS, descriptors and threads (the Monitor's newest sample, from the kernel), the Monitor
thread's own CPU (kernel, /proc/self/task/TID/stat) and this process's RSS, and the
server's own counters (/stats: open comet requests and SSE streams, e1 deliveries).

The memory verdict is about boundedness, not about a slope taken at a fixed time: buffers
and heaps fill first (the engines' emit logs, a garbage collector's heap growing to its
target), and a fill is not a leak. Each RSS series (the engines' summed, the server's) is
judged by a plateau test on its samples once every client has joined (`plateau`):

- bounded: over the last third of them, the least-squares slope is under the limit (1 MiB
  per 10 minutes for the engines, 5 MiB for the server); the plateau is said to start at
  the earliest sample from which the slope to the end stays under it;
- filling: over the last third the slope is above the limit but under half the slope over
  the first third: the growth slows, its plateau lies beyond this soak (a longer SOAK_MIN
  may show it): inconclusive, not a leak;
- growing: the growth does not slow: a leak, or a buffer whose cap this soak cannot reach.

A phase passes when both series are bounded, 0 events are lost (the engines' own seq gaps,
plus e1 deliveries the server counted and the engines did not receive, read after the
emitter is stopped and the last event has had time to arrive), and the server still counts
every client open at the end (/stats `requests.open_push` and `sse.open`, 5,000 each).

SOAK_MIN=N shortens the whole soak to N minutes (both phases and the sample period scale by
N/90; the sample period stays at least 5 s); the plateau test reads the same shares of a
shorter phase, so a short soak gives fewer, noisier samples and more "filling" verdicts, never
a fill read as a leak. CLIENTS=5000, EMIT_MS=5000. Writes results/soak/<UTC time>/samples.csv
and summary.json; prints the table. Exits 0 when every phase passes, 3 when nothing failed
but some series is still filling, 1 otherwise.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base import httpclient, owner
from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import engine_binary
from serverlab.run.execution.monitor import Monitor

ROOT = Path(__file__).resolve().parent.parent
FULL_MIN = 90.0
PHASES = (("node-http", 60.0), ("go-nethttp", 30.0))  # minutes of a full soak
ENGINE_CPU, SERVER_CPU = "0", "1"
MIB = 1024 * 1024
ENGINE_LIMIT_MIB, SERVER_LIMIT_MIB = 1.0, 5.0  # per 10 minutes
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Timing:
    """A phase's schedule in seconds, scaled from the full soak's."""

    length_s: float
    scale: float

    @property
    def sample_s(self) -> float:
        return max(5.0, 60.0 * self.scale)

    @property
    def ramp_s(self) -> float:
        return min(60.0, self.length_s / 10)

    @property
    def joined_s(self) -> float:
        # Every client has joined a sample after the ramp: the plateau test starts there.
        return self.ramp_s + self.sample_s

    @property
    def quiet_s(self) -> float:
        # The emitter stops this long before the engines do, so the last event is read.
        return min(20.0, max(8.0, self.length_s / 20))


@dataclass
class Phase:
    server: str
    timing: Timing
    rows: list[dict] = field(default_factory=list)
    end: dict = field(default_factory=dict)  # the server's /stats once the emitter stopped
    summaries: dict = field(default_factory=dict)  # each engine's summary line, by behaviour
    live_server: ContestantServer | None = None


def kib_of(pid: int) -> int:
    """VmRSS of one process in KiB (0 once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def thread_cpu_s(tid: int) -> float:
    """User + system CPU seconds of one of this process's threads."""
    stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    fields = stat.rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def start_engine(kind: str, port: int, clients: int, timing: Timing, out: Path):
    path = {"comet": "/push", "sse": "/sse"}[kind]
    argv = [
        "taskset", "-c", ENGINE_CPU, str(engine_binary()), f"http://127.0.0.1:{port}{path}",
        f"--{kind}", "e1", "--users", str(clients), "--ramp-up", f"{timing.ramp_s:g}s",
        "--hold", f"{timing.length_s - timing.ramp_s:g}s", "--interval", "60s", "--json",
    ]  # fmt: skip
    return owner.popen(argv, stdout=out.open("wb"), stderr=(out.with_suffix(".err")).open("wb"))


def stats(server: ContestantServer) -> dict:
    return server.stats(timeout_s=10.0)


def post(port: int, path: str, body: dict) -> None:
    response = httpclient.post_json(port, path, body)
    if response.status != 200:
        raise SystemExit(f"soak: POST {path} answered {response.status}")


def sample_row(phase, t, engines, monitor, cpu_before, wall_s) -> dict:
    """One minute's row; cpu_before is the Monitor thread's CPU at the previous row."""
    latest = monitor.samples[-1] if monitor.samples else None
    server_stats = stats_or_empty(phase)
    monitor_cpu = thread_cpu_s(monitor._thread.native_id)
    return {
        "server": phase.server,
        "t_s": round(t, 1),
        "engine_comet_rss_kib": kib_of(engines["comet"].pid),
        "engine_sse_rss_kib": kib_of(engines["sse"].pid),
        "server_rss_kib": latest.rss_bytes // 1024 if latest else 0,
        "server_fds": latest.fds if latest else 0,
        "server_threads": latest.threads if latest else 0,
        "monitor_cpu_pct": round(100 * (monitor_cpu - cpu_before) / wall_s, 3),
        "monitor_cpu_s": round(monitor_cpu, 2),
        "monitor_rss_kib": kib_of(os.getpid()),
        "monitor_samples": len(monitor.samples),
        "open_push": server_stats.get("requests", {}).get("open_push"),
        "sse_open": server_stats.get("sse", {}).get("open"),
        "e1_deliveries": server_stats.get("events", {}).get("e1", {}).get("deliveries"),
    }


def stats_or_empty(phase: Phase) -> dict:
    try:
        return stats(phase.live_server)
    except httpclient.HttpError:
        return {}


def slope_mib_per_10min(rows: list[dict], key, after_s: float) -> float | None:
    """Least-squares slope of key(row) (KiB) against t_s over rows after `after_s`."""
    return slope([(row["t_s"], key(row)) for row in rows if row["t_s"] >= after_s])


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, KiB) points, in MiB per 10 minutes."""
    if len(points) < 2:
        return None
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return (num / den) * 600 / 1024 if den else None


# The plateau test's windows: the last third of the samples judges, the first third is
# what the growth slowed from; fewer than MIN_POINTS samples in a third judge nothing.
SHARE, MIN_POINTS, SLOWED = 3, 8, 0.5


def plateau(points: list[tuple[float, float]], limit: float) -> dict:
    """The plateau test of one RSS series, (seconds, KiB) points from the moment every
    client has joined: `verdict` bounded, filling, growing or too-short, the slopes over
    the first and the last third (MiB per 10 minutes), and `plateau_s`: the earliest sample
    from which the slope to the end is under `limit` (None if none)."""
    third = len(points) // SHARE
    if third < MIN_POINTS:
        return {"verdict": "too-short", "first": None, "last": None, "plateau_s": None}
    first, last = slope(points[:third]), slope(points[-third:])
    if last is None:
        return {"verdict": "too-short", "first": first, "last": None, "plateau_s": None}
    if last < limit:
        verdict = "bounded"
    elif first is not None and last < SLOWED * first:
        verdict = "filling"
    else:
        verdict = "growing"
    tails = (i for i in range(len(points) - third + 1) if slope(points[i:]) < limit)
    start = next(tails, None)
    return {
        "verdict": verdict,
        "first": first,
        "last": last,
        "plateau_s": None if start is None else points[start][0],
    }


def run_phase(phase: Phase, clients: int, emit_ms: int, folder: Path) -> None:
    timing = phase.timing
    server = ContestantServer(find(phase.server), cpus=SERVER_CPU)
    phase.live_server = server
    server.start()
    engines = {}
    try:
        post(server.port, "/event/set", {"name": "e1", "interval_ms": emit_ms})
        with Monitor(server.process.pid) as monitor:
            for kind in ("comet", "sse"):
                out = folder / f"{phase.server}-{kind}.jsonl"
                engines[kind] = start_engine(kind, server.port, clients, timing, out)
            hold_and_sample(phase, engines, monitor)
            post(server.port, "/event/clear", {})
            time.sleep(timing.quiet_s / 2)  # the last emit cycle reaches every client
            phase.end = stats(server)
            for proc in engines.values():
                proc.wait(timeout=timing.quiet_s + 120)
    finally:
        for proc in engines.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stop()
        server.cleanup()
    phase.summaries = {k: read_summary(folder / f"{phase.server}-{k}.jsonl") for k in engines}


def hold_and_sample(phase: Phase, engines: dict, monitor: Monitor) -> None:
    """One row per sample period until the emitter is due to stop."""
    timing = phase.timing
    start = time.monotonic()
    stop_at = start + timing.length_s - timing.quiet_s
    tick, last_wall, cpu_before = start, start, 0.0
    while True:
        tick += timing.sample_s
        if tick > stop_at:
            time.sleep(max(0.0, stop_at - time.monotonic()))
            return
        time.sleep(max(0.0, tick - time.monotonic()))
        now = time.monotonic()
        row = sample_row(phase, now - start, engines, monitor, cpu_before, now - last_wall)
        cpu_before, last_wall = row["monitor_cpu_s"], now
        phase.rows.append(row)
        print(
            f"  {phase.server} t={row['t_s']:>7.0f}s engine RSS "
            f"{row['engine_comet_rss_kib'] + row['engine_sse_rss_kib']} KiB, server RSS "
            f"{row['server_rss_kib']} KiB fds {row['server_fds']} threads "
            f"{row['server_threads']}, open {row['open_push']}+{row['sse_open']}",
            flush=True,
        )


def read_summary(path: Path) -> dict:
    for line in reversed(path.read_text().splitlines()):
        line_obj = json.loads(line)
        if line_obj.get("type") == "summary":
            return line_obj
    raise SystemExit(f"soak: no engine summary in {path} (see {path.with_suffix('.err')})")


def series(rows: list[dict], key, after_s: float) -> list[tuple[float, float]]:
    return [(row["t_s"], key(row)) for row in rows if row["t_s"] >= after_s]


def verdict(phase: Phase, clients: int) -> dict:
    after = phase.timing.joined_s
    engine = plateau(
        series(phase.rows, lambda r: r["engine_comet_rss_kib"] + r["engine_sse_rss_kib"], after),
        ENGINE_LIMIT_MIB,
    )
    server = plateau(series(phase.rows, lambda r: r["server_rss_kib"], after), SERVER_LIMIT_MIB)
    received = sum(s["events"]["received"] for s in phase.summaries.values())
    gaps = sum(s["events"]["lost"] for s in phase.summaries.values())
    delivered = phase.end["events"]["e1"]["deliveries"]
    lost = gaps + max(0, delivered - received)
    errors = sum(sum(s["errors"].values()) for s in phase.summaries.values())
    open_push, sse_open = phase.end["requests"]["open_push"], phase.end["sse"]["open"]
    checks = {
        "engine_rss_bounded": engine["verdict"] == "bounded",
        "server_rss_bounded": server["verdict"] == "bounded",
        "events_lost": lost == 0,
        "connections_counted": open_push >= clients and sse_open >= clients,
    }
    memory = {engine["verdict"], server["verdict"]}
    failed = "growing" in memory or not (checks["events_lost"] and checks["connections_counted"])
    # Still filling (or too few samples) is not a leak: nothing failed, nothing was shown.
    unshown = bool(memory & {"filling", "too-short"})
    return {
        "server": phase.server,
        "length_s": phase.timing.length_s,
        "joined_s": after,
        "samples_after_joined": sum(1 for r in phase.rows if r["t_s"] >= after),
        "engine_rss": engine,
        "server_rss": server,
        "server_e1_deliveries": delivered,
        "engine_events_received": received,
        "engine_seq_gaps": gaps,
        "events_lost": lost,
        "engine_errors": errors,
        "engine_connections_opened": sum(s["connections_opened"] for s in phase.summaries.values()),
        "server_open_push_at_end": open_push,
        "server_sse_open_at_end": sse_open,
        "monitor_cpu_pct_mean": mean([r["monitor_cpu_pct"] for r in phase.rows]),
        # Not judged: the Monitor keeps every sample of a test in memory, by design.
        "monitor_rss_mib_per_10min": slope_mib_per_10min(
            phase.rows, lambda r: r["monitor_rss_kib"], after
        ),
        "checks": checks,
        "pass": all(checks.values()),
        "result": "FAIL" if failed else ("INCONCLUSIVE" if unshown else "PASS"),
    }


def mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def fmt(value, spec=".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(verdicts: list[dict], clients: int) -> None:
    print(f"\nsoak: {clients} comet + {clients} SSE clients, e1 every 5 s")
    head = f"{'server':<12} {'minutes':>7} {'engines MiB/10m':>30} {'server MiB/10m':>30}"
    print(f"{head} {'lost':>6} {'open at end':>13} {'monitor CPU%':>12}  result")
    for v in verdicts:
        counted = f"{v['server_open_push_at_end']}+{v['server_sse_open_at_end']}"
        print(
            f"{v['server']:<12} {v['length_s'] / 60:>7.1f} {rss_cell(v['engine_rss']):>30} "
            f"{rss_cell(v['server_rss']):>30} {v['events_lost']:>6} {counted:>13} "
            f"{fmt(v['monitor_cpu_pct_mean']):>12}  {v['result']}"
        )
    print(
        "RSS: kernel (VmRSS; server: the Monitor's tree sum), least-squares slopes over the "
        "first -> last third\nof the samples once every client joined, the verdict, and where "
        "the plateau starts (s);\nlost and open at end: the engines' summaries and the "
        "server's /stats; monitor CPU: its thread's, per sample period (kernel)."
    )


def rss_cell(judged: dict) -> str:
    where = "" if judged["plateau_s"] is None else f" @{judged['plateau_s']:.0f}"
    slopes = f"{fmt(judged['first'], '.2f')} -> {fmt(judged['last'], '.2f')}"
    return f"{slopes} {judged['verdict']}{where}"


def write_results(folder: Path, phases: list[Phase], verdicts: list[dict]) -> None:
    rows = [row for phase in phases for row in phase.rows]
    if rows:
        with (folder / "samples.csv").open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    (folder / "summary.json").write_text(json.dumps({"phases": verdicts}, indent=2) + "\n")


def main() -> int:
    minutes = float(os.environ.get("SOAK_MIN", FULL_MIN))
    clients = int(os.environ.get("CLIENTS", 5000))
    emit_ms = int(os.environ.get("EMIT_MS", 5000))
    scale = minutes / FULL_MIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server inherits it
    folder = ROOT / "results" / "soak" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder.mkdir(parents=True)
    print(f"soak: {minutes:g} minutes, results in {folder}", flush=True)
    phases = [Phase(name, Timing(length * 60 * scale, scale)) for name, length in PHASES]
    verdicts = []
    try:
        for phase in phases:
            run_phase(phase, clients, emit_ms, folder)
            verdicts.append(verdict(phase, clients))
            write_results(folder, phases, verdicts)
    except KeyboardInterrupt:
        # run_phase's own cleanup has stopped the engines and the server; the rows taken
        # so far are kept, without a verdict on an unfinished phase.
        write_results(folder, phases, verdicts)
        print(f"soak: interrupted; samples so far in {folder / 'samples.csv'}", file=sys.stderr)
        return 130
    print_table(verdicts, clients)
    print(f"samples: {folder / 'samples.csv'}; summary: {folder / 'summary.json'}")
    results = {v["result"] for v in verdicts}
    return 1 if "FAIL" in results else (3 if "INCONCLUSIVE" in results else 0)


if __name__ == "__main__":
    sys.exit(main())
