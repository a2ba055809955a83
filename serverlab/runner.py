"""`serverlab run`: every permutation × repeat of a suite, each test in its own fresh server.

Per test: start the contestant pinned to its CPUs, wait until ready, smoke-check it against
the spec, set its control state (logging off, the scenario's emitter), start the monitor,
run the engine, read `/stats`, clear the emitters, stop the server, and commit everything
in one transaction. A server that dies is recorded as a crash and the suite goes on; Ctrl-C
abandons the test in hand and keeps every finished one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from serverlab import fileset, httpclient, netns
from serverlab.engine import (
    PUSH_EVENT,
    EngineRun,
    engine_command,
    plan_for,
    warmup_plan_for,
    write_plan,
)
from serverlab.inventory import version_of
from serverlab.leftovers import work_folder
from serverlab.machine import Pinning, describe
from serverlab.manifest import Manifest, find
from serverlab.monitor import Monitor
from serverlab.server import ContestantServer, ServerError, log_tail
from serverlab.specversion import same_major
from serverlab.store import (
    Crash,
    EmitRecord,
    EngineInterval,
    MonitorSample,
    RecordedTest,
    ServerStats,
    Store,
    StoreError,
    make_test_key,
)
from serverlab.store import Suite as StoredSuite
from serverlab.suite import Permutation, Suite
from serverlab.validity import assess

# The engine gets this long past its planned end before it is stopped.
ENGINE_GRACE_S = 30.0
# A syslog receiver has settled when its count has not risen for SETTLE_QUIET_S.
SETTLE_POLL_S = 0.02
SETTLE_QUIET_S = 2.0
SETTLE_LIMIT_S = 600.0
# Requests (or messages) per second below which a counted run is stopped as hung.
SLOWEST_COUNTED_RATE = 5000
PERF_BODY = b"serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
# How long an interrupted or failed run waits to record that in a busy database.
CLOSE_WAIT_S = 2.0
OOM_MARKERS = ("OutOfMemoryError", "out of memory", "Out of memory", "heap out of memory")


@dataclass
class Session:
    """Everything one `serverlab run` shares across its tests, passed explicitly."""

    suite: Suite
    store: Store
    pinning: Pinning
    workdir: Path
    progress: object = None  # a serverlab.progress.Progress, or None when quiet
    resume: bool = False
    stored_suite: StoredSuite | None = None
    run_id: int | None = None
    manifests: dict[str, Manifest] = field(default_factory=dict)
    limits: dict = field(default_factory=dict)  # serverlab.lab.prepare_limits

    def manifest(self, name: str) -> Manifest:
        if name not in self.manifests:
            self.manifests[name] = find(name)
        return self.manifests[name]


@dataclass
class RunOutcome:
    run_id: int
    finished: int
    skipped: int
    crashed: int
    invalid: int
    interrupted: bool


def run_suite(session: Session) -> RunOutcome:
    suite = session.suite
    stored = session.store.add_suite(
        StoredSuite(name=suite.name, path=str(suite.path), sha256=suite.sha256, scale=suite.scale)
    )
    session.stored_suite = stored
    done = session.store.finished_test_keys(stored) if session.resume else set()
    run = session.store.start_run(stored, _machine(session))
    session.run_id = run.id
    todo = [(p, r) for p, r in suite.tests() if make_test_key(p.key, r) not in done]
    counts = {"ok": 0, "crashed": 0, "invalid": 0}
    if session.progress:
        session.progress.begin(len(todo), skipped=len(suite.tests()) - len(todo))
    try:
        for index, (perm, repeat) in enumerate(todo):
            if session.progress:
                session.progress.test_started(index, perm, repeat)
            recorded = run_test(session, perm, repeat)
            session.store.commit_test(recorded)
            counts[recorded.status] = counts.get(recorded.status, 0) + 1
            if session.progress:
                session.progress.test_finished(recorded)
    except KeyboardInterrupt:
        _close_run(session, run.id, "interrupted")
        interrupted = True
    except StoreError:
        _close_run(session, run.id, "failed")
        raise
    else:
        session.store.finish_run(run.id, "finished")
        interrupted = False
    return RunOutcome(
        run.id,
        sum(counts.values()),
        len(suite.tests()) - len(todo),
        counts["crashed"],
        counts["invalid"],
        interrupted=interrupted,
    )


def _close_run(session: Session, run_id: int, status: str) -> None:
    """Best effort, and quick: a database that cannot take it now leaves the run to be
    marked abandoned by the next one."""
    with contextlib.suppress(StoreError):
        session.store.finish_run(run_id, status, wait_s=CLOSE_WAIT_S)


def _machine(session: Session) -> dict:
    info = describe(session.pinning)
    suite = session.suite
    info["suite"] = {
        "name": suite.name,
        "sha256": suite.sha256,
        "seed": suite.seed,
        "profile": suite.profile,
        "scale": suite.scale,
        "count_scale": suite.count_scale,
        "needs": suite.needs,
        "links": suite.links,
        "filesets": suite.filesets,
    }
    info["limits"] = session.limits
    if any(link.get("delay_ms") for link in suite.links.values()):
        info["link_delay_available"] = netns.netem_available()
    info["contestant_versions"] = {
        name: version_of(session.manifest(name))
        for name in sorted({p.contestant for p in session.suite.permutations})
    }
    return info


def run_test(session: Session, perm: Permutation, repeat: int) -> RecordedTest:
    """Runs one test, inside a shaped link when it names one. Never raises for what the
    server does; KeyboardInterrupt propagates after the server, engine and link are gone."""
    link_name = perm.params.get("link")
    if not link_name:
        return _run_test(session, perm, repeat, None)
    link = session.suite.links[link_name]
    try:
        with netns.shaped_namespace(link["rate_mbit"], link.get("delay_ms", 0)) as namespace:
            test = _run_test(session, perm, repeat, namespace)
    except netns.NetnsError as err:
        test = _new_test(session, perm, repeat)
        test.status = "invalid"
        test.validity = {"link_failed": str(err)[:2000]}
        return test
    test.params = {**test.params, "link_as_run": namespace.metadata()}
    if link.get("delay_ms") and not namespace.delay_applied:
        test.validity["link_delay_unavailable"] = (
            f"{link['delay_ms']} ms not applied (no sch_netem); rate {link['rate_mbit']} Mbit/s"
        )
    return test


def _new_test(session: Session, perm: Permutation, repeat: int) -> RecordedTest:
    started = time.time()
    return RecordedTest(
        run_id=session.run_id,
        permutation_key=perm.key,
        contestant=perm.contestant,
        repeat_index=repeat,
        status="ok",
        started_at=started,
        ended_at=started,
        scenario=perm.scenario,
        params=perm.params,
        tunables=perm.tunables,
    )


def _run_test(session, perm: Permutation, repeat: int, namespace) -> RecordedTest:
    manifest = session.manifest(perm.contestant)
    test = _new_test(session, perm, repeat)
    started = test.started_at
    # Under this process's own folder: if it dies, the next run removes the folder whole.
    workdir = work_folder(session.workdir) / f"test-{int(started * 1000)}"
    options = {
        "settings": perm.tunables,
        "cpus": session.pinning.server,
        "workdir": workdir,
        "docroot": _docroot(session, perm),
    }
    try:
        if namespace is None:
            server = ContestantServer(manifest, **options)
        else:
            server = netns.NamespacedServer(namespace, manifest, **options)
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
        _keep_log(session, test, server)
        return test
    except BaseException:
        server.stop()  # Ctrl-C while it was starting: it must not outlive us
        raise
    try:
        _measure(session, perm, server, manifest, test, started)
    except (ServerError, httpclient.HttpError, OSError, ValueError) as err:
        # The server misbehaved outside the measurement (a control call failed, say):
        # a result about this test, not a reason to stop the suite.
        _record_failure(test, server, started, err)
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        test.ended_at = time.time()
        if test.status == "ok":
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            _keep_log(session, test, server)
    return test


def _keep_log(session: Session, test: RecordedTest, server: ContestantServer) -> None:
    """Moves a failed test's folder (server log, plans) out of this process's work folder,
    which a later run deletes whole if this one dies."""
    kept = session.workdir.parent / "logs" / f"{server.workdir.name}-{os.getpid()}"
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(server.workdir, kept)
    except OSError:
        kept = server.workdir
    test.validity.setdefault("server_log", str(kept / server.log_path.name))


def _docroot(session: Session, perm: Permutation) -> Path | None:
    name = perm.params.get("files")
    if not name:
        return None
    return _fileset(session, name).root


def _fileset(session: Session, name: str) -> fileset.FileSet:
    # Beside the results database (results/filesets/), generated once and kept.
    return fileset.materialize(session.suite.filesets[name], session.workdir.parent / "filesets")


def _call(server: ContestantServer, function, *args, **kwargs):
    """A control request to the server, from inside its namespace when it has one."""
    if isinstance(server, netns.NamespacedServer):
        return server.call(function, *args, **kwargs)
    return function(*args, **kwargs)


def _record_failure(test: RecordedTest, server, started: float, err: Exception) -> None:
    if server.poll() is not None:
        test.status = "crashed"
        test.crash = _crash(server, at_s=time.time() - started)
    else:
        test.status = "invalid"
    test.validity["runner_error"] = str(err)[:2000]


def _measure(session, perm, server, manifest, test, started) -> None:
    problem = smoke_check(server, manifest)
    if problem:
        test.status = "invalid"
        test.validity = {"not_conforming": problem}
        return
    if perm.params.get("warmup_s"):
        _warm_up(session, perm, server)
    if "control" in manifest.implements:
        _control(server, perm, test)
    paths = (
        _fileset(session, perm.params["files"]).weighted_paths() if "files" in perm.params else None
    )
    plan = plan_for(perm.params, server.port, server.syslog_port, paths)
    plan_path = write_plan(plan, server.workdir / "plan.json")
    engine = EngineRun(
        _engine_argv(session, server, plan_path),
        on_interval=session.progress.interval if session.progress else None,
    )
    syslog = perm.params["behaviour"] == "syslog"
    monitor = Monitor(
        server.process.pid, on_sample=session.progress.sample if session.progress else None
    )
    with monitor:
        # Priming runs load the server exactly as the measured run will, with the monitor
        # on so that the peak RSS includes them (seed 003's first `ab` run).
        crash = _prime(session, perm, server, plan_path, test, started)
        watch = _ReceiverWatch(server) if syslog and crash is None else None
        try:
            if crash is None:
                crash = _run_engine(
                    session, engine, server, _planned_seconds(perm), started, monitor
                )
            receiver = watch.settle() if watch and crash is None else None
        finally:
            if watch:
                watch.stop()
    if crash is None and "control" in manifest.implements:
        _after(server, test)
    test.crash = crash
    _fill(test, engine, monitor, plan)
    if syslog and crash is None:
        _put_receiver_figures(test, receiver, server)
    test.status, test.validity = assess(test, session.pinning, crash)


def _syslog_received(server: ContestantServer) -> int | None:
    """Messages the server has counted so far: /stats, or the manifest's syslog_count."""
    if "control" in server.manifest.implements:
        try:
            return int(server.stats()["syslog"]["received"])
        except (httpclient.HttpError, OSError, ValueError, KeyError, TypeError):
            return None
    return _syslog_count(server)


