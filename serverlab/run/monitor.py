"""Samples a server's whole process tree and the system while a test runs.

What the seed 004 study did with `vmstat -SM -a 1` over ssh, at 10 samples a second and
per process: CPU %, RSS, threads, open descriptors and context switches of the server's
tree, the system's CPU and memory, and the load engine's own CPU so that a saturated
generator can be flagged.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass

import psutil

DEFAULT_INTERVAL_S = 0.1


@dataclass
class Sample:
    t: float  # seconds since the monitor started
    cpu_percent: float  # server tree, 100 = one core busy
    rss_bytes: int
    threads: int
    fds: int
    ctx_switches: int  # voluntary + involuntary since the previous sample
    processes: int
    system_cpu_percent: float  # whole machine, 100 = every core busy
    system_mem_used_bytes: int
    engine_cpu_percent: float | None  # the generator, 100 = one core busy

    def as_dict(self) -> dict:
        return asdict(self)


class _TreeClock:
    """CPU seconds and context switches of a process tree, tolerant of processes that
    come and go between samples (a JVM's threads, a forking server)."""

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self.procs: dict[int, psutil.Process] = {}
        self.cpu_by_pid: dict[int, float] = {}
        self.ctx_by_pid: dict[int, int] = {}
        # Processes that exited: their last readings stay in the totals, so that the
        # tree's counters never go backwards.
        self.gone_cpu = 0.0
        self.gone_ctx = 0

    def members(self) -> list[psutil.Process]:
        try:
            root = self.procs.get(self.root_pid) or psutil.Process(self.root_pid)
            found = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        current = {}
        for proc in found:
            # Reuse Process objects: psutil keys cpu_percent state on the object.
            current[proc.pid] = self.procs.get(proc.pid, proc)
        for pid in set(self.procs) - set(current):
            self.gone_cpu += self.cpu_by_pid.pop(pid, 0.0)
            self.gone_ctx += self.ctx_by_pid.pop(pid, 0)
        self.procs = current
        return list(current.values())

    def read(self) -> tuple[float, int, int, int, int, int]:
        """Returns cpu seconds, ctx switches, rss, threads, fds, processes."""
        rss = threads = fds = alive = 0
        for proc in self.members():
            try:
                with proc.oneshot():
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue  # dead but not reaped yet: holds nothing any more
                    times = proc.cpu_times()
                    ctx = proc.num_ctx_switches()
                    rss += proc.memory_info().rss
                    threads += proc.num_threads()
                    fds += proc.num_fds()
            except psutil.Error:
                continue
            self.cpu_by_pid[proc.pid] = times.user + times.system
            self.ctx_by_pid[proc.pid] = ctx.voluntary + ctx.involuntary
            alive += 1
        cpu = self.gone_cpu + sum(self.cpu_by_pid.values())
        switches = self.gone_ctx + sum(self.ctx_by_pid.values())
        return cpu, switches, rss, threads, fds, alive


class Monitor:
    """Background sampler. Use as a context manager; `samples` holds the readings.

    The engine pid may be set later (`watch_engine`), since the server starts first.
    """

    def __init__(self, server_pid: int, interval_s: float = DEFAULT_INTERVAL_S, on_sample=None):
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self.on_sample = on_sample
        self._server = _TreeClock(server_pid)
        self._engine: _TreeClock | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="serverlab-monitor", daemon=True)

    def watch_engine(self, pid: int) -> None:
        self._engine = _TreeClock(pid)

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        psutil.cpu_percent(None)  # primes the system-wide counter
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        start = time.monotonic()
        last_t = start
        last_cpu, last_ctx, *_ = self._server.read()
        last_engine = self._engine.read()[0] if self._engine else None
        tick = start
        while not self._stop.is_set():
            tick += self.interval_s
            # Sleeping to an absolute schedule keeps 10 samples a second without drift.
            self._stop.wait(max(0.0, tick - time.monotonic()))
            now = time.monotonic()
            cpu, ctx, rss, threads, fds, alive = self._server.read()
            elapsed = max(now - last_t, 1e-6)
            engine_pct, last_engine = self._engine_percent(last_engine, elapsed)
            mem = psutil.virtual_memory()
            sample = Sample(
                t=round(now - start, 3),
                cpu_percent=round(100.0 * (cpu - last_cpu) / elapsed, 2),
                rss_bytes=rss,
                threads=threads,
                fds=fds,
                ctx_switches=ctx - last_ctx,
                processes=alive,
                system_cpu_percent=psutil.cpu_percent(None),
                system_mem_used_bytes=mem.total - mem.available,
                engine_cpu_percent=engine_pct,
            )
            last_t, last_cpu, last_ctx = now, cpu, ctx
            self.samples.append(sample)
            if self.on_sample:
                with contextlib.suppress(Exception):
                    self.on_sample(sample)

    def _engine_percent(self, last: float | None, elapsed: float):
        if self._engine is None:
            return None, None
        cpu = self._engine.read()[0]
        if last is None:
            return None, cpu
        return round(100.0 * (cpu - last) / elapsed, 2), cpu
