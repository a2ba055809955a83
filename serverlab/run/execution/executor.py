"""The executor: one TestPlan becomes one recorded test, on this machine.

It reads only the plan (never the suite it came from) and binds it to this host: a fresh
server on a free port, pinned to its CPUs, inside a shaped link when the plan has one. Then:
smoke-check the server against the spec, warm it up, make the control calls, start the
monitor, prime, run the engine, read `/stats`, clear the emitters, stop the server, read
the runtime's side file (serverlab.run.execution.signals). What it bound (ports, pids, CPUs, the
namespace) and what happened on the way (priming outcomes) is stored beside the test in
`run_info`, never in what identifies it.

A server that dies is a crash to record; Ctrl-C propagates once the server, the engine and
the link are gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serverlab.base import httpclient
from serverlab.base.netns import NetnsError
from serverlab.base.spec import HELD_REQUESTS
from serverlab.base.tlskeys import DEFAULT_KEY_TYPE
from serverlab.contestant.manifest import Manifest
from serverlab.contestant.placeholders import GRPC_OWN_PORTS
from serverlab.contestant.server import (
    LOOPBACK,
    TLS_FOLDER,
    ContestantServer,
    ServerError,
    log_tail,
)
from serverlab.results.records import Crash, MonitorSample, RecordedTest, ServerStats
from serverlab.run.execution import capacity, sockdiag
from serverlab.run.execution.monitor import ENGINE_SUMMARY, Monitor
from serverlab.run.execution.receiver import ReceiverWatch, put_receiver_figures
from serverlab.run.execution.records import put_load
from serverlab.run.execution.signals import read_signals
from serverlab.run.execution.testplan import (
    CLIENTS_LEVEL,
    EVENT_SET,
    ControlCall,
    TestPlan,
    bind,
    with_paths,
)
from serverlab.run.execution.timed import CALL_TIMEOUT_S, TimedCalls, failures
from serverlab.run.execution.traffic import Load, LoadResult, LocalLoad
from serverlab.run.execution.validity import assess
from serverlab.run.execution.warmup import SteadyWatch, jit_clock
from serverlab.run.host import fileset, shapedlink
from serverlab.run.host.leftovers import work_folder
from serverlab.run.host.machine import Pinning

# Polls of a dying server give the engine this long to see the refused connections.
CRASH_SETTLE_S = 1.0
# GET /stats after the load is retried this long (each try at most STATS_TRY_S) before the
# test says the server could not answer it, and why.
STATS_LIMIT_S = 15.0
STATS_TRY_S = 3.0
# ... unless the plan and the manifest say every request thread is held until the holds'
# timeout (held_threads): the silence is known before the first try, and one try shows it
# as well as 15 s would (java-tomcat-blocking's long polls cost the demo 15 s a test).
STATS_HELD_LIMIT_S = STATS_TRY_S
OOM_MARKERS = ("OutOfMemoryError", "out of memory", "Out of memory", "heap out of memory")


@dataclass
class Environment:
    """What a test runs with on this machine, passed explicitly."""

    manifest_of: Callable[[str], Manifest]
    pinning: Pinning
    workdir: Path  # this run's scratch space lives under it (see leftovers.work_folder)
    run_id: int | None = None
    progress: Any = None  # a serverlab.run.plan.progress.Progress, or None when quiet
    # Where the load comes from; None: one engine on this machine (run.execution.traffic.LocalLoad).
    load: Load | None = None
    # The address servers listen on besides loopback: this host's in a lab or cluster.
    host: str = LOOPBACK

    @property
    def filesets_dir(self) -> Path:
        # Beside the results database (results/filesets/), generated once and kept.
        return self.workdir.parent / "filesets"

    @property
    def logs_dir(self) -> Path:
        return self.workdir.parent / "logs"


def execute(plan: TestPlan, env: Environment) -> RecordedTest:
    """Runs one test, inside a shaped link when the plan has one. Never raises for what
    the server does."""
    if plan.link is None:
        return _execute(plan, env, None)
    try:
        link = plan.link
        with shapedlink.shaped_namespace(
            link.rate_mbit, link.delay_ms, link.loss_pct, cpus=env.pinning.engine
        ) as namespace:
            test = _execute(plan, env, namespace)
    except NetnsError as err:
        test = new_test(plan, env)
        test.status = "invalid"
        test.validity = {"link_failed": str(err)[:2000]}
        return test
    test.run_info["link"] = namespace.metadata()
    if plan.link.delay_ms and not namespace.delay_applied:
        test.validity["link_delay_unavailable"] = (
            f"{plan.link.delay_ms} ms not applied (no sch_netem, no delay line built); "
            f"rate {plan.link.rate_mbit} Mbit/s"
        )
    return test


def new_test(plan: TestPlan, env: Environment) -> RecordedTest:
    started = time.time()
    return RecordedTest(
        run_id=env.run_id,
        permutation_key=plan.key,
        contestant=plan.contestant,
        repeat_index=plan.repeat,
        status="ok",
        started_at=started,
        ended_at=started,
        scenario=plan.scenario,
        params=plan.params,
        tunables=plan.tunables,
        plan=plan.as_dict(),
    )


def _execute(plan: TestPlan, env: Environment, namespace) -> RecordedTest:
    test = new_test(plan, env)
    if plan.server_cpus:
        env = dataclasses.replace(env, pinning=env.pinning.with_server_cpus(plan.server_cpus))
    # Under this process's own folder: if it dies, the next run removes the folder whole.
    workdir = work_folder(env.workdir) / f"test-{int(test.started_at * 1000)}"
    files = fileset.materialize(plan.fileset, env.filesets_dir) if plan.fileset else None
    options = {
        "settings": plan.tunables,
        "cpus": env.pinning.server,
        "workdir": workdir,
        "docroot": files.root if files else None,
        # Behind the delay line the load arrives at the server namespace's link address.
        "host": namespace.server_address if namespace and namespace.client_netns else env.host,
        "tls_key_type": plan.tls_key or DEFAULT_KEY_TYPE,
    }
    try:
        server = _server(env.manifest_of(plan.contestant), namespace, options)
    except ServerError as err:  # a tunable the manifest refuses: nothing was started
        test.status = "invalid"
        test.validity = {"start_failed": str(err)[:2000]}
        return test
    try:
        server.start()
    except ServerError as err:
        test.status = "crashed"
        test.crash = _crash(server, at_s=0.0)
        test.validity = {"start_failed": str(err)[:2000]}
        test.ended_at = time.time()
        _keep_log(env, test, server)
        return test
    test.run_info.update(_bound(server, env, namespace))
    paths = files.weighted_paths() if files else None
    try:
        _Measurement(plan, env, server, test, paths).run()
    except (ServerError, httpclient.HttpError, OSError, ValueError) as err:
        # The server misbehaved outside the measurement (a control call failed, say):
        # a result about this test, not a reason to stop the suite.
        _record_failure(test, server, err)
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        test.ended_at = time.time()
        try:
            _put_signals(test, server)
        finally:
            # Whatever failed above, the folder (and the key in it) does not outlive the test.
            if test.status == "ok":
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                _keep_log(env, test, server)
    return test


def _server(manifest: Manifest, namespace, options: dict) -> ContestantServer:
    if namespace is None:
        return ContestantServer(manifest, **options)
    return shapedlink.NamespacedServer(namespace, manifest, **options)


def _bound(server: ContestantServer, env: Environment, namespace) -> dict[str, Any]:
    """What this host gave the plan's roles: stored beside the test."""
    ports = {"http": server.port, "syslog": server.syslog_port}
    ports.update({name.removesuffix("_port"): port for name, port in server.part_ports.items()})
    return {
        "ports": ports,
        "server_pid": server.process.pid,
        "cpus": {"server": env.pinning.server, "engine": env.pinning.engine},
        "namespace": namespace.name if namespace else None,
    }


