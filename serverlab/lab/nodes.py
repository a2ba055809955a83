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
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from serverlab.base import owner, scratch
from serverlab.base.netns import Namespace, existing
from serverlab.base.netns import pids as namespace_pids
from serverlab.lab.topology import HEAD, RAY_PORT, Host, Lab, LabError, is_lab_namespace

# Ray's minimum is 75 MB; the lab moves small plans and summaries, not data.
OBJECT_STORE_BYTES = 100_000_000
START_TIMEOUT_S = 120
READY_TIMEOUT_S = 120
STOP_GRACE_S = 3
# A lab down that cannot stop its processes in this long says which ones.
STOP_DEADLINE_S = 30

# Every Ray process serverlab starts gets these, whatever starts it.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


def ray_binary() -> str:
    return str(Path(sys.executable).parent / "ray")


def temp_dir(lab: Lab, host: Host) -> Path:
    return scratch.lab_folder(lab.name) / host.role


def start(lab: Lab, environment: dict[str, str] | None = None, progress=None) -> None:
    """Starts the head's node, then every other host's, each in its namespace; waits until
    Ray counts them all. `environment` overrides per role (tests give one generator
    another engine binary, say). `progress` counts the nodes as they start
    (``serverlab.base.progress.Tally``)."""
    env = {**os.environ, **RAY_ENV, owner.OWNER_ENV: owner.lab_mark(lab.name)}
    if progress:
        progress.begin(len(lab.hosts), "starting the lab's Ray nodes")
    _ray_start(lab, [lab.head], env, environment or {})
    if progress:
        progress.advance(lab.head.role)
    # Then the other nodes, one at a time: started side by side on a busy 2-core machine
    # (load 15), their agents starved one another past Ray's fixed start-up waits and
    # `lab up` failed every time; one at a time it came up in 80 s under the same load.
    for host in [h for h in lab.hosts if h.role != HEAD]:
        _ray_start(lab, [host], env, environment or {})
        if progress:
            progress.advance(f"{host.role} {host.address}")
    if progress:
        progress.end()
    _wait_ready(lab)


def _ray_start(lab: Lab, hosts: list[Host], env: dict, environment: dict) -> None:
    """`ray start` on each of the hosts at once; LabError names the first that failed."""
    started = []
    for host in hosts:
        argv = Namespace(host.netns).command(_ray_start_argv(lab, host))
        extra = environment.get(host.role, {})
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        started.append((host, subprocess.Popen(argv, env={**env, **extra}, **pipes)))
    deadline = time.monotonic() + START_TIMEOUT_S
    failed = []
    for host, process in started:
        try:
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            err = f"no answer in {START_TIMEOUT_S} s; {err}"
        if process.returncode != 0:
            tail = (err or out).strip().splitlines()[-5:]
            failed.append(f"ray start on {host.role} failed: {' | '.join(tail)}")
    if failed:
        raise LabError(failed[0])


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
    """Stops every process of the lab and returns only once they are all gone (SIGTERM,
    SIGKILL after STOP_GRACE_S); returns how many there were. Never `ray stop`: it stops
    every Ray process on the machine, whoever started it. LabError names any survivor."""
    stopped: set[int] = set()
    deadline = time.monotonic() + STOP_DEADLINE_S
    # Rounds, since a Ray process being stopped may start another (a worker, an agent).
    while processes := lab_processes(lab_name):
        if time.monotonic() > deadline:
            raise LabError(f"lab {lab_name!r} would not stop: {describe(processes)}")
        stopped.update(p.pid for p in processes)
        for process in processes:
            _signal(process, signal.SIGTERM)
        alive = _wait_gone(processes, STOP_GRACE_S)
        for process in alive:
            _signal(process, signal.SIGKILL)
        _wait_gone(alive, STOP_GRACE_S)
    return len(stopped)


def lab_processes(lab_name: str) -> list[psutil.Process]:
    """Every live process of the lab: those inside its namespaces (Ray's agents outlive
    their raylet with parent 1 and an environment no one may read, so no owner mark finds
    them), those carrying its mark, and those naming its Ray session's folder."""
    pids = set(owner.owned_by(owner.lab_mark(lab_name)))
    for name in existing():
        if is_lab_namespace(name) == lab_name:
            pids.update(namespace_pids(name))
    pids.update(p.pid for p in session_processes().get(lab_name, []))
    pids.discard(os.getpid())
    found = []
    for pid in sorted(pids):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def session_processes() -> dict[str, list[psutil.Process]]:
    """lab name -> the live processes whose command line names that lab's folder (its Ray
    sessions), whether or not the lab is up."""
    folder = re.compile(re.escape(str(scratch.lab_folder(""))) + r"([a-z0-9]+)(/|\s|$)")
    found: dict[str, list[psutil.Process]] = {}
    for process in psutil.process_iter(["cmdline"]):
        match = folder.search(" ".join(process.info["cmdline"] or ()))
        if match and process.pid != os.getpid() and _running(process):
            found.setdefault(match.group(1), []).append(process)
    return found


def describe(processes: list[psutil.Process]) -> str:
    """`pid 123 (command line)`, for each process, shortened."""
    parts = []
    for process in processes[:5]:
        with contextlib.suppress(psutil.Error):
            # Ray rewrites its workers' command lines and pads them with spaces.
            command = " ".join(" ".join(process.cmdline()).split()) or process.name()
            parts.append(f"pid {process.pid} ({command[:120]})")
    more = f" and {len(processes) - 5} more" if len(processes) > 5 else ""
    return ", ".join(parts) + more


def _wait_gone(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Waits until each process has ended (a zombie holds nothing: it counts as ended);
    returns those still alive after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in processes if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(process: psutil.Process, signum: int) -> None:
    with contextlib.suppress(psutil.Error):
        process.send_signal(signum)
