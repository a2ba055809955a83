"""Where a test's traffic comes from: one engine on this machine (`LocalLoad`), or engines on
other machines (serverlab.cluster.traffic, the same interface). The executor only begins a
load, watches it next to the server, stops it early when the server dies, and reads back
what it produced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from serverlab.run.execution.engine import EngineRun, engine_command, write_plan

# Seconds a finishing engine may take to print its summary and exit.
FINISH_S = 10.0


@dataclass
class LoadResult:
    """What one load (a warm-up, a priming run or the measured run) produced."""

    summary: dict | None
    intervals: list[dict] = field(default_factory=list)
    emits: list[dict] = field(default_factory=list)
    stderr_tail: str = ""
    # A run with a warm-up phase: its interval lines before the measured window, and the
    # engine's line where that window began (None: it never did).
    warmup_intervals: list[dict] = field(default_factory=list)
    measure: dict | None = None
    # Spread loads only: each generator's own summary and figures, and the ones lost.
    generators: list[dict] = field(default_factory=list)
    lost: list[dict] = field(default_factory=list)


class Running(Protocol):
    """A load under way."""

    local_pid: int | None  # an engine on this machine whose CPU the monitor samples
    starts_at: float  # when the load starts (time.monotonic())

    def done(self) -> bool: ...

    def stop(self) -> None: ...

    def finish(self) -> LoadResult: ...


class Load(Protocol):
    target_host: str  # the address the engines reach the server at
    # Whether a plan's warm-up phase can be ended while it runs (LocalLoad: `on_measure`,
    # and `measure()` on what begin returns); without it the executor warms up apart.
    live_measure: bool

    # `http_port`: the server's HTTP port, for what a load asks of the server besides its
    # target (a spread load's clock check through /timestamp, even for a syslog flood).
    # `on_end`: called once the load has ended, as soon as this host learns it (a local
    # engine's summary line; a spread load's results, which arrive at the end anyway).
    def begin(
        self,
        plan: dict,
        workdir: Path,
        tag: str,
        on_interval: Callable | None = None,
        http_port: int | None = None,
        on_end: Callable | None = None,
    ) -> Running: ...


class LocalLoad:
    """One engine on this machine, pinned to its CPUs, in the server's namespace if any."""

    target_host = "127.0.0.1"

    def __init__(self, cpus: str | None, netns: str | None = None, target_host: str = ""):
        self.cpus, self.netns = cpus, netns
        if target_host:  # the server's address behind a delay line
            self.target_host = target_host

    # The executor may end a plan's warm-up phase (its `warmup_max_s`) when it judges the
    # rate steady: a local engine takes `measure` on its stdin (Running.measure).
    live_measure = True

    def begin(
        self, plan, workdir, tag, on_interval=None, http_port=None, on_end=None, on_measure=None
    ) -> Running:
        if self.target_host != LocalLoad.target_host:
            # The delay line's server end: the one address besides loopback it may load.
            plan = {**plan, "allowed_hosts": [self.target_host]}
        path = write_plan(plan, Path(workdir) / f"{tag}.json")
        argv = engine_command(path, self.cpus, self.netns)
        engine = EngineRun(
            argv,
            on_interval=on_interval,
            on_summary=on_end,
            on_measure=on_measure,
            warmup_phase="warmup_max_s" in plan,
        )
        engine.start()
        return _LocalRunning(engine)


class _LocalRunning:
    def __init__(self, engine: EngineRun):
        self.engine = engine
        self.local_pid = engine.pid
        self.starts_at = time.monotonic()

    def done(self) -> bool:
        return self.engine.process.poll() is not None

    def stop(self) -> None:
        self.engine.stop()

    def measure(self) -> None:
        self.engine.measure()

    def finish(self) -> LoadResult:
        self.engine.wait(FINISH_S)
        e = self.engine
        return LoadResult(
            e.summary,
            e.intervals,
            e.emits,
            e.stderr_tail,
            warmup_intervals=e.warmup_intervals,
            measure=e.measure_line,
        )
