"""`serverlab run`: a suite's test plans run one after another and committed one by one.

The runner owns the run (its row in the database, its machine metadata, `--resume`); each
plan goes to an executor (`serverlab.run.execution.executor.execute` on this machine) and comes back
as a recorded test, which is committed in one transaction before the next plan starts.
Ctrl-C abandons the test in hand and keeps every finished one.

With `rerun_busy` N, a test flagged machine-busy (other processes used the machine during
its load) is run again, up to N times: each re-run replaces the one before in the figures,
which stays stored, marked superseded by it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.contestant.inventory import version_of
from serverlab.results.records import RecordedTest, StoredSuite, make_test_key
from serverlab.results.store import Store, StoreError
from serverlab.run.execution.engine import EngineError, engine_binary
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.monitor import FIGURE_SOURCES
from serverlab.run.execution.testplan import TestPlan
from serverlab.run.host import shapedlink, tlsspeed
from serverlab.run.host.machine import describe, fingerprint, software_versions
from serverlab.run.plan import descriptors
from serverlab.run.plan.suite.file import Suite
from serverlab.run.plan.suite.permutation import speaks_tls

BUSY_FLAG = "machine_busy"  # serverlab.run.execution.validity.kernel_flags

# How long an interrupted or failed run waits to record that in a busy database.
CLOSE_WAIT_S = 2.0


@dataclass
class Session:
    """One `serverlab run`: what it runs, where it stores it, and what it runs with."""

    suite: Suite
    plans: list[TestPlan]
    store: Store
    env: Environment
    resume: bool = False
    limits: dict = field(default_factory=dict)  # serverlab.commands.prepare_limits
    execute: Callable[[TestPlan, Environment], RecordedTest] = execute
    # What else the run's metadata should say (a distributed run's nodes, say).
    placement: dict = field(default_factory=dict)
    rerun_busy: int = 0  # re-runs allowed per machine-busy repeat
    # Tests refused before anything ran (descriptor cap, protocols), and contestants the
    # verify-first step refused (name -> why): stored with the run, so that its report can
    # tell a refused cell from one nobody asked for.
    refused: list[descriptors.Refused] = field(default_factory=list)
    unverified: dict[str, str] = field(default_factory=dict)


@dataclass
class RunOutcome:
    run_id: int
    finished: int
    skipped: int
    crashed: int
    invalid: int
    interrupted: bool
    rerun: int = 0  # re-runs of machine-busy repeats


def run_suite(session: Session) -> RunOutcome:
    suite, store, progress = session.suite, session.store, session.env.progress
    stored = store.add_suite(
        StoredSuite(name=suite.name, path=str(suite.path), sha256=suite.sha256, scale=suite.scale)
    )
    done = store.finished_test_keys(stored) if session.resume else set()
    # Resumed with --rerun-busy: a kept machine-busy repeat with re-runs left is run again.
    busy = store.busy_tests(stored) if session.resume and session.rerun_busy else {}
    machine = _machine(session)
    versions = software_versions(
        _engine_or_none(), machine["contestant_versions"], machine.get("tools", {})
    )
    run = store.start_run(stored, machine, fingerprint=fingerprint(), versions=versions)
    session.env.run_id = run.id
    again = {key: previous for key, previous in busy.items() if previous[1] < session.rerun_busy}
    todo = [
        plan
        for plan in session.plans
        if make_test_key(plan.key, plan.repeat) not in done
        or make_test_key(plan.key, plan.repeat) in again
    ]
    skipped = len(session.plans) - len(todo)
    counts = {"ok": 0, "crashed": 0, "invalid": 0}
    rerun = 0
    try:
        if progress:
            progress.begin(todo, skipped=skipped)
        for index, plan in enumerate(todo):
            if progress:
                progress.test_started(index, plan)
            previous = again.get(make_test_key(plan.key, plan.repeat))
            recorded, reruns = _run_one(session, plan, previous)
            rerun += reruns
            counts[recorded.status] = counts.get(recorded.status, 0) + 1
            if progress:
                progress.test_finished(recorded)
    except KeyboardInterrupt:
        _close_run(store, run.id, "interrupted")
        interrupted = True
    except BaseException:
        # A full disk, or a bug on the way (printing a progress line, say): the run is over,
        # and says so, rather than stay 'running' until a later run finds it abandoned.
        _close_run(store, run.id, "failed")
        raise
    else:
        store.finish_run(run.id, "finished")
        interrupted = False
    finished = sum(counts.values())
    return RunOutcome(
        run.id, finished, skipped, counts["crashed"], counts["invalid"], interrupted, rerun
    )


def _run_one(
    session: Session, plan: TestPlan, previous: tuple[int, int] | None = None
) -> tuple[RecordedTest, int]:
    """Runs and commits one test, then re-runs it while it is flagged machine-busy, up to
    `rerun_busy` times; returns the test that stands and how many re-runs it took.
    `previous`: a stored machine-busy test this one re-runs, and the re-runs before it."""
    supersedes, before = previous or (None, 0)
    recorded = session.execute(plan, session.env)
    session.store.commit_test(recorded, supersedes=supersedes)
    reruns = int(supersedes is not None)
    while before + reruns < session.rerun_busy and BUSY_FLAG in recorded.validity:
        again = session.execute(plan, session.env)
        session.store.commit_test(again, supersedes=recorded.id)
        recorded, reruns = again, reruns + 1
    return recorded, reruns


def _close_run(store: Store, run_id: int, status: str) -> None:
    """Best effort, and quick: a database that cannot take it now leaves the run to be
    marked abandoned by the next one."""
    with contextlib.suppress(StoreError):
        store.finish_run(run_id, status, wait_s=CLOSE_WAIT_S)


def _engine_or_none() -> Path | None:
    """The engine binary, if there is one here (a spread run's engines are elsewhere)."""
    try:
        return engine_binary()
    except EngineError:
        return None


def _machine(session: Session) -> dict:
    info = describe(session.env.pinning)
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
    info["figure_sources"] = FIGURE_SOURCES
    if session.rerun_busy:
        info["rerun_busy"] = session.rerun_busy
    if session.placement:
        info["placement"] = session.placement
    if session.refused or session.unverified:
        info["not_run"] = _not_run(session)
    if any(link.get("delay_ms") for link in suite.links.values()):
        method = shapedlink.delay_method()
        info["link_delay_available"] = method is not None
        info["link_delay_by"] = method
    if any(speaks_tls(plan.params) for plan in session.plans):
        # One core's handshake ceiling from its signature and X25519 speed (openssl speed,
        # pinned to the server's CPU): the physical limit beside the report's figures.
        info["tls_speed"] = tlsspeed.measure(session.env.pinning.server)
    names = sorted({plan.contestant for plan in session.plans})
    manifests = {name: session.env.manifest_of(name) for name in names}
    info["contestant_versions"] = {name: version_of(m) for name, m in manifests.items()}
    # What the report labels each contestant with, as it was when it ran.
    info["contestant_architectures"] = {name: m.architecture for name, m in manifests.items()}
    return info


def _not_run(session: Session) -> dict:
    """What the run was asked for and did not run, and why. Each sitting of a resumed suite
    plans it again, so each of its runs says it."""
    return {
        "tests": descriptors.stored(session.refused),
        "contestants": [{"contestant": n, "why": w} for n, w in session.unverified.items()],
    }
