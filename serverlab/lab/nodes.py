"""One Ray node per lab host, started inside its namespace with `ray start`.

Ray's ports are unauthenticated, so where a node listens matters: inside a lab namespace
every interface is the lab's own (its link and its loopback), and nothing else can reach
it. Every node runs without a dashboard and without usage reports
(RAY_USAGE_STATS_ENABLED=0: otherwise Ray reports to outside hosts), with a temp dir and a
small object store of its own. Its processes carry the lab's owner mark, so that
`lab down`, or the reaper of a dead lab, finds every one of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from serverlab.base import owner
from serverlab.base.netns import Namespace
from serverlab.lab.topology import HEAD, RAY_PORT, Host, Lab, LabError

# Ray's minimum is 75 MB; the lab moves small plans and summaries, not data.
OBJECT_STORE_BYTES = 100_000_000
START_TIMEOUT_S = 120
READY_TIMEOUT_S = 120
STOP_GRACE_S = 3
TEMP_ROOT = Path("/tmp/serverlab-lab")

# Every Ray process serverlab starts gets these, whatever starts it.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


def ray_binary() -> str:
    return str(Path(sys.executable).parent / "ray")


def temp_dir(lab: Lab, host: Host) -> Path:
    return TEMP_ROOT / lab.name / host.role


def start(lab: Lab, environment: dict[str, str] | None = None) -> None:
    """Starts the head's node, then every other host's, each in its namespace; waits until
    Ray counts them all. `environment` overrides per role (tests give one generator
    another engine binary, say)."""
    env = {**os.environ, **RAY_ENV, owner.OWNER_ENV: owner.lab_mark(lab.name)}
    for host in [lab.head, *(h for h in lab.hosts if h.role != HEAD)]:
        argv = Namespace(host.netns).command(_ray_start_argv(lab, host))
        extra = (environment or {}).get(host.role, {})
        done = subprocess.run(
            argv, env={**env, **extra}, capture_output=True, text=True, timeout=START_TIMEOUT_S
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise LabError(f"ray start on {host.role} failed: {' | '.join(tail)}")
    _wait_ready(lab)


def _ray_start_argv(lab: Lab, host: Host) -> list[str]:
    argv = [
        ray_binary(),
        "start",
        f"--node-ip-address={host.address}",
        f"--temp-dir={temp_dir(lab, host)}",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--num-cpus=1",
        f"--resources={json.dumps(host.resources)}",
        "--disable-usage-stats",
    ]
    if host.role == HEAD:
        return [*argv, "--head", f"--port={RAY_PORT}", "--include-dashboard=false"]
    return [*argv, f"--address={lab.ray_address}"]


def _wait_ready(lab: Lab) -> None:
    """Asks the cluster, from the head's namespace, until every host's node is alive."""
    probe = [sys.executable, "-m", "serverlab.lab.probe", lab.ray_address, str(len(lab.hosts))]
    done = subprocess.run(
        Namespace(lab.head.netns).command(probe),
        env={**os.environ, **RAY_ENV},
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT_S + 30,
    )
    if done.returncode != 0:
        raise LabError(f"the lab's Ray cluster did not come up: {done.stderr.strip()[-500:]}")


def stop(lab_name: str) -> int:
    """Stops every process of the lab (SIGTERM, then SIGKILL); returns how many there were.
    Never `ray stop`: it stops every Ray process on the machine, whoever started it."""
    mark = owner.lab_mark(lab_name)
    processes = []
    for pid in owner.owned_by(mark):
        try:
            processes.append(psutil.Process(pid))
        except psutil.Error:
            continue
    for process in processes:
        _signal(process, signal.SIGTERM)
    _, alive = psutil.wait_procs(processes, timeout=STOP_GRACE_S)
    for process in alive:
        _signal(process, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=STOP_GRACE_S)
    return len(processes)


def _signal(process: psutil.Process, signum: int) -> None:
    with contextlib.suppress(psutil.Error):
        process.send_signal(signum)
