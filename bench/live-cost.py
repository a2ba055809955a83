#!/usr/bin/env python3
"""What the live page costs the runner (issue 37's target: at most 1 % of a core more).

Runs the same short suite against the reference server (tests/reference_server.py) with
`serverlab run` and with `serverlab run --live` and a headless Chromium showing the page,
in turns, and reads the runner process's own CPU (utime + stime of /proc/PID/stat, every
thread of it, not its children: the server and the engine are children) until it exits.
Prints each run's share of a core over its wall time, the difference, and the machine's
load average; exits 1 when the difference is over the target. A speed figure on a shared
machine: read it with the load beside it.

Run from the repository: .venv/bin/python bench/live-cost.py [--push] [ROUNDS [REPEATS [SECONDS]]]
(--push: 4 comet streams with an event every 500 ms, whose cycles the page draws as they come,
instead of 4 keep-alive clients)."""

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import REFERENCE_MANIFEST, live_suite, write_manifest  # noqa: E402
from test_report_browser import DevTools, launched_chromium  # noqa: E402

TARGET_PERCENT = 1.0
SERVERLAB = str(Path(sys.executable).parent / "serverlab")


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(folder: Path, live: bool, chromium_page: str | None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one `serverlab run` process."""
    db = folder / f"lab-{time.monotonic_ns()}.db"
    argv = [SERVERLAB, "run", str(folder / "suite.toml"), "--db", str(db), "--skip-verify"]
    started = time.monotonic()
    run = subprocess.Popen(
        argv + (["--live"] if live else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    page = None
    if live:
        for line in run.stdout:
            found = re.search(r"live page: (\S+)", line)
            if found:
                page = DevTools(chromium_page)
                page.call("Page.navigate", url=found.group(1))
                break
    used, at = 0.0, started
    while run.poll() is None:
        reading = cpu_seconds(run.pid)
        if reading is not None:
            used, at = reading, time.monotonic()
        time.sleep(0.1)
    run.communicate()
    if page:
        page.close()
    if run.returncode != 0:
        raise SystemExit(f"serverlab run exited {run.returncode}")
    return used, at - started


def main() -> int:
    push = "--push" in sys.argv[1:]
    given = [int(arg) for arg in sys.argv[1:] if arg != "--push"][:3]
    rounds, repeats, seconds = given + [2, 3, 8][len(given) :]
    with tempfile.TemporaryDirectory(prefix="live-cost-") as scratch:
        folder = Path(scratch)
        write_manifest(folder / "contestants", "reference", REFERENCE_MANIFEST)
        os.environ["SERVERLAB_CONTESTANTS"] = str(folder / "contestants")
        (folder / "suite.toml").write_text(live_suite(repeats, seconds, push, name="live-cost"))
        totals = {False: [0.0, 0.0], True: [0.0, 0.0]}
        with launched_chromium(folder / "profile") as chromium_page:
            for _ in range(rounds):
                for live in (False, True):  # in turns, so that the machine's load falls on both
                    used, wall = one_run(folder, live, chromium_page)
                    totals[live][0] += used
                    totals[live][1] += wall
                    print(
                        f"  {'--live' if live else 'plain':7} {used:6.2f} s CPU over {wall:6.1f} s"
                    )
    plain, live = (100 * totals[k][0] / totals[k][1] for k in (False, True))
    load = Path("/proc/loadavg").read_text().split()[:3]
    extra = live - plain
    verdict = "met" if extra <= TARGET_PERCENT else "MISSED"
    print(
        f"runner CPU over {rounds} rounds of {repeats} x {seconds} s "
        f"{'push (comet) ' if push else ''}tests (load average "
        f"{' '.join(load)}): plain {plain:.2f} %, --live with a page open {live:.2f} % of a core; "
        f"{extra:+.2f} % (target at most +{TARGET_PERCENT} %: {verdict})"
    )
    return 0 if verdict == "met" else 1


if __name__ == "__main__":
    sys.exit(main())
