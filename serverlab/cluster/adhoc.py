"""`serverlab load URL ... --ray ADDRESS`: ad-hoc load from several machines. The engine's
own flags are turned into a plan by the engine itself (`serverlab-load --check`), split over
the generators, started at one instant and merged; the merged summary is printed as the
engine prints its own."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import time
from urllib.parse import urlsplit

from serverlab.base import scratch
from serverlab.cluster import driver
from serverlab.cluster.errors import ClusterError
from serverlab.cluster.merge import merge_files
from serverlab.cluster.traffic import RayLoad
from serverlab.run.execution.engine import engine_binary


def plan_of(engine_args: list[str]) -> dict:
    """The plan the engine makes of these flags; ClusterError with its own words if not."""
    args = [a for a in engine_args if a != "--json"]
    done = subprocess.run(
        [str(engine_binary()), *args, "--check"], capture_output=True, text=True, timeout=60
    )
    try:
        verdict = json.loads(done.stdout.splitlines()[0])
    except (IndexError, ValueError):
        raise ClusterError(f"serverlab-load refused the flags: {done.stderr.strip()}") from None
    if not verdict.get("ok"):
        raise ClusterError(f"serverlab-load refuses the plan: {verdict['error']}")
    return verdict["plan"]


def spread_load(
    engine_args: list[str], address: str, generators: int | None, allowed: set[str]
) -> str:
    """Runs the load over the cluster's generators; returns what to print."""
    urls = [a for a in engine_args if "://" in a]
    host = urlsplit(urls[0]).hostname or "" if urls else ""
    if not _is_address(host) or ipaddress.ip_address(host).is_loopback or host not in allowed:
        raise ClusterError(
            f"with --ray the target must be a host of the lab or of --cluster-hosts, not {host!r}"
        )
    plan = plan_of([*engine_args, "--allow-host", host])
    cluster = driver.open_cluster(address, generators, allowed, with_server=False)
    try:
        folder = scratch.make("load-")
        running = RayLoad(cluster.generators, host, clock_required=False).begin(
            plan, folder, "load"
        )
        while not running.done():
            time.sleep(0.2)
        result = running.finish()
    except KeyboardInterrupt:
        driver.stop(cluster)
        raise
    finally:
        driver.close(cluster)
    if result.lost:
        lost = ", ".join(str(g.get("address", g["generator"])) for g in result.lost)
        raise ClusterError(f"generators lost during the load: {lost}")
    return merge_files(folder / "load-merge", json_lines="--json" in engine_args)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