def _grpc_ports(server: ContestantServer) -> dict[str, int]:
    """Where a gRPC plan's target goes (spec §16): the gRPC server's own ports, or the
    HTTP/2 ones it shares."""
    ports = {"grpc_port": server.grpc_port, "grpc_tls_port": server.grpc_tls_port}
    return {name: port for name, port in ports.items() if port is not None}


def _local_load(env: Environment, server: ContestantServer) -> LocalLoad:
    """The engine on this machine: in the shaped link's client namespace when it has one."""
    if not isinstance(server, shapedlink.NamespacedServer):
        return LocalLoad(env.pinning.engine)
    ns = server.namespace
    if isinstance(ns, shapedlink.ShapedNamespace):
        return LocalLoad(env.pinning.engine, ns.load_netns, ns.server_address)
    return LocalLoad(env.pinning.engine, ns.name)


class _Measurement:
    """The part of a test between a ready server and its stop."""

    def __init__(self, plan, env, server, test: RecordedTest, paths: list | None):
        self.plan, self.env, self.server, self.test = plan, env, server, test
        self.load = env.load or _local_load(env, server)
        self.where = {
            "host": self.load.target_host,
            "port": server.port,
            "syslog_port": server.syslog_port,
            **server.part_ports,
            **_grpc_ports(server),
            "tls_ca": str(server.tls.ca_cert) if server.tls else "",
        }
        measured = bind(plan.measured, **self.where)
        if paths:
            measured = with_paths(measured, paths)
        # A warm-up phase inside the measured run needs a load whose engine can be told
        # when to measure; elsewhere the warm-up runs apart, before (docs/warmup.md).
        self.warms_in_run = "warmup_max_s" in measured and self.load.live_measure
        if not self.warms_in_run:
            measured.pop("warmup_max_s", None)
        self.measured = measured

    def run(self) -> None:
        plan, server, test = self.plan, self.server, self.test
        problem = smoke_check(server, plan)
        if problem:
            test.status = "invalid"
            test.validity = {"not_conforming": problem}
            return
        # The control calls first (logging off, say): the warm-up must warm the code the
        # measured run takes, or a JIT recompiles the switched path in the measured window.
        self._control(plan.control, "before")
        if plan.warmup is not None and not self.warms_in_run:
            self._warm_up()
        threads = held_threads(plan, self.env.manifest_of(plan.contestant))
        if threads is not None:
            # Every request thread is held by the plan: the report's findings state it.
            test.run_info["request_threads_held"] = threads
        if plan.read_stats:
            self._read_stats("start")
        progress = self.env.progress
        monitor = Monitor(
            server.process.pid,
            on_sample=progress and progress.sample,
            cpus=self.env.pinning.engine,  # the generator's CPUs, never the server's
            port=self._load_port(),
            diag_socket=lambda: _call(server, sockdiag.open_socket),
        )
        # Where the monitor's clock starts, on the test's: runtime signals are laid on it.
        test.run_info["monitor_t0_s"] = round(time.time() - test.started_at, 3)
        with monitor:
            # Priming runs load the server exactly as the measured run will, with the
            # monitor on so that the peak RSS includes them (seed 003's first `ab` run).
            crash = self._prime()
            watch = ReceiverWatch(server) if plan.count_at_receiver and crash is None else None
            result = LoadResult(None)
            try:
                if crash is None and plan.capacity is not None:
                    result, crash = self._search(monitor)
                elif crash is None and self.warms_in_run:
                    result, crash = self._warm_and_measure(monitor)
                elif crash is None:
                    on_interval = progress and progress.interval
                    result, crash = self._load(
                        self.measured, "plan", plan.budget_s, monitor, on_interval, plan.during
                    )
                receiver = watch.settle() if watch and crash is None else None
            finally:
                if watch:
                    watch.stop()
        if crash is None and plan.read_stats:
            self._after()
        test.crash = crash
        _fill(test, result, monitor, self.measured)
        _window_start(test, plan, result.summary)
        if plan.count_at_receiver and crash is None:
            put_receiver_figures(test, receiver, server)
        test.status, test.validity = assess(test, self.env.pinning, crash)

    def _search(self, monitor: Monitor):
        """A capacity search's steps on this server (serverlab.run.execution.capacity). A push
        step sets the emitters afresh (the step before cleared them at its intended stop)
        and makes the plan's timed calls, as a push test does."""
        plan = self.plan
        on_interval = self.env.progress and self.env.progress.interval
        emitters = tuple(call for call in plan.control if call.path == EVENT_SET)

        def step(engine_plan, tag):
            if plan.capacity.level == CLIENTS_LEVEL:
                self._control(emitters, "step")
            return self._load(engine_plan, tag, plan.budget_s, monitor, on_interval, plan.during)

        return capacity.search_steps(step, self.measured, plan, monitor, self.test.run_info)

    def _warm_up(self) -> None:
        """The warm-up engine run, stopped once its rate is steady (execution.warmup) and
        not before `warmup_s`; what it found goes in run_info["warmup"]."""
        plan = self.plan
        cap_s = max(plan.warmup_max_s, plan.warmup_s)
        watch = SteadyWatch(plan.warmup_s, jit=jit_clock(self.server.process.pid))
        warmup = bind(plan.warmup, **self.where)
        started_ms = round(time.time() * 1000, 1)
        result, _ = self._load(
            warmup, "warmup", cap_s + plan.grace_s, on_interval=watch.interval, until=watch.done
        )
        if not watch.rates:  # a spread load hands its interval lines over at the end
            watch.jit = None  # the compiler threads' ticks now are not those of its lines
            for line in result.intervals:
                watch.interval(line)
        ran = (result.summary or {}).get("duration_s")
        self.test.run_info["warmup"] = {**watch.record(cap_s, ran), "started_ms": started_ms}

    def _warm_and_measure(self, monitor: Monitor) -> tuple[LoadResult, Crash | None]:
        """One engine run: its warm-up phase until the rate is steady (execution.warmup),
        not before `warmup_s`, then the measured window on the same connections, threads and
        JIT state. The executor judges the rate and tells the engine to measure; the engine
        measures from its cap if never told. The kernel's window opens as the measured one
        begins. What the warm-up found goes in run_info["warmup"]."""
        plan, progress = self.plan, self.env.progress
        cap_s = max(plan.warmup_max_s, plan.warmup_s)
        watch = SteadyWatch(plan.warmup_s, jit=jit_clock(self.server.process.pid))
        phases = _Phases(watch, monitor, progress and progress.interval)
        started_ms = round(time.time() * 1000, 1)
        result, crash = self._load(
            self.measured, "plan", cap_s + plan.budget_s, monitor, phases.interval, phases=phases
        )
        measure = result.measure or {}
        record = watch.record(cap_s, measure.get("elapsed_s"))
        record.update(started_ms=started_ms, same_run=True, ended_by=measure.get("by"))
        self.test.run_info["warmup"] = record
        return result, crash

    def _load_port(self) -> int:
        """The server port the measured load connects to: its sockets are the monitor's."""
        target = self.plan.measured["target"]
        ports = {**self.server.part_ports, **_grpc_ports(self.server)}
        for name in ("tls_port", "h2c_port", "syslog_tls_port", *GRPC_OWN_PORTS):
            if f"{{{name}}}" in target:
                return ports[name]
        return self.server.port

    def _prime(self) -> Crash | None:
        """The measured load `priming_runs` times; a short note of each goes in run_info."""
        notes = []
        for index in range(self.plan.priming_runs):
            result, crash = self._load(self.measured, f"priming-{index}", self.plan.budget_s)
            summary = result.summary or {}
            keep = ("requests", "answered", "ok", "rps", "duration_s", "valid")
            notes.append({k: summary.get(k) for k in keep})
            self.test.run_info["priming"] = notes
            if crash is not None:
                return crash
        return None

    def _load(
        self,
        plan,
        tag,
        budget_s,
        monitor=None,
        on_interval=None,
        during=(),
        until=None,
        phases: _Phases | None = None,
    ):
        """Runs one load and waits for it, making the `during` calls on their own thread when
        their time comes; returns what it produced and the server's crash, if the server died
        meanwhile (the load then sees the refused connections for a moment: they are part of
        the result). `until`: the load is stopped early once it says so. `phases`: the plan
        has a warm-up phase, which they end, and the monitor's window opens after it."""
        on_end = None
        if monitor is not None:
            if phases is None:
                monitor.open_window()  # the exact figures cover the engine's run, no more
            # Closed as the engine's summary arrives (its load is over then), not once its
            # process has exited: a JIT compiling on after the load would be counted.
            on_end = functools.partial(monitor.close_window, ENGINE_SUMMARY)
        running = self.load.begin(
            plan,
            self.server.workdir,
            tag,
            on_interval,
            http_port=self.server.port,
            on_end=on_end,
            **({"on_measure": phases.measured} if phases else {}),
        )
        if phases is not None:
            phases.running = running
        if monitor is not None:
            monitor.load_starts(running.starts_at)  # the sockets are read once it has begun
            # Where the load's clock (its interval lines' elapsed_s) starts on the samples':
            # the report lays an attack group's window on the server's CPU, RSS and fds.
            self.test.run_info["load_started_s"] = monitor.clock(running.starts_at)
            if running.local_pid is not None:
                monitor.watch_engine(running.local_pid)
        crash = None
        timed = TimedCalls(during, self._send, running.starts_at).start()
        try:
            deadline = time.monotonic() + budget_s
            while not running.done():
                if self.server.poll() is not None:
                    crash = _crash(self.server, at_s=time.time() - self.test.started_at)
                    time.sleep(CRASH_SETTLE_S)
                    running.stop()
                    break
                if time.monotonic() > deadline or (until is not None and until()):
                    running.stop()
                    break
                time.sleep(0.1)
        except KeyboardInterrupt:
            running.stop()
            timed.abandon()
            raise
        if monitor is not None:
            monitor.close_window()
        if during:
            # After the window: a call still blocked on a busy server is waited for here.
            self._stamped(timed)
        return running.finish(), crash

    def _send(self, call: ControlCall, timeout_s: float) -> httpclient.Response:
        port = self.server.port
        return _call(
            self.server, httpclient.call_json, port, call.method, call.path, call.body, timeout_s
        )

    def _stamped(self, timed: TimedCalls) -> None:
        """The timed calls' stamps in run_info, the window they bound, and their failures."""
        records = [{**record, "phase": "during"} for record in timed.finish()]
        self.test.run_info.setdefault("control_calls", []).extend(records)
        if self.plan.emit_window_s is not None and timed.pending:
            # The emitters' intended stop: when the plan's clear was due, on this host's clock.
            stop = timed.due_wall(timed.pending[-1])
            self.test.run_info["emit_window"] = {"stop_ms": round(stop * 1000, 1)}
        failed = failures(records)
        if failed:
            self.test.validity["control_call_failed"] = "; ".join(failed)

    def _control(self, calls: tuple[ControlCall, ...], phase: str) -> None:
        """Calls made at once, before or after the load: stamped too (no due time: the plan
        gives them none), and the first that fails stops the test."""
        for call in calls:
            sent = time.time()
            answer = self._send(call, CALL_TIMEOUT_S)
            stamp = {"method": call.method, "path": call.path, "phase": phase}
            stamp.update(sent_ms=round(sent * 1000, 1), answered_ms=round(time.time() * 1000, 1))
            self.test.run_info.setdefault("control_calls", []).append(
                {**stamp, "status": answer.status}
            )
            if answer.status != 200:
                raise ServerError(f"{call.method} {call.path} answered {answer.status}")

    def _read_stats(self, phase: str, timeout_s: float = 5.0) -> None:
        stats = self.server.stats(timeout_s=timeout_s)
        at = time.time() - self.test.started_at
        self.test.server_stats.append(ServerStats(t=at, stats=stats, phase=phase))

    def _after(self) -> None:
        manifest = self.env.manifest_of(self.plan.contestant)
        if not self._read_stats_until(stats_limit_s(self.plan, manifest)):
            return
        try:
            self._control(self.plan.after, "after")
        except (httpclient.HttpError, OSError, ValueError, ServerError) as err:
            self.test.validity["control_call_failed"] = f"after the load: {err}"

    def _read_stats_until(self, limit_s: float) -> bool:
        """GET /stats, tried again until it answers or `limit_s` passes; when it never does,
        the test says so in the server's terms (see stats_silence)."""
        give_up = time.monotonic() + limit_s
        while True:
            left = give_up - time.monotonic()
            try:
                self._read_stats("end", timeout_s=max(0.5, min(STATS_TRY_S, left)))
                return True
            except (httpclient.HttpError, OSError, ValueError) as err:
                if time.monotonic() + 0.5 >= give_up:
                    manifest = self.env.manifest_of(self.plan.contestant)
                    reason = stats_silence(self.plan, manifest, limit_s, err)
                    self.test.validity["stats_unreadable"] = reason
                    # The same as a figure, for the report's findings (report.findings).
                    self.test.run_info["stats_unanswered_s"] = limit_s
                    return False
                time.sleep(0.5)