class _ReceiverWatch:
    """Polls a syslog receiver's count from before the flood until it stops rising. The
    receiving time is then bounded by polls at both ends: the last one that saw nothing
    new yet and the first that saw the final count. Neither the sender's start-up nor the
    megabytes the socket buffers hold when the sender finishes can hide in it."""

    def __init__(self, server: ContestantServer):
        self.server = server
        self.samples: list[tuple[float, float, int]] = []  # (asked, answered, count)
        self.baseline = _syslog_received(server)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        if self.baseline is not None:
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            count = _syslog_received(self.server)
            if count is not None:
                self.samples.append((asked, time.monotonic(), count))
            self._stop.wait(SETTLE_POLL_S)

    def settle(self) -> dict | None:
        """Waits until the count has not risen for SETTLE_QUIET_S; None if it cannot count."""
        if self.baseline is None:
            return None
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while time.monotonic() < deadline and not self._quiet():
            time.sleep(SETTLE_POLL_S)
        self.stop()
        samples = list(self.samples)
        final = max(count for _, _, count in samples)
        # A count may take a while to read (rsyslog's count.sh waits for its file to
        # settle), so the bounds are the start of the last read that saw nothing new and
        # the end of the first that saw everything: never shorter than the truth.
        finished = next(done for _, done, count in samples if count == final)
        began = max(
            (asked for asked, _, count in samples if count == self.baseline),
            default=samples[0][0],
        )
        span = max(finished - began, SETTLE_POLL_S)
        return {
            "received": final - self.baseline,
            "received_total": final,
            "receiving_s": round(span, 3),
            "messages_per_s": round((final - self.baseline) / span, 1),
            "poll_s": SETTLE_POLL_S,
            "settled": time.monotonic() < deadline,
        }

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _quiet(self) -> bool:
        samples = list(self.samples)
        if not samples:
            return False
        last_count = samples[-1][2]
        changed = next(done for _, done, count in samples if count == last_count)
        return samples[-1][1] - changed >= SETTLE_QUIET_S


