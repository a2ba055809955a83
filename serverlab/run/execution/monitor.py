"""Samples a server's whole process tree and the system while a test runs (execution stage).

Two kinds of figure, kept apart:

- The load window's exact figures (`KernelWindow`), read from the kernel when the engine
  starts and when it stops: the server tree's CPU time, its peak memory (VmHWM, reset at
  the start), its sockets' kernel memory, and the machine's other load. The report's CPU
  and memory figures are these.
- Time series at 10 samples a second (`Sample`), what the seed 004 study did with
  `vmstat -SM -a 1` over ssh: CPU %, RSS, threads, open descriptors and context switches
  of the server's tree, the system's CPU and memory (once a second), and the load
  engine's own CPU so that a saturated generator can be flagged. They draw the charts.

The monitor's thread runs on the generator's CPUs, never the server's, and its own CPU
time is measured (`Monitor.own_cpu`).
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from serverlab.run.execution import procfs, sockdiag

DEFAULT_INTERVAL_S = 0.1
# The server's socket memory is read by the clock, not by a count of samples, so that a
# sampler woken late (and skipping the instants it missed) still reads it in a short load:
# first at the first sample this long after the load starts (its connections made), then at
# the first sample at least SOCKETS_EVERY_S after the previous reading. Each read makes the
# kernel walk the machine's whole TCP hash, 5-20 ms here: hence not at every sample.
SOCKETS_FIRST_S = 0.5
SOCKETS_EVERY_S = 2.0
# The server's tree is searched for new members this often (a scan of all of /proc).
MEMBERS_EVERY_S = 1.0
# Samples between two readings of the machine's CPU and memory (1 s): the kernel makes
# /proc/stat and /proc/meminfo afresh at every read, and the machine's busy share that
# flags a test comes from the load window's own readings, not from these.
MACHINE_EVERY = 10
SCAN_EVERY_S = 30.0
# What closed a load window: the engine's summary line (its load over), or, without one
# (a spread load, an engine that died), the executor seeing it gone.
ENGINE_SUMMARY, ENGINE_EXIT = "engine summary", "engine exit"
# What reading the tree's CPU clocks may cost the monitor per sample (0.1 % of a core at
# 10 Hz); above it, CPU is read every few samples only (_TreeClock).
CLOCK_BUDGET_S = 0.0001
# The CPU readings whose cost decides the thinning, by the cheapest of them. What a reading
# costs the monitor's thread is its walk over the server's threads plus whatever else landed
# in its window: a hand-over of the interpreter's lock to the runner's other threads (40-200
# us of this thread's CPU each, on this VM), a softirq, a cold cache. Those only ever add,
# so the cheapest recent reading is the walk's own cost: a few slowed readings thin nothing,
# and a server whose walks cost more every time thins by its fifth reading (half a second).
CLOCK_COSTS_KEPT = 5
# Processes of serverlab's own besides the runner's descendants: a lab run's Ray nodes,
# whose workers run the generators' engines (by command name, as the kernel shows it).
RAY_COMMANDS = ("raylet", "gcs_server")
RAY_PREFIX = "ray::"
# Where each figure of a test comes from, and over which window: kept in a run's metadata.
FIGURE_SOURCES = {
    "rps, p50, p99, errors": "engine: its summary line, over the measured run",
    "cpu": "kernel: change of the server tree's utime+stime+cutime+cstime (/proc/<pid>/stat)"
    " from just before the engine starts to its summary line (its load's end; its exit when"
    " it writes none), as % of one core over that window",
    "rss": "kernel: sum over the server tree's processes alive at the engine's stop of"
    " VmHWM (/proc/<pid>/status), reset through clear_refs (5) just before it starts",
    "socket_memory": "kernel: sock_diag skmem r+f+w+o+bl of the TCP sockets on the server's"
    f" port, read {SOCKETS_FIRST_S:g} s after the engine starts and every {SOCKETS_EVERY_S:g} s"
    " after while it runs; the last reading before its stop (a window the sampler took no"
    " such reading in is read once at its close, after the engine stopped, marked"
    " after_engine_stop)",
    "other_cpu": "kernel: /proc/stat busy ticks minus serverlab's processes (runner,"
    " monitor, servers, engines, Ray nodes), over the same window as cpu",
    "monitor_cpu": "kernel: the monitor thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and its"
    " /proc passes, over the monitor's life",
    "time series": "/proc and each process's CPU clock at 10 samples a second (machine"
    " memory once a second), for the charts only",
}


@dataclass
class Sample:
    t: float  # seconds since the monitor started
    cpu_percent: float | None  # server tree, 100 = one core busy; None: not read this time
    rss_bytes: int
    threads: int
    fds: int
    ctx_switches: int  # voluntary + involuntary since the previous sample
    processes: int
    system_cpu_percent: float | None  # whole machine, 100 = every core busy; once a second
    system_mem_used_bytes: int | None  # once a second, None between
    engine_cpu_percent: float | None  # the generator, 100 = one core busy

    def as_dict(self) -> dict:
        return asdict(self)


class _TreeClock:
    """CPU seconds, memory, threads, descriptors and context switches of a process tree,
    for the time series. Read straight from /proc and each process's CPU clock: psutil's
    search for children reads every process's stat, 10 ms a call beside a 5,000-thread
    server. New members are looked for every MEMBERS_EVERY_S (`_find_members`); one found
    late brings all its CPU time with it. Exited members keep their last readings in the
    totals, so that the tree's counters never go backwards.

    A process's CPU clock costs the kernel a walk over all its threads (about 0.3 ms for
    5,000 on this machine, three times that when it is busy). When the walks cost more than
    CLOCK_BUDGET_S a sample (the cheapest of the recent readings), CPU is read every
    `cpu_every` samples only, and the samples in between carry no CPU figure: the time
    series thins, the monitor stays light."""

    def __init__(self, root_pid: int, thin: bool = True):
        self.root_pid, self.thin = root_pid, thin  # thin: may skip CPU reads (see above)
        self.members: set[int] = {root_pid}
        self.found_at = self.scanned_at = -SCAN_EVERY_S
        self.last: dict[int, tuple[float, int]] = {}  # pid: (cpu seconds, switches)
        self.gone_cpu, self.gone_switches = 0.0, 0
        self.cpu_every, self.widest_cpu_every, self.count = 1, 1, 0
        self.clock_costs: collections.deque[float] = collections.deque(maxlen=CLOCK_COSTS_KEPT)

    def read(self) -> tuple[float | None, int, int, int, int, int]:
        """Returns cpu seconds (None when not read this time), ctx switches, rss, threads,
        fds, processes."""
        self._find_members()
        with_cpu = self.count % self.cpu_every == 0
        self.count += 1
        rss = threads = fds = alive = 0
        current, clock_cost = {}, 0.0
        for pid in self.members:
            row = procfs.sample(pid)
            if row is None:
                continue  # dead, reaped or not: it holds nothing any more
            cpu = self.last.get(pid, (0.0, 0))[0]
            if with_cpu:
                began = time.thread_time()
                cpu = procfs.cpu_seconds(pid)
                clock_cost += time.thread_time() - began
                if cpu is None:
                    continue
            switched, resident, tasks, descriptors = row
            current[pid] = (cpu, switched)
            rss, threads, fds = rss + resident, threads + tasks, fds + descriptors
            alive += 1
        if with_cpu and self.thin:
            self._budget(clock_cost)
        for pid in set(self.last) - set(current):
            cpu, switches = self.last.pop(pid)
            self.gone_cpu += cpu
            self.gone_switches += switches
        self.last.update(current)
        cpu = self.gone_cpu + sum(c for c, _ in self.last.values())
        switches = self.gone_switches + sum(s for _, s in self.last.values())
        return (cpu if with_cpu else None), switches, rss, threads, fds, alive

    def _find_members(self) -> None:
        """Children of main threads every second; every process's parent (a scan of all
        of /proc, which also finds children that other threads made) every 30 s."""
        now = time.monotonic()
        if now - self.scanned_at >= SCAN_EVERY_S:
            self.members = procfs.tree([self.root_pid], procfs.parents()) or {self.root_pid}
            self.scanned_at = self.found_at = now
        elif now - self.found_at >= MEMBERS_EVERY_S:
            self.members |= procfs.descendants(self.root_pid)
            self.found_at = now

    def _budget(self, cost_s: float) -> None:
        """Thins the CPU readings by what the recent ones cost (the cheapest: see
        CLOCK_COSTS_KEPT)."""
        self.clock_costs.append(cost_s)
        cost_s = min(self.clock_costs)
        self.cpu_every = max(1, math.ceil(cost_s / CLOCK_BUDGET_S))
        self.widest_cpu_every = max(self.widest_cpu_every, self.cpu_every)


def serverlab_roots(family: dict[int, tuple[int, str]]) -> list[int]:
    """serverlab's own processes: this one (the runner and the monitor, whose descendants
    are the servers and engines it starts) and, in a lab run, the Ray nodes."""
    ray = [
        pid
        for pid, (_, name) in family.items()
        if name in RAY_COMMANDS or name.startswith(RAY_PREFIX)
    ]
    return [os.getpid(), *ray]


@dataclass
class _Reading:
    at: float  # time.monotonic()
    wall: float  # time.time(), to place the window among other records
    machine: int  # ticks, every CPU
    server: int  # ticks, the server's tree
    ours: int  # ticks, serverlab's processes (the server's tree among them)
    server_pids: set[int]


def _read(server_pid: int) -> _Reading:
    family = procfs.parents()
    server = procfs.tree([server_pid], family)
    ours = procfs.tree(serverlab_roots(family), family) | server
    # The three counts are read together, so that they cover the same moment.
    machine = procfs.machine_busy_ticks()
    server_ticks = procfs.ticks(server, family)
    ours_ticks = server_ticks + procfs.ticks(ours - server, family)
    return _Reading(
        at=time.monotonic(),
        wall=time.time(),
        machine=machine,
        server=server_ticks,
        ours=ours_ticks,
        server_pids=server,
    )


class KernelWindow:
    """The load window: opened just before the engine starts, closed as its load ends (its
    summary line arrives; Monitor.close_window).

    CPU is the change of the tree's kernel CPU time (procfs), as % of one core over the
    window. Peak memory is the sum over the tree's processes alive at the close of each
    one's VmHWM, reset to its RSS at the open (or since its birth, for a process born in
    the window): a sum of peaks, which may exceed the tree's simultaneous peak, and which
    counts pages shared between processes once per process."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.start: _Reading | None = None
        self.figures: dict | None = None
        self.cost_s = 0.0  # this window's own CPU time (its /proc passes)

    def open(self) -> None:
        began = time.thread_time()
        self.start = _read(self.server_pid)
        self.reset = {pid: procfs.reset_peak(pid) for pid in self.start.server_pids}
        self.rss_at_open = _sum_kib(self.start.server_pids, "VmRSS")
        self.cost_s += time.thread_time() - began

    def close(self, sockets: dict | None = None) -> dict:
        began = time.thread_time()
        end = _read(self.server_pid)
        start = self.start
        window_s = max(end.at - start.at, 1e-6)

        def percent(ticks: int) -> float:
            return round(100.0 * ticks / procfs.TICKS_PER_S / window_s, 2)

        other = (end.machine - start.machine) - (end.ours - start.ours)
        self.figures = {
            "opened_at": start.wall,
            "closed_at": end.wall,
            "window_s": round(window_s, 3),
            "ticks_per_s": procfs.TICKS_PER_S,
            "server_cpu_ticks": end.server - start.server,
            "server_cpu_percent": percent(end.server - start.server),
            "machine_cpu_ticks": end.machine - start.machine,
            "serverlab_cpu_ticks": end.ours - start.ours,
            "other_cpu_percent": percent(max(other, 0)),
            "peak_rss_bytes": 1024 * _sum_kib(end.server_pids, "VmHWM"),
            "rss_at_open_bytes": 1024 * self.rss_at_open,
            "processes": len(end.server_pids),
            "processes_exited": len(start.server_pids - end.server_pids),
            "peak_not_reset": sorted(p for p, done in self.reset.items() if not done),
            "sockets": sockets,
        }
        self.cost_s += time.thread_time() - began
        return self.figures


