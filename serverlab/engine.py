"""The bridge to the Rust load engine: a suite permutation becomes an engine plan, and the
engine's JSON Lines (interval snapshots, then one summary) come back as they are written."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serverlab import owner
from serverlab.paths import REPO_ROOT
from serverlab.suite import BEHAVIOURS

PUSH_EVENT = "e1"
# Long runs with many clients need more than one source address (~28k ports each).
CLIENTS_PER_SOURCE = 20_000


class EngineError(RuntimeError):
    pass


def engine_binary() -> Path:
    override = os.environ.get("SERVERLAB_ENGINE")
    path = Path(override) if override else REPO_ROOT / "engine/target/release/serverlab-load"
    if not path.is_file():
        raise EngineError(f"load engine not built: {path} is missing (run `make build`)")
    return path


def plan_for(
    params: dict[str, Any], port: int, syslog_port: int, paths: list[dict] | None = None
) -> dict[str, Any]:
    """The engine plan (see engine/README.md) for one permutation's parameters; `paths`
    spreads the requests over weighted paths (a file set)."""
    behaviour = params["behaviour"]
    plan: dict[str, Any] = {
        "target": _target(params, port, syslog_port, paths),
        "behaviour": _behaviour(params),
        "pacer": _pacer(params),
    }
    clients = int(params.get("clients", 1))
    plan["connections"] = clients
    if params.get("pacer", "closed") != "users":
        # A syslog flood's messages are the engine's requests.
        count = params.get("requests", params.get("syslog_messages"))
        if count is not None:
            plan["requests"] = int(count)
        else:
            plan["duration_s"] = float(params.get("ramp_up_s", 0)) + float(params["duration_s"])
    if "timeout_s" in params:
        plan["timeout_ms"] = int(float(params["timeout_s"]) * 1000)
    if behaviour in ("longpoll", "comet", "slow-upload"):
        plan["method"] = "POST"
    if paths and engine_supports("paths"):
        plan["paths"] = paths
    if clients > CLIENTS_PER_SOURCE:
        sources = -(-clients // CLIENTS_PER_SOURCE) + 1
        plan["sources"] = [f"127.0.0.2-127.0.0.{1 + sources}"]
    return plan


def warmup_plan_for(params: dict[str, Any], port: int, syslog_port: int) -> dict[str, Any]:
    """A short unrecorded load before the measurement, so that JIT compilers and caches are
    warm (the seed 003 priming run): the scenario's own requests when they are plain
    requests, else keep-alive GET /perf."""
    behaviour = params["behaviour"]
    plain = behaviour in ("keepalive", "new-connection")
    warm = {
        "behaviour": behaviour if plain else "keepalive",
        "clients": min(int(params.get("clients", 1)), 50),
        "duration_s": float(params["warmup_s"]),
    }
    if plain and "path" in params:
        warm["path"] = params["path"]
    return plan_for(warm, port, syslog_port)


def _target(params: dict, port: int, syslog_port: int, paths: list[dict] | None) -> str:
    if params["behaviour"] == "syslog":
        return f"{params.get('syslog_transport', 'tcp')}://127.0.0.1:{syslog_port}"
    path = params.get("path") or BEHAVIOURS[params["behaviour"]]
    if paths:
        # An engine without weighted paths fetches the most popular file only.
        path = max(paths, key=lambda p: p["weight"])["path"]
    return f"http://127.0.0.1:{port}{path}"


@functools.cache
def engine_supports(feature: str) -> bool:
    """Whether the built engine knows a newer feature: `netns` (the `--netns` flag) or
    `paths` (weighted paths in a plan), read from its --help and schema."""
    probe = ["--help"] if feature == "netns" else ["--print-schema"]
    try:
        out = subprocess.run(
            [str(engine_binary()), *probe], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    needle = "--netns" if feature == "netns" else '"paths"'
    return needle in out.stdout


def _behaviour(p: dict) -> dict[str, Any]:
    # The engine spells behaviour kinds as suites do.
    kind = p["behaviour"]
    if kind in ("keepalive", "new-connection"):
        return {"kind": kind}
    if kind == "longpoll":
        return {
            "kind": "longpoll",
            "events": [PUSH_EVENT],
            "duration_ms": p["longpoll_duration_ms"],
        }
    if kind == "comet":
        spec: dict[str, Any] = {"kind": "comet", "events": [PUSH_EVENT]}
        if "comet_duration_ms" in p:
            spec["duration_ms"] = p["comet_duration_ms"]
        return spec
    if kind == "slow-upload":
        rate = p.get("upload_rate_bps", p["upload_bytes"])
        return {"kind": kind, "bytes": p["upload_bytes"], "bytes_per_s": rate}
    if kind == "slow-reader":
        # Reads of 1 KiB paced to the wanted rate model a client on a slow link.
        rate = max(1, int(p.get("read_rate_bps", 64_000)))
        return {
            "kind": kind,
            "read_bytes": 1024,
            "read_interval_ms": max(1, 1024_000 // rate),
        }
    if kind == "syslog":
        return {
            "kind": "syslog",
            "transport": p.get("syslog_transport", "tcp"),
            "framing": p.get("syslog_framing", "newline"),
        }
    raise EngineError(f"no engine behaviour for {kind!r}")


def _pacer(p: dict) -> dict[str, Any]:
    kind = p.get("pacer", "closed")
    if kind == "open":
        spec: dict[str, Any] = {"kind": "open", "rate": p["rate"]}
        if "rate_end" in p:
            spec["ramp_to_rate"] = p["rate_end"]
            spec["ramp_s"] = p.get("ramp_up_s") or p.get("duration_s")
        if "calls_per_connection" in p:
            spec["calls_per_connection"] = p["calls_per_connection"]
        return spec
    if kind == "users":
        return {
            "kind": "users",
            "users": int(p.get("clients", 1)),
            "ramp_up_s": float(p.get("ramp_up_s", 0)),
            "hold_s": float(p["duration_s"]),
        }
    return {"kind": kind}


# Plan fields the engine names when it refuses a plan -> the suite keys that make them,
# most likely first.
PLAN_FIELD_TO_SUITE_KEYS = {
    "connections": ("clients",),
    "users": ("clients",),
    "sources": ("clients",),
    "duration_s": ("duration_s", "ramp_up_s"),
    "requests": ("requests", "syslog_messages"),
    "timeout_ms": ("timeout_s",),
    "target": ("path", "syslog_transport"),
    "paths": ("files",),
    "behaviour": (
        "upload_bytes",
        "upload_rate_bps",
        "read_rate_bps",
        "longpoll_duration_ms",
        "comet_duration_ms",
        "behaviour",
    ),
    "pacer": ("rate", "rate_end", "calls_per_connection", "ramp_up_s", "duration_s", "pacer"),
}


def suite_key_for(field: str | None, params: dict) -> str:
    """The suite key to point at for a refused plan field: the first one the test sets."""
    for key in PLAN_FIELD_TO_SUITE_KEYS.get(field or "", ()):
        if key in params:
            return key
    return "name"


def check_plans(plans: list[dict]) -> list[dict]:
    """Every plan through one `serverlab-load --check`: for each, `{"ok": true, "plan":
    ...}` or `{"ok": false, "error": ..., "field": ...}`, in order. The engine is the one
    judge of what a plan may say, so the orchestrator keeps no copy of its rules."""
    lines = "".join(json.dumps(plan, allow_nan=False) + "\n" for plan in plans)
    try:
        done = subprocess.run(
            [str(engine_binary()), "--check"],
            input=lines,
            capture_output=True,
            text=True,
            timeout=60 + len(plans) / 1000,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EngineError(f"serverlab-load --check did not run: {error}") from None
    verdicts = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode not in (0, 2) or len(verdicts) != len(plans):
        raise EngineError(
            f"serverlab-load --check answered {len(verdicts)} of {len(plans)} plans "
            f"(exit code {done.returncode}): {done.stderr.strip()[:300]}"
        )
    return verdicts


@dataclass
class EngineRun:
    """One engine process; `intervals` and `summary` fill in as its stdout arrives."""

    argv: list[str]
    on_interval: Callable[[dict], None] | None = None
    intervals: list[dict] = field(default_factory=list)
    emits: list[dict] = field(default_factory=list)  # one per emit cycle seen (push)
    summary: dict | None = None
    stderr_tail: str = ""
    process: subprocess.Popen | None = None
    _reader: threading.Thread | None = None

    def start(self) -> None:
        # Its own session: Ctrl-C reaches serverlab, which stops the engine itself.
        self.process = owner.popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def _read(self) -> None:
        assert self.process and self.process.stdout
        for line in self.process.stdout:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("type") == "interval":
                self.intervals.append(record)
                if self.on_interval:
                    self.on_interval(record)
            elif record.get("type") == "emit":
                self.emits.append(record)
            elif record.get("type") == "summary":
                self.summary = record

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = self.stop()
        if self._reader:
            self._reader.join(timeout=5)
        self.stderr_tail = (self.process.stderr.read() or "")[-2000:]
        return code

    def stop(self, grace_s: float = 3.0) -> int:
        """Asks the engine to finish (SIGTERM: it prints its summary), then kills it."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def engine_command(plan_path: Path, cpus: str | None, netns: str | None = None) -> list[str]:
    """The engine's argv; with `netns` it opens its sockets in that network namespace."""
    argv = [str(engine_binary()), "--plan", str(plan_path), "--json"]
    if netns and engine_supports("netns"):
        argv += ["--netns", netns]
    elif netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    return ["taskset", "-c", cpus, *argv] if cpus else argv


def write_plan(plan: dict, path: Path) -> Path:
    path.write_text(json.dumps(plan, indent=2))
    return path
