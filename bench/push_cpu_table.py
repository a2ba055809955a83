#!/usr/bin/env python3
"""Prints push-cpu.sh's table from its results file: `push_cpu_table.py RESULTS`.

Each line of RESULTS is "kind generator round cpu_s server_deliveries own_count errors".
CPU per event divides by the server's deliveries (the one count both generators share); the
ratio is serverlab-load's over the peer's within a round, and the table shows its median and
range, with every round's counts. A round whose generators' deliveries differ by more than
10 % did not hold the same load (a generator lost clients) and is left out of the ratio.
"""

import statistics
import sys
from collections import defaultdict

ENGINE = "serverlab-load"


def load(path: str) -> dict:
    runs: dict = defaultdict(dict)
    with open(path, encoding="utf-8") as results:
        for line in results:
            kind, gen, rnd, cpu, delivered, own, errors = line.split()
            runs[kind][(gen, int(rnd))] = (float(cpu), int(delivered), int(own), int(errors))
    return runs


def per_event_us(run: tuple) -> float:
    cpu, delivered = run[0], run[1]
    return cpu / delivered * 1e6 if delivered else float("nan")


def main() -> int:
    runs = load(sys.argv[1])
    print(
        "| transport | round | generator | CPU s | server deliveries | own count | errors "
        "| µs/event |"
    )
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for kind, by_run in runs.items():
        ratios = []
        peer = next(gen for gen, _ in by_run if gen != ENGINE)
        for rnd in sorted({r for _, r in by_run}):
            for gen in (ENGINE, peer):
                run = by_run[(gen, rnd)]
                print(
                    f"| {kind} | {rnd} | {gen} | {run[0]:.3f} | {run[1]} | {run[2]} | {run[3]} "
                    f"| {per_event_us(run):.2f} |"
                )
            mine, theirs = by_run[(ENGINE, rnd)], by_run[(peer, rnd)]
            if abs(mine[1] - theirs[1]) > 0.1 * max(mine[1], theirs[1]):
                print(f"| {kind} | {rnd} | (left out: the deliveries differ by more than 10 %) |")
                continue
            ratios.append(per_event_us(mine) / per_event_us(theirs))
        summary.append((kind, peer, ratios))
    print()
    print("| transport | peer | engine CPU/event ÷ peer's, median [range] |")
    print("|---|---|---|")
    for kind, peer, ratios in summary:
        if not ratios:
            print(f"| {kind} | {peer} | no round with equal deliveries |")
            continue
        print(
            f"| {kind} | {peer} | {statistics.median(ratios):.2f}× "
            f"[{min(ratios):.2f}–{max(ratios):.2f}], {len(ratios)} rounds |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
