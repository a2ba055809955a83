"""What each node runs: serverlab's git commit and the engine binary's SHA-256. Every node
of a distributed run must run the same, or its figures are not one experiment."""

from __future__ import annotations

import hashlib
import socket
import subprocess

from serverlab.base.paths import REPO_ROOT
from serverlab.run.execution.engine import EngineError, engine_binary


def node_version() -> dict[str, str]:
    return {"host": socket.gethostname(), "commit": _commit(), "engine_sha256": _engine_sha()}


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _engine_sha() -> str:
    try:
        return hashlib.sha256(engine_binary().read_bytes()).hexdigest()
    except (EngineError, OSError):
        return "missing"


def mismatches(versions: dict[str, dict[str, str]]) -> list[str]:
    """One sentence per node that differs from the first (by node name order) in commit or
    engine; empty when all agree."""
    if not versions:
        return []
    names = sorted(versions)
    reference = versions[names[0]]
    found = []
    for name in names[1:]:
        for key, what in (("commit", "serverlab commit"), ("engine_sha256", "engine binary")):
            if versions[name][key] != reference[key]:
                found.append(
                    f"node {name} runs {what} {versions[name][key][:12]}, "
                    f"node {names[0]} runs {reference[key][:12]}"
                )
    return found