def stats_limit_s(plan: TestPlan, manifest: Manifest) -> float:
    """How long GET /stats is tried after the load: briefly where every request thread is
    known to be held (STATS_HELD_LIMIT_S)."""
    return STATS_LIMIT_S if held_threads(plan, manifest) is None else STATS_HELD_LIMIT_S


class _Phases:
    """Routes a warm-up phase's interval lines to the steady rule and the measured ones to
    the progress display; asks the engine to measure once the rule is met, and opens the
    monitor's window as the measured window begins. Called on the engine reader's thread."""

    def __init__(self, watch: SteadyWatch, monitor: Monitor, on_interval: Callable | None):
        self.watch, self.monitor, self.on_interval = watch, monitor, on_interval
        self.running: Any = None  # set once the load has begun
        self.measuring = False

    def interval(self, line: dict) -> None:
        if self.measuring:
            if self.on_interval:
                self.on_interval(line)
            return
        self.watch.interval(line)
        if self.watch.done() and self.running is not None:
            self.running.measure()  # the engine measures from its next interval boundary

    def measured(self, line: dict) -> None:
        self.measuring = True
        self.monitor.open_window()


def stats_silence(plan: TestPlan, manifest: Manifest, limit_s: float, err: Exception) -> str:
    """Why GET /stats went unanswered, from what the plan and the manifest say: a server with
    a fixed pool of request threads and at least as many held long polls or streams has none
    left until the holds end."""
    text = f"GET /stats unanswered for {limit_s:g} s after the load ({err})"
    threads = held_threads(plan, manifest)
    if threads is None:
        return text
    behaviour = plan.params["behaviour"]
    clients = int(plan.params.get("clients", 0))
    hold = plan.params.get(f"{behaviour}_duration_ms")
    until = f"until their {hold / 1000:g} s timeout" if hold else "until they end"
    return (
        f"all {threads:,} request threads ({manifest.architecture}) held by the plan's "
        f"{clients:,} {HELD_REQUESTS[behaviour]} {until}; {text}"
    )


