"""The bridge to the Rust load engine: where its binary is, how plans are judged by it
(`serverlab-load --check`), and one engine process whose JSON Lines (interval snapshots,
emit records as their cycles settle, then one summary) come back as they are written. Engine
plans themselves are made by serverlab.run.plan.planner."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base import owner
from serverlab.base.paths import REPO_ROOT
from serverlab.results.report.figures import hdr

# The engine output version this reader understands (the summary's `version`). From 2 on,
# `rps` and every interval's `rps` count answered attempts (`answered`), never failed ones.
# From 3 on, each emit line carries its cycle's delay histogram, arrivals and drain time.
# From 5 on, errors hold `h2_goaway` and `h2_reset` (HTTP/2 plans, a stream per request).
# From 6 on, errors hold the kinds of a hostile server the engine survives: a TLS handshake
# that never ends (`tls_handshake_timeout`), a bad record after it (`tls_record`), an HTTP/2
# limit broken (`h2_limit`), a header block that never ends, a SETTINGS or PING flood.
# From 7 on, each interval line carries its interval's latency p50/p99 (and push event delay
# p50/p99), null when it had none, and the histograms they were read from.
# From 8 on, emit lines come as their cycles settle, and a cycle may have several lines
# (a delivery after its line was printed): `EngineRun` adds them up into one.
# From 9 on, interval lines list the push cycles whose deliveries they received (`cycles`).
# From 10 on, the summary counts the streams the HTTP/2 attacks open (`streams_opened`).
# From 11 on, a plan with a warm-up phase prints a `measure` line where its measured window
# begins, and the summary's `warmup` says how it ended.
# From 12 on, errors hold the gRPC statuses of `grpc-unary` calls and `grpc-stream` streams
# (`grpc_deadline_exceeded`, `grpc_resource_exhausted`, `grpc_unimplemented`,
# `grpc_internal`, `grpc_unavailable`, `grpc_other`, `grpc_no_status`), and events
# `grpc_deadlines` (Subscribe streams ended at their planned deadline; 0 where absent).
OUTPUT_VERSION = 12
# Sampled places an emit line holds at most (the engine's `emits::MAX_PLACES`).
MAX_PLACES = 200
# How long an engine named on the command line may take to say its version.
VERSION_TIMEOUT_S = 10.0


class EngineError(RuntimeError):
    pass


def engine_binary() -> Path:
    override = os.environ.get("SERVERLAB_ENGINE")
    path = Path(override) if override else REPO_ROOT / "engine/target/release/serverlab-load"
    if not path.is_file():
        raise EngineError(f"load engine not built: {path} is missing (run `make build`)")
    return path


def engine_version() -> str:
    """What this serverlab's own engine answers to --version: its crate's name and version
    (engine/Cargo.toml), the build `make build` makes from this tree."""
    try:
        package = tomllib.loads((REPO_ROOT / "engine/Cargo.toml").read_text())["package"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:
        raise EngineError(f"engine/Cargo.toml cannot be read: {error}") from None
    return f"{package['name']} {package['version']}"


def foreign_engine(path: Path) -> str | None:
    """Why the program at `path` is not a serverlab-load of this version (None when it is):
    it must run, and say this version to --version. Another build of it (a branch, other
    flags) is one; a file that is not a program, or another program, is not."""
    expected = engine_version()
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except OSError as error:
        return f"it cannot be run ({error.strerror or error})"
    except subprocess.TimeoutExpired:
        return f"its --version did not answer in {VERSION_TIMEOUT_S:g} s"
    said = done.stdout.strip().splitlines()[:1]
    if done.returncode != 0 or said != [expected]:
        answer = repr(said[0][:80]) if said else "nothing"
        return f"its --version says {answer} (exit code {done.returncode}), not {expected!r}"
    return None


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


# The smallest plan asking for HTTP/2 over TLS, spelled as serverlab.run.plan.planner
# spells it (H2_PLAN_FIELD): the engine's --check accepts it once it speaks HTTP/2.
H2_PROBE = {
    "target": "https://127.0.0.1:1/",
    "duration_s": 1,
    "http2": {"mode": "h2", "streams": 1},
    "tls": {"insecure": True},
}


def engine_speaks_h2() -> bool:
    """Whether this engine takes an HTTP/2 plan: asked of the engine, never assumed."""
    return bool(check_plans([H2_PROBE])[0].get("ok"))


@dataclass
class EngineRun:
    """One engine process; `intervals` and `summary` fill in as its stdout arrives."""

    argv: list[str]
    on_interval: Callable[[dict], None] | None = None
    # Called on the reader's thread as the summary line arrives: the load has ended then,
    # before the process has exited (the monitor's window closes there, with no overhang).
    on_summary: Callable[[], None] | None = None
    # A plan with a warm-up phase (`warmup_max_s`): the engine reads `measure` on its stdin
    # (see measure()), and `on_measure` is called, on the reader's thread, with its measure
    # line as the measured window begins. The interval lines before it are `warmup_intervals`.
    on_measure: Callable[[dict], None] | None = None
    warmup_phase: bool = False
    intervals: list[dict] = field(default_factory=list)
    warmup_intervals: list[dict] = field(default_factory=list)
    measure_line: dict | None = None
    emits: list[dict] = field(default_factory=list)  # one per emit cycle seen (push)
    _emit_at: dict[tuple, int] = field(default_factory=dict)  # (event, seq) -> its index
    summary: dict | None = None
    stderr_tail: str = ""
    process: subprocess.Popen | None = None
    _reader: threading.Thread | None = None

    def start(self) -> None:
        # Its own session: Ctrl-C reaches serverlab, which stops the engine itself.
        self.process = owner.popen(
            self.argv,
            stdin=subprocess.PIPE if self.warmup_phase else subprocess.DEVNULL,
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
            elif record.get("type") == "measure":
                self.warmup_intervals, self.intervals = self.intervals, []
                self.measure_line = record
                if self.on_measure:
                    self.on_measure(record)
            elif record.get("type") == "emit":
                self._add_emit(record)
            elif record.get("type") == "summary":
                self.summary = checked_version(record)
                if self.on_summary:
                    self.on_summary()
        # By seq, then event, as an engine printing them all at the end ordered them.
        self.emits.sort(key=lambda line: (line.get("seq", 0), str(line.get("event"))))

    def _add_emit(self, line: dict) -> None:
        """A cycle's first line, or a further one (a delivery after its line was printed,
        output version 8) added to it."""
        key = (line.get("event"), line.get("seq"))
        index = self._emit_at.setdefault(key, len(self.emits))
        if index == len(self.emits):
            self.emits.append(line)
        else:
            self.emits[index] = added_emit_lines(self.emits[index], line)

    def measure(self) -> None:
        """Ends the warm-up phase: the engine measures from its next interval boundary.
        Once only; an engine already gone (its stdin closed) is let be."""
        stdin = self.process and self.process.stdin
        if not stdin or stdin.closed:
            return
        with contextlib.suppress(OSError, ValueError):
            stdin.write("measure\n")
            stdin.flush()
            stdin.close()

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


def added_emit_lines(mine: dict, other: dict) -> dict:
    """Two emit lines of one (event, seq) as one, as the engine adds them (`EmitLog::merge`):
    counts and delay histograms add, spans and maxima widen, the first 200 places kept."""
    places = mine.get("places", [])
    room = max(0, MAX_PLACES - len(places))
    drains = [d for d in (mine.get("drain_us"), other.get("drain_us")) if d is not None]
    return {
        **mine,
        "total": max(mine["total"], other["total"]),
        "received": mine["received"] + other["received"],
        "created_ms": min(mine["created_ms"], other["created_ms"]),
        "duration_ms": {
            "min": min(mine["duration_ms"]["min"], other["duration_ms"]["min"]),
            "max": max(mine["duration_ms"]["max"], other["duration_ms"]["max"]),
        },
        "places": sorted([*places, *other.get("places", [])[:room]]),
        "delay_histogram": _added_histograms(mine["delay_histogram"], other["delay_histogram"]),
        "first_arrival_ms": min(mine["first_arrival_ms"], other["first_arrival_ms"]),
        "last_arrival_ms": max(mine["last_arrival_ms"], other["last_arrival_ms"]),
        "drain_us": max(drains) if drains else None,
        "drain_samples": mine.get("drain_samples", 0) + other.get("drain_samples", 0),
    }


def _added_histograms(*encoded: str) -> str:
    total = hdr.added(text for text in encoded if text)
    return "" if total is None else total.encode().decode()


def checked_version(summary: dict) -> dict:
    """The summary, marked invalid when it comes from an engine whose output this reader
    would misread (a stale build: its `rps` may count failed attempts)."""
    version = summary.get("version")
    if version == OUTPUT_VERSION:
        return summary
    reason = (
        f"engine output version {version}, this serverlab reads {OUTPUT_VERSION}: "
        "rebuild the engine (make engine)"
    )
    reasons = [*(summary.get("invalid_reasons") or []), reason]
    return {**summary, "valid": False, "invalid_reasons": reasons}


def engine_command(plan_path: Path, cpus: str | None, netns: str | None = None) -> list[str]:
    """The engine's argv; with `netns` it opens its sockets in that network namespace."""
    argv = [str(engine_binary()), "--plan", str(plan_path), "--json"]
    if netns:
        argv += ["--netns", netns]
    return ["taskset", "-c", cpus, *argv] if cpus else argv


def write_plan(plan: dict, path: Path) -> Path:
    path.write_text(json.dumps(plan, indent=2))
    return path