def _sum_kib(pids: set[int], key: str) -> int:
    return sum(procfs.status_kib(pid, key).get(key, 0) for pid in pids)


def next_tick(start: float, interval_s: float, now: float) -> float:
    """The schedule's next instant at least half an interval after `now`. A sampler woken
    late skips the instants it missed rather than taking them back to back: a sample over a
    millisecond turns one 10 ms clock tick of the server's CPU into hundreds of percent
    (seen as 617 % on this 2-core machine when the sampler woke 0.3 s late)."""
    slots = math.floor((now + interval_s / 2 - start) / interval_s) + 1
    return start + slots * interval_s


class Monitor:
    """Background sampler. Use as a context manager; `samples` holds the readings.

    The engine pid may be set later (`watch_engine`), since the server starts first. The
    load window (`open_window`, `close_window`) gives the exact figures.

    The socket figure's window: while the load window is open, the server's sockets (local
    port `port`) are read through sock_diag, on a socket from `diag_socket` (made in the
    server's network namespace), at the first sample SOCKETS_FIRST_S after the load starts
    (the window's open, or the instant given to `load_starts`), then at the first sample
    SOCKETS_EVERY_S after each reading. `sockets` keeps the last reading (the figure: the
    last before the engine stopped) and the one with the most kernel memory. However few
    samples a starved sampler takes, every window has a reading: one that got none from
    the sampler is read once by `close_window`, after the engine stopped, and that reading
    says so (`after_engine_stop`).
    """

    def __init__(
        self,
        server_pid: int,
        interval_s: float = DEFAULT_INTERVAL_S,
        on_sample=None,
        cpus: str | None = None,
        port: int | None = None,
        diag_socket: Callable | None = None,
    ):
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self.on_sample = on_sample
        self.cpus, self.port = cpus, port
        self.window = KernelWindow(server_pid)
        self.sockets: dict | None = None  # the last reading and the peak, while loaded
        self.own_cpu: dict | None = None
        # The sampler reads the sockets and close_window may: one at a time, on one socket.
        self._diag = _Diag(diag_socket or sockdiag.open_socket, port)
        self._diag_lock = threading.Lock()
        self._sockets_due: float | None = None  # time.monotonic() of the next reading
        self._diag_cost_s = 0.0  # the sampler's sock_diag reads (its own thread's time)
        self._close_diag_cost_s = 0.0  # close_window's reading, on the executor's thread
        self._t0 = time.monotonic()  # the samples' clock; reset when the sampler starts
        self._window_open = threading.Event()
        # The engine's summary line (its reader's thread) and the executor may both close.
        self._close_lock = threading.Lock()
        self._server = _TreeClock(server_pid)
        self._engine: _TreeClock | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="serverlab-monitor", daemon=True)

    def watch_engine(self, pid: int) -> None:
        self._engine = _TreeClock(pid, thin=False)

    def open_window(self) -> None:
        """Just before the engine starts: the kernel's counters, and the peaks reset."""
        try:
            self.window.open()
        except (OSError, ValueError) as err:
            self.window.figures = {"error": f"reading /proc at the engine's start: {err}"}
            return
        with self._diag_lock:
            self.sockets = None
            self._sockets_due = time.monotonic() + SOCKETS_FIRST_S
            self._window_open.set()

    def load_starts(self, at: float) -> None:
        """The instant (time.monotonic()) the load starts, when that is later than the
        window's open: a distributed run's generators start together seconds after it, and
        a socket reading before then would see none of their connections."""
        with self._diag_lock:
            if self._window_open.is_set():
                self._sockets_due = max(at, time.monotonic()) + SOCKETS_FIRST_S

    def clock(self, at: float) -> float:
        """An instant of time.monotonic() on the samples' clock: seconds since the start."""
        return round(at - self._t0, 3)

    def close_window(self, on: str = ENGINE_EXIT) -> dict:
        """As the engine's load ends: the window's figures (also in `window.figures`), with
        what closed it (`on`). The first call closes it; later ones return what it read."""
        with self._close_lock:
            figures = self._close_window()
            figures.setdefault("closed_on", on)
            return figures

    def _close_window(self) -> dict:
        if not self._window_open.is_set():
            return self.window.figures or {}
        with self._diag_lock:
            self._window_open.clear()
            if self.sockets is None:
                # The sampler took no reading in the window (starved, or the load was
                # shorter than SOCKETS_FIRST_S): one now, marked as taken after the stop.
                began = time.thread_time()
                self._read_sockets(after_engine_stop=True)
                self._close_diag_cost_s += time.thread_time() - began
            sockets = self.sockets
        try:
            return self.window.close(sockets)
        except (OSError, ValueError) as err:
            self.window.figures = {"error": f"reading /proc at the engine's stop: {err}"}
            return self.window.figures

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _pin(self) -> str | None:
        """This thread onto the generator's CPUs (pid 0: the calling thread only)."""
        if not self.cpus:
            return None
        try:
            os.sched_setaffinity(0, {int(c) for c in self.cpus.split(",") if c})
        except (OSError, ValueError) as err:
            return str(err)
        return None

    def _own_cpu(self, began_cpu: float, began: float, pin_error: str | None) -> None:
        """The monitor's CPU time over its life, in parts: the 10 Hz sampler, its sock_diag
        reads (inside the thread's time) and the load window's /proc passes (made on the
        executor's thread)."""
        lived = max(time.monotonic() - began, 1e-6)
        thread = time.thread_time() - began_cpu
        used = thread + self.window.cost_s + self._close_diag_cost_s
        sampler = thread - self._diag_cost_s

        def percent(seconds: float) -> float:
            return round(100.0 * seconds / lived, 3)

        self.own_cpu = {
            "cpu_s": round(used, 4),
            "lived_s": round(lived, 3),
            "cpu_percent": percent(used),
            "sampler_cpu_percent": percent(sampler),
            "sockets_cpu_percent": percent(self._diag_cost_s + self._close_diag_cost_s),
            "window_cpu_percent": percent(self.window.cost_s),
            "interval_s": self.interval_s,
            "samples": len(self.samples),
            # The server's CPU was read every this many samples at the sparsest.
            "server_cpu_every": self._server.widest_cpu_every,
            "cpus": sorted(os.sched_getaffinity(0)) if pin_error is None else None,
            "pin_error": pin_error,
        }

    def _loop(self) -> None:
        pin_error = self._pin()
        began_cpu = time.thread_time()
        start = self._t0 = time.monotonic()
        try:
            self._sample_until_stopped(start)
        finally:
            self._own_cpu(began_cpu, start, pin_error)

    def _sample_until_stopped(self, start: float) -> None:
        last_t = last_cpu_t = start
        last_cpu, last_ctx, *_ = self._server.read()
        last_engine = self._engine.read()[0] if self._engine else None
        machine = procfs.machine_ticks()
        try:
            while not self._stop.is_set():
                # Sleeping to an absolute schedule keeps 10 samples a second without drift.
                # A plain sleep costs this VM a third less CPU per wake than an Event's
                # timed wait; a stop waits at most one interval for its last sample.
                tick = next_tick(start, self.interval_s, time.monotonic())
                time.sleep(max(0.0, tick - time.monotonic()))
                now = time.monotonic()
                cpu, ctx, rss, threads, fds, alive = self._server.read()
                cpu_percent = None
                if cpu is not None:
                    cpu_percent = round(100.0 * (cpu - last_cpu) / max(now - last_cpu_t, 1e-6), 2)
                    last_cpu, last_cpu_t = cpu, now
                engine_pct, last_engine = self._engine_percent(last_engine, max(now - last_t, 1e-6))
                once = len(self.samples) % MACHINE_EVERY == 0  # a second's first sample
                system_pct, machine = _machine_percent(machine) if once else (None, machine)
                sample = Sample(
                    t=round(now - start, 3),
                    cpu_percent=cpu_percent,
                    rss_bytes=rss,
                    threads=threads,
                    fds=fds,
                    ctx_switches=ctx - last_ctx,
                    processes=alive,
                    system_cpu_percent=system_pct,
                    system_mem_used_bytes=procfs.memory_used_bytes() if once else None,
                    engine_cpu_percent=engine_pct,
                )
                last_t, last_ctx = now, ctx
                self._keep(sample)
        finally:
            with self._diag_lock:
                self._diag.close()

    def _keep(self, sample: Sample) -> None:
        self.samples.append(sample)
        if self._window_open.is_set():
            self._sockets_if_due()
        if self.on_sample:
            with contextlib.suppress(Exception):
                self.on_sample(sample)

    def _sockets_if_due(self) -> None:
        """A sock_diag reading, when the window is open and the clock says one is due."""
        with self._diag_lock:
            now = time.monotonic()
            due = self._sockets_due
            if not self._window_open.is_set() or due is None or now < due:
                return
            began = time.thread_time()
            self._read_sockets()
            self._diag_cost_s += time.thread_time() - began
            # Counted from this reading: a late one moves the next, never brings two at once.
            self._sockets_due = now + SOCKETS_EVERY_S

    def _read_sockets(self, **mark) -> None:
        """One reading into `sockets` (the caller holds the lock); `t` on the samples' clock."""
        t = round(time.monotonic() - self._t0, 3)
        self.sockets = self._diag.read(self.sockets, t, **mark)

    def _engine_percent(self, last: float | None, elapsed: float):
        if self._engine is None:
            return None, None
        cpu = self._engine.read()[0]
        if last is None:
            return None, cpu
        return round(100.0 * (cpu - last) / elapsed, 2), cpu