def held_threads(plan: TestPlan, manifest: Manifest) -> int | None:
    """The server's request threads, when the plan holds at least as many long polls or
    comet streams as there are (every thread is then held); None otherwise."""
    tunable = manifest.tunables.get("threads")
    threads = plan.tunables.get("threads") or (tunable.default if tunable else None)
    behaviour = plan.params.get("behaviour")
    if not threads or not str(threads).isdigit() or behaviour not in HELD_REQUESTS:
        return None
    return int(threads) if int(plan.params.get("clients", 0)) >= int(threads) else None


def smoke_check(server: ContestantServer, plan: TestPlan) -> str | None:
    """The per-test conformance check: cheap, and enough to catch a wrong build or a server
    that came up broken. The full `serverlab verify` runs once per contestant before."""
    smoke = plan.smoke
    try:
        if smoke.perf_body is not None:
            r = _call(server, httpclient.get, server.port, "/perf")
            if r.status != 200 or r.body != smoke.perf_body.encode():
                return f"GET /perf answered {r.status} with {len(r.body)} bytes"
        if smoke.spec_major is not None:
            version = str(server.stats().get("spec_version", ""))
            if version.split(".")[0] != str(smoke.spec_major):
                return f"/stats spec_version is {version!r}, not {smoke.spec_major}.x"
    except (httpclient.HttpError, OSError, ValueError) as err:
        return f"smoke check failed: {err}"
    return None


