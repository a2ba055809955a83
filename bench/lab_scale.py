"""Issue 15's capacity figures, in the virtual lab (`serverlab lab up`, real Ray nodes).

    .venv/bin/python bench/lab_scale.py scale      # 36,000 comet streams, 2 generators
    .venv/bin/python bench/lab_scale.py quick      # suites/quick.toml local, then in the lab

`scale` runs bench/lab-scale.toml: more held connections than one process may have here
(20,000 descriptors), from two generators at node-http with two node:cluster workers; it
prints what the clients and the server each counted. `quick` runs the quick suite once
locally and once over the lab, and sets each test's figures side by side.

Both are capacity figures, not speed figures: on 2 cores nothing in the lab can be pinned
apart (every namespace shares the machine's CPUs), so the lab's figures are what the same
machine does with the load coming over a bridge from other processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from serverlab.results.store import Store

ROOT = Path(__file__).resolve().parent.parent
SERVERLAB = str(Path(sys.executable).parent / "serverlab")
LAB = "bench"


def serverlab(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "SERVERLAB_LAB": LAB}
    print("$ serverlab " + " ".join(args), flush=True)
    return subprocess.run([SERVERLAB, *args], env=env, check=check, cwd=ROOT)


def in_lab(work) -> None:
    serverlab("lab", "up", "--generators", "2")
    try:
        work()
    finally:
        serverlab("lab", "down", check=False)


def tests_of(db: Path) -> list:
    with Store(db, create=False) as store:
        return [store.load_details(t) for t in store.tests()]


def scale(where: Path) -> None:
    db = where / "scale.db"
    in_lab(lambda: serverlab("run", "bench/lab-scale.toml", "--ray", "lab", "--db", str(db)))
    (test,) = tests_of(db)
    summary = test.summary or {}
    events = summary.get("events", {})
    end = test.server_stats[-1].stats if test.server_stats else {}
    cycles: dict[int, int | None] = {}
    for emit in test.emits:
        cycles.setdefault(emit.seq, emit.received)
    print(f"status {test.status} {test.validity or ''}")
    print(
        f"server (/stats at the end): connections accepted "
        f"{end.get('connections', {}).get('total')}, comet lines sent "
        f"{end.get('responses', {}).get('push')}"
    )
    print(
        f"server: peak descriptors {max((s.fds or 0) for s in test.samples)}, peak RSS "
        f"{max((s.rss_bytes or 0) for s in test.samples) / 2**20:.0f} MiB"
    )
    for generator in test.run_info.get("generators", []):
        part = generator.get("summary") or {}
        print(
            f"generator {generator['address']}: started {part.get('started')}, "
            f"events {part.get('events', {}).get('received')}, "
            f"offset {generator.get('offset_ms')} ± {generator.get('uncertainty_ms')} ms"
        )
    print(
        f"clients: events received {events.get('received')}, lost {events.get('lost')}, "
        f"duplicated {events.get('duplicated')}, reordered {events.get('reordered')}, "
        f"errors {summary.get('errors')}"
    )
    print("deliveries received per emit cycle, in seq order:")
    print("  " + ", ".join(f"{seq}: {cycles[seq]}" for seq in sorted(cycles)))


def quick(where: Path) -> None:
    local, lab = where / "quick-local.db", where / "quick-lab.db"
    serverlab("run", "suites/quick.toml", "--repeats", "1", "--db", str(local))
    in_lab(
        lambda: serverlab(
            "run", "suites/quick.toml", "--repeats", "1", "--ray", "lab", "--db", str(lab)
        )
    )
    print_side_by_side(local, lab)


def print_side_by_side(local: Path, lab: Path) -> None:
    """A row per test: requests/s and latency p99, or events/s and the delivery delay's
    p99 for held streams and long polls."""
    rows: dict[str, dict] = {}
    for place, db in (("local", local), ("lab", lab)):
        for test in tests_of(db):
            rows.setdefault(_label(test), {})[place] = test
    print("| test | rate local | rate lab | p99 local | p99 lab |")
    print("|---|---|---|---|---|")
    for label in sorted(rows):
        pair = rows[label]
        rates = [_figure(pair.get(place), _rate) for place in ("local", "lab")]
        p99s = [_figure(pair.get(place), _p99) for place in ("local", "lab")]
        print(f"| {label} | {rates[0]} | {rates[1]} | {p99s[0]} | {p99s[1]} |")


def _label(test) -> str:
    return f"{test.scenario} {test.params.get('behaviour')} {test.contestant}"


def _pushed(test) -> bool:
    return test.params.get("behaviour") in ("comet", "longpoll", "sse", "websocket")


def _rate(test) -> str:
    summary = test.summary
    if _pushed(test):
        received = summary.get("events", {}).get("received") or 0
        return f"{received / (summary.get('duration_s') or 1):,.0f} events/s"
    return f"{summary.get('rps', 0):,.0f} req/s"


def _p99(test) -> str:
    key = "event_delay_us" if _pushed(test) else "latency_us"
    return f"{test.summary.get(key, {}).get('p99', 0) / 1000:,.1f} ms"


def _figure(test, figure) -> str:
    if test is None:
        return "—"
    if test.status != "ok" or not test.summary:
        return test.status
    return figure(test)


def main() -> None:
    commands = {"scale": scale, "quick": quick}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: {sys.argv[0]} scale|quick")
    # Kept, so that `serverlab report --db` can draw what was measured.
    where = ROOT / "results" / "lab-bench"
    where.mkdir(parents=True, exist_ok=True)
    for old in where.glob(f"{sys.argv[1]}*.db*"):
        old.unlink()
    commands[sys.argv[1]](where)
    print(f"databases: {where}")


if __name__ == "__main__":
    main()