def _put_receiver_figures(test: RecordedTest, receiver: dict | None, server) -> None:
    """The flood's figures are the receiver's: rate and loss as the server counted them;
    the engine's own rate stays beside them as `sender_rps`."""
    if receiver is None:
        test.validity["receiver_count_unavailable"] = "figures are the sender's"
        return
    if "control" not in server.manifest.implements:
        # No /stats to hold the count at the end: keep the receiver's own.
        stats = {"syslog_count": receiver["received_total"]}
        test.server_stats.append(ServerStats(t=time.time() - test.started_at, stats=stats))
    if test.summary is None:
        test.validity["syslog_receiver"] = receiver
        return
    sent = test.summary.get("requests")
    figures = {
        **receiver,
        "sent": sent,
        "lost": None if sent is None else sent - receiver["received"],
    }
    test.summary = {
        **test.summary,
        "sender_rps": test.summary.get("rps"),
        "rps": figures["messages_per_s"],
        "syslog": figures,
    }


def _engine_argv(session: Session, server: ContestantServer, plan_path: Path) -> list[str]:
    namespace = server.namespace.name if isinstance(server, netns.NamespacedServer) else None
    return engine_command(plan_path, session.pinning.engine, netns=namespace)


def _run_engine(session, engine: EngineRun, server, planned_s: float, started, monitor=None):
    """Starts the engine and waits for it; returns the server's crash or None."""
    engine.start()
    if monitor is not None:
        monitor.watch_engine(engine.pid)
    try:
        return _wait_engine(engine, server, planned_s, started)
    except KeyboardInterrupt:
        engine.stop()
        raise