def _call(server: ContestantServer, function, *args, **kwargs):
    """A request to the server, from inside its namespace when it has one (the spec
    answers control calls from loopback only)."""
    if isinstance(server, shapedlink.NamespacedServer):
        return server.call(function, *args, **kwargs)
    return function(*args, **kwargs)


def _put_signals(test: RecordedTest, server: ContestantServer) -> None:
    """The runtime's side file, read once the server has stopped and flushed it."""
    read = read_signals(server.signals_path, test.started_at, test.ended_at - test.started_at)
    test.signals = read.signals
    problem = read.problem()
    if problem:
        test.validity["signals_unreadable"] = problem


def _record_failure(test: RecordedTest, server, err: Exception) -> None:
    if server.poll() is not None:
        test.status = "crashed"
        test.crash = _crash(server, at_s=time.time() - test.started_at)
    else:
        test.status = "invalid"
    test.validity["runner_error"] = str(err)[:2000]


def _keep_log(env: Environment, test: RecordedTest, server: ContestantServer) -> None:
    """Moves a failed test's folder (server log, plans) out of this process's work folder,
    which a later run deletes whole if this one dies. Its key material is deleted first:
    keys live only as long as the test's work folder (issue 22)."""
    shutil.rmtree(server.workdir / TLS_FOLDER, ignore_errors=True)
    kept = env.logs_dir / f"{server.workdir.name}-{os.getpid()}"
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(server.workdir, kept)
    except OSError:
        kept = server.workdir
    test.validity.setdefault("server_log", str(kept / server.log_path.name))