def _machine_percent(last: tuple[int, int]) -> tuple[float, tuple[int, int]]:
    """The machine's CPU use since `last` (100 = every core busy), and the new reading."""
    now = procfs.machine_ticks()
    total = now[1] - last[1]
    return (round(100.0 * (now[0] - last[0]) / total, 1) if total else 0.0), now


class _Diag:
    """The server's sockets, read through sock_diag: the last reading and the one with the
    most kernel memory. A failure is kept as its message, never raised."""

    def __init__(self, opener: Callable, port: int | None):
        self.opener, self.port, self.sock = opener, port, None
        self.closed = False  # by the sampler's end: a reading after it opens nothing
        self.families = sockdiag.FAMILIES  # narrowed to the listener's at the first read

    def read(self, previous: dict | None, t: float, **mark) -> dict | None:
        """`mark`: what else to say of this reading (that it came after the engine's stop)."""
        if self.port is None or self.closed:
            return previous
        try:
            if self.sock is None:
                self.sock = self.opener()
            reading = {"t": t, **self._read().as_dict(), **mark}
        except OSError as err:
            return {**(previous or {}), "error": str(err)}
        peak = (previous or {}).get("peak")
        if peak is None or reading["kernel_bytes"] >= peak["kernel_bytes"]:
            peak = reading
        return {"last": reading, "peak": peak, "port": self.port, "source": "sock_diag"}

    def _read(self) -> sockdiag.SocketMemory:
        if len(self.families) == 1:
            return sockdiag.read(self.sock, self.port, self.families)
        found = {f: sockdiag.read(self.sock, self.port, (f,)) for f in self.families}
        listening = tuple(f for f, memory in found.items() if memory.sockets)
        self.families = listening or self.families
        return sockdiag.SocketMemory(
            sum(m.sockets for m in found.values()),
            sum(m.established for m in found.values()),
            sum(m.kernel_bytes for m in found.values()),
        )

    def close(self) -> None:
        self.closed = True
        if self.sock is not None:
            self.sock.close()
            self.sock = None