def _prime(session, perm: Permutation, server, plan_path: Path, test, started) -> Crash | None:
    """The scenario's own load `priming_runs` times; only a short note of each is kept."""
    notes = []
    for _ in range(int(perm.params.get("priming_runs", 0))):
        engine = EngineRun(_engine_argv(session, server, plan_path))
        crash = _run_engine(session, engine, server, _planned_seconds(perm), started)
        summary = engine.summary or {}
        notes.append({k: summary.get(k) for k in ("requests", "ok", "rps", "duration_s", "valid")})
        if crash is not None:
            test.params = {**test.params, "priming": notes}
            return crash
    if notes:
        test.params = {**test.params, "priming": notes}
    return None


def _warm_up(session: Session, perm: Permutation, server: ContestantServer) -> None:
    plan = warmup_plan_for(perm.params, server.port, server.syslog_port)
    engine = EngineRun(
        _engine_argv(session, server, write_plan(plan, server.workdir / "warmup.json"))
    )
    engine.start()
    try:
        engine.wait(float(perm.params["warmup_s"]) + ENGINE_GRACE_S)
    except KeyboardInterrupt:
        engine.stop()
        raise


def smoke_check(server: ContestantServer, manifest: Manifest) -> str | None:
    """The per-test conformance check: cheap, and enough to catch a wrong build or a server
    that came up broken. The full `serverlab verify` runs once per contestant before."""
    try:
        if "perf" in manifest.implements:
            r = _call(server, httpclient.get, server.port, "/perf")
            if r.status != 200 or r.body != PERF_BODY:
                return f"GET /perf answered {r.status} with {len(r.body)} bytes"
        if "control" in manifest.implements:
            stats = server.stats()
            if not same_major(stats.get("spec_version", "")):
                return f"/stats spec_version is {stats.get('spec_version')!r}"
    except (httpclient.HttpError, OSError, ValueError) as err:
        return f"smoke check failed: {err}"
    return None