def _fill(test: RecordedTest, result: LoadResult, monitor: Monitor, plan: dict) -> None:
    put_load(test, result)
    test.run_info["engine_plan"] = plan
    test.samples = [MonitorSample(**s.as_dict()) for s in monitor.samples]
    if monitor.window.figures is not None:
        test.run_info["kernel"] = {**monitor.window.figures, **_engine_gaps(monitor, result)}
    test.run_info["monitor"] = monitor.own_cpu
    if result.summary is None and result.stderr_tail:
        test.validity["engine_stderr"] = result.stderr_tail
    if result.generators:
        test.run_info["generators"] = result.generators
    if result.lost:
        test.validity["generator_lost"] = result.lost


def _engine_gaps(monitor: Monitor, result: LoadResult) -> dict:
    """How far the kernel window's ends lie from the engine's load (its summary's start and
    duration, on this host's clock): the window opens before the engine starts and should
    close as its load ends."""
    figures, summary = monitor.window.figures or {}, result.summary or {}
    started, duration = summary.get("started_at_ms"), summary.get("duration_s")
    if "closed_at" not in figures or not started or duration is None:
        return {}
    start = started / 1000
    return {
        "opened_before_engine_s": round(start - figures["opened_at"], 4),
        "closed_after_engine_s": round(figures["closed_at"] - (start + duration), 4),
    }


def _window_start(test: RecordedTest, plan: TestPlan, summary: dict | None) -> None:
    """The end of the ramp, on the server's clock: when the engine's pacers started (its
    `started_at_ms`, plus its clock offset) and the plan's ramp. With the stop the timed
    clear was due at (see _Measurement._stamped), the window of the cycles that count."""
    window = test.run_info.get("emit_window")
    started = (summary or {}).get("started_at_ms")
    if window is None or plan.emit_window_s is None or not started:
        return
    offset = summary.get("clock_offset_ms") or 0.0
    window["start_ms"] = round(started + offset + plan.emit_window_s[0] * 1000, 1)


def _crash(server: ContestantServer, at_s: float) -> Crash:
    """How the server ended, `at_s` seconds into the test, with out-of-memory read off its log."""
    status = server.exit_status
    tail = log_tail(server.log_path, lines=200)
    return Crash(
        time=round(at_s, 3),
        exit_code=status.code if status else None,
        signal=status.signal if status else None,
        oom=any(marker in tail for marker in OOM_MARKERS),
    )