def _control(server, perm: Permutation, test: RecordedTest) -> None:
    _call(server, httpclient.post_json, server.port, "/logging", {"enabled": False})
    interval = perm.params.get("emit_interval_ms", 0)
    if interval:
        event = {"name": PUSH_EVENT, "interval_ms": interval}
        r = _call(server, httpclient.post_json, server.port, "/event/set", event)
        if r.status != 200:
            raise ServerError(f"/event/set answered {r.status}")
    test.server_stats.append(
        ServerStats(t=time.time() - test.started_at, stats=server.stats(), phase="start")
    )


def _after(server, test: RecordedTest) -> None:
    try:
        test.server_stats.append(
            ServerStats(
                t=time.time() - test.started_at, stats=server.stats(timeout_s=15), phase="end"
            )
        )
        _call(server, httpclient.post_json, server.port, "/event/clear", {})
    except (httpclient.HttpError, OSError, ValueError) as err:
        test.validity["stats_unreadable"] = str(err)


def _planned_seconds(perm: Permutation) -> float:
    p = perm.params
    base = float(p.get("ramp_up_s", 0)) + float(p.get("duration_s", 0))
    count = p.get("requests", p.get("syslog_messages"))
    if count is not None:
        # A count has no planned end; bound it anyway, generously for a slow receiver.
        base = max(base, 600.0, count / SLOWEST_COUNTED_RATE)
    return base


def _wait_engine(
    engine: EngineRun, server: ContestantServer, planned_s: float, started: float
) -> Crash | None:
    """Waits for the engine; if the server dies first, records the crash and lets the engine
    see the refused connections for a moment (they are part of the result), then stops it."""
    deadline = time.monotonic() + planned_s + ENGINE_GRACE_S
    while engine.process.poll() is None:
        if server.poll() is not None:
            crash = _crash(server, at_s=time.time() - started)
            time.sleep(1.0)
            engine.stop()
            engine.wait(5)
            return crash
        if time.monotonic() > deadline:
            engine.stop()
            break
        time.sleep(0.1)
    engine.wait(10)
    return None


def _fill(test: RecordedTest, engine: EngineRun, monitor: Monitor, plan: dict) -> None:
    test.summary = engine.summary
    test.params = {**test.params, "engine_plan": plan}
    test.intervals = [
        EngineInterval(seq=i, t=float(r.get("elapsed_s", i)), data=r)
        for i, r in enumerate(engine.intervals)
    ]
    test.samples = [MonitorSample(**s.as_dict()) for s in monitor.samples]
    if engine.summary and engine.summary.get("histogram"):
        test.histograms["latency_us"] = engine.summary["histogram"]
    if engine.summary is None and engine.stderr_tail:
        test.validity["engine_stderr"] = engine.stderr_tail
    test.emits = [row for cycle in engine.emits for row in _emit_rows(cycle)]


def _emit_rows(cycle: dict) -> list[EmitRecord]:
    """The engine's record of one emit cycle as rows: one per sampled place."""
    return [
        EmitRecord(
            event=cycle["event"],
            seq=cycle["seq"],
            place=int(place),
            total=cycle["total"],
            duration_ms=float(duration),
            created_ms=cycle.get("created_ms"),
            received=cycle.get("received"),
        )
        for place, duration in cycle.get("places", [])
    ]


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


def _syslog_count(server: ContestantServer) -> int | None:
    if not server.manifest.syslog_count:
        return None
    command = server.expand(server.manifest.syslog_count)
    if isinstance(server, netns.NamespacedServer):
        command = server.namespace.shell(command)
    out = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=server.manifest.folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        return int(out.stdout.strip().split()[0])
    except (IndexError, ValueError):
        return None
