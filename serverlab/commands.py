"""What the lab commands (`run`, `report`, `compare`, `export`, `load`) do, below the CLI:
the click layer parses flags and prints errors, this module does the work."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

from serverlab.base import interrupts, terminal
from serverlab.base.netns import Namespace, enter
from serverlab.base.paramtext import params_text
from serverlab.base.progress import Tally
from serverlab.base.terminal import literal
from serverlab.conformance.verify import VerifyReport, verify_contestant
from serverlab.contestant.manifest import UNSPOKEN_BY_RUNS, Manifest, discover, find
from serverlab.contestant.server import ServerError
from serverlab.lab import manage
from serverlab.lab.topology import plan_lab
from serverlab.results import compare as comparing
from serverlab.results import dblock
from serverlab.results.export import export_csv
from serverlab.results.publish import PublishedSite
from serverlab.results.publish import publish as publish_site
from serverlab.results.recovery import TableRecovery
from serverlab.results.recovery import recover as recover_rows
from serverlab.results.report import build_report, print_summary
from serverlab.results.report.builder import report_data
from serverlab.results.report.sections.warmup import print_time_to_steady
from serverlab.results.store import Store, StoreError
from serverlab.run.execution.engine import check_plans, engine_binary, engine_speaks_h2
from serverlab.run.execution.executor import Environment
from serverlab.run.execution.testplan import TestPlan, bind, with_paths
from serverlab.run.host import leftovers
from serverlab.run.host import tune as tuning
from serverlab.run.host.machine import Pinning
from serverlab.run.plan import descriptors, protocols
from serverlab.run.plan.live import watch as live_watch
from serverlab.run.plan.live.events import EventLog
from serverlab.run.plan.live.feed import LiveFeed, side_file
from serverlab.run.plan.live.server import LiveError, LiveServer
from serverlab.run.plan.planner import plan_tests, suite_key_for
from serverlab.run.plan.progress import Fanout, Progress
from serverlab.run.plan.runner import RunOutcome, Session, run_suite
from serverlab.run.plan.suite.file import GROUP_KEY, Suite, SuiteError
from serverlab.run.plan.suite.load import load_suite

console = terminal.console(stderr=True)


@dataclass
class Planned:
    """A suite and the plan of every test it makes, in run order."""

    suite: Suite
    plans: list[TestPlan]
    # Tests this machine's descriptor cap cannot hold: refused before anything runs.
    refused: list[descriptors.Refused] = field(default_factory=list)

    def planned_s(self) -> float:
        return sum(plan.estimate_s for plan in self.plans)


def plan_suite(
    path: str,
    scale: float,
    only: list[str] | None,
    repeats: int | None,
    profile: str | None = None,
    spread: Spread | None = None,
) -> Planned:
    """The suite, checked with file:line, and every test's plan, judged by the engine; the
    tests the descriptor cap cannot hold set apart, and the profile's budget checked."""
    known = {m.name: m for m in discover() if isinstance(m, Manifest)}
    suite = load_suite(path, scale=scale, known_contestants=known, only=only, profile=profile)
    if repeats is not None:
        if repeats < 1:
            raise ServerError("--repeats must be at least 1")
        suite.repeats = repeats
    plans = plan_tests(suite, known.__getitem__)
    h2 = any(p.params.get("transport") in protocols.HTTP2 for p in plans) and engine_speaks_h2()
    plans, unspoken = protocols.refuse(plans, known.__getitem__, h2)
    check_engine_plans(suite, plans)
    kept, refused = descriptors.refuse(plans, tuning.reachable_nofile(), _engines(spread))
    planned = Planned(suite, kept, unspoken + refused)
    _check_budget(planned)
    return planned


def _engines(spread: Spread | None) -> int | None:
    """How many engines share a test's clients, where their cap is this machine's: one
    locally, the virtual lab's generators; None on a real cluster's hosts."""
    if spread is None:
        return 1
    if spread.address != "lab":
        return None
    if spread.generators:
        return spread.generators
    lab = manage.read(manage.DEFAULT_NAME)
    # A lab not up yet: its generators are not known, so one engine is assumed.
    return max(1, sum(h.role == "generator" for h in lab.hosts)) if lab else 1


def _check_budget(planned: Planned) -> None:
    """A profile's budget_h bounds the machine time of the tests it will run."""
    suite = planned.suite
    if suite.budget_h is None or planned.planned_s() <= suite.budget_h * 3600:
        return
    where = suite.lines.in_table(f"profiles.{suite.profile}", "budget_h") if suite.lines else None
    raise SuiteError(
        suite.path,
        where,
        f"profile {suite.profile!r} plans {_duration(planned.planned_s())} of tests, over "
        f"its budget_h of {suite.budget_h:g}: shorten it or raise the budget",
    )


def print_refused(planned: Planned, out=None) -> None:
    """Every refused test, and every test's groups left out, with the reason, before
    anything runs."""
    out = out or terminal.console(stderr=True)
    for refused in planned.refused:
        what = "groups left out" if refused.groups else "refused, not run"
        out.print(literal(f"{what}: {refused.line()}"))


# Any place does for --check: it opens no socket.
_CHECK_WHERE = {
    "host": "127.0.0.1",
    "port": 8080,
    "syslog_port": 8514,
    "tls_port": 8443,
    "h2c_port": 8081,
    "syslog_tls_port": 6514,
    "grpc_port": 8082,
    "grpc_tls_port": 8444,
    "tls_ca": "/nonexistent/ca.pem",  # --check reads no file
}
_CHECK_PATHS = [{"path": "/files/f0000.bin", "weight": 1.0}]


def check_engine_plans(suite: Suite, plans: list[TestPlan]) -> None:
    """Every engine plan the suite will run (measured and warm-up), judged by the engine in
    one call before any server starts; a refusal is a SuiteError at the line that made it."""
    planned: dict[str, tuple] = {}
    for plan in plans:
        for engine_plan in plan.engine_plans():
            bound = bind(engine_plan, **_CHECK_WHERE)
            if plan.fileset and engine_plan is plan.measured:
                # The executor adds the file set's paths where it runs; one stands for them.
                bound = with_paths(bound, _CHECK_PATHS)
            # Tests that differ only in contestant, tunables or repeat share a plan.
            planned.setdefault(json.dumps(bound, sort_keys=True), (plan, bound))
    verdicts = check_plans([bound for _, bound in planned.values()])
    for (plan, _), verdict in zip(planned.values(), verdicts, strict=True):
        if not verdict.get("ok") and verdict.get("field") == GROUP_KEY:
            raise _group_refusal(suite, plan, verdict["error"])
        if not verdict.get("ok"):
            key = suite_key_for(verdict.get("field"), plan.params, verdict["error"])
            value = plan.params.get(key)
            said = f"{key} = {value!r}" if value is not None else key
            raise suite.error(
                plan.scenario, key, f"{said}: the engine refuses it: {verdict['error']}"
            )


# The engine's refusal of one group: `groups[NAME]: why`.
GROUP_REFUSAL = re.compile(r"groups\[([^\]]+)\]: (.*)", re.S)


def _group_refusal(suite: Suite, plan: TestPlan, error: str) -> SuiteError:
    """The engine's refusal of a client group, at the line of the group's key it names (of
    the keys the group sets, the first the refusal mentions), else at the group's name."""
    found = GROUP_REFUSAL.match(error)
    if found is None:  # of the groups as a whole: their number, their names
        return suite.group_error(
            plan.scenario, None, GROUP_KEY, f"the engine refuses them: {error}"
        )
    name, why = found.groups()
    group = next((g for g in plan.params.get(GROUP_KEY, ()) if g.get("name") == name), {})
    key = next((k for k in group if k != "name" and re.search(rf"\b{k}\b", why)), "name")
    said = f"{key} = {group[key]!r}: " if key != "name" else ""
    return suite.group_error(plan.scenario, name, key, f"{said}the engine refuses it: {why}")


def print_plans(planned: Planned) -> None:
    """`--dry-run --json`: one test plan per line, in run order."""
    out = terminal.console()
    for plan in planned.plans:
        out.out(plan.to_json(), highlight=False)


def print_plan(planned: Planned) -> None:
    suite = planned.suite
    table = Table(
        title=literal(
            f"{suite.name}: {suite.path} (profile {suite.profile}, scale {suite.scale:g}, "
            f"counts x{suite.count_scale:g})"
        )
    )
    for column in ("#", "scenario", "contestant", "parameters", "tunables"):
        table.add_column(column, overflow="fold")
    for i, perm in enumerate(suite.permutations, 1):
        params = params_text(perm.params)
        tunables = " ".join(f"{k}={v}" for k, v in perm.tunables.items())
        cells = (perm.scenario, perm.contestant, params, tunables)
        table.add_row(str(i), *(literal(cell) for cell in cells))
    out = terminal.console()
    out.print(table)
    kept = {perm.scenario for perm in suite.permutations}
    for scenario, why in suite.left_out:
        if scenario in kept:  # not a scenario the profile leaves out anyway
            out.print(literal(f"left out: {why}"))
    print_refused(planned, out)
    counts = (
        f"{len(suite.permutations)} permutations x {suite.repeats} repeats = "
        f"{len(suite.tests())} tests"
    )
    whole = [one for one in planned.refused if not one.groups]
    if whole:
        counts += f", {len(whole)} refused: {len(planned.plans)} to run"
    budget = "" if suite.budget_h is None else f" of machine time (budget {suite.budget_h:g} h)"
    out.print(f"{counts}, about {_duration(planned.planned_s())}{budget}")


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:.1f} minutes" if minutes < 120 else f"{minutes / 60:.2f} h"


# How long `watch` keeps serving, once the run has ended, for open pages to get the end.
WATCH_DRAIN_S = 5.0
# Contestants a run verifies side by side before it starts (as `make verify`'s --jobs 2).
VERIFY_JOBS = 2


@dataclass
class LabOutcome:
    run: RunOutcome | None
    refused: list[str] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return bool(self.run and self.run.interrupted)


@dataclass
class Spread:
    """A run's load spread over a Ray cluster (`--ray`)."""

    address: str  # HOST:PORT of the cluster's head, or "lab" for the virtual lab
    generators: int | None = None
    cluster_hosts: tuple[str, ...] = ()  # a real cluster's hosts, as the user listed them


def run(
    planned: Planned,
    db: str,
    resume: bool,
    verify_first: bool,
    spread: Spread | None = None,
    rerun_busy: int = 0,
    execute=None,
    live_port: int | None = None,
) -> LabOutcome:
    """``execute``: another executor for each plan (a paired run's: serverlab.run.plan.paired).
    ``live_port``: serve the live page there (0: any free port), None: no page."""
    engine_binary()  # fails early, with the fix, when the engine is not built
    suite, plans = planned.suite, planned.plans
    print_refused(planned)
    if spread:
        _refuse_local_only(plans)
    # A spread run's limits are each generator's, for its share: its engine raises its own.
    limits = prepare_limits(suite) if spread is None else {}
    # Absolute: the path reaches servers whose working folder is their contestant's.
    db_path = Path(db).resolve()
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreError(f"cannot make the folder of {db_path}: {error.strerror}") from None
    # The lock comes first: a second run is refused before it verifies or reaps anything.
    with dblock.hold(db_path), Store(db_path) as store:
        store.check_intact()  # a damaged file, like one that cannot be written: before verify
        _clean_up_after_dead_runs(store, db_path.parent / "work")
        refused = _verify_all(plans) if verify_first else {}
        plans = [plan for plan in plans if plan.contestant not in refused]
        outcome = LabOutcome(run=None, refused=list(refused))
        if not plans:
            return outcome
        env = Environment(
            manifest_of=find, pinning=Pinning.default(), workdir=db_path.parent / "work"
        )
        progress, page = _displays(env, live_port)
        session = Session(
            suite, plans, store, env, resume=resume, limits=limits, rerun_busy=rerun_busy
        )
        session.refused, session.unverified = planned.refused, refused
        if execute is not None:
            session.execute = execute
        try:
            with _spread(session, spread):
                outcome.run = run_suite(session)
        finally:
            progress.end()
            if page:
                page.stop()
            # The run's own folder: its tests' folders are gone or moved to logs/ by now,
            # unless one died half-way; a key must not outlive the command either way.
            shutil.rmtree(leftovers.work_folder(env.workdir), ignore_errors=True)
    r = outcome.run
    console.print(
        f"run {r.run_id}: {r.finished} tests finished ({r.crashed} crashed, {r.invalid} "
        f"invalid), {r.skipped} kept from before"
        + (f", {r.rerun} re-run on a busy machine" if r.rerun else "")
        + (" — interrupted" if r.interrupted else "")
    )
    return outcome


def _displays(env: Environment, live_port: int | None) -> tuple[Fanout, LiveServer | None]:
    """The run's progress on the terminal, and as live events: in its work folder for
    `serverlab watch`, and on a page when `live_port` is given. The page and its feed run on
    the generator's CPUs."""
    feed = LiveFeed(_event_log(env.workdir), cpus=env.pinning.engine, run_id=lambda: env.run_id)
    env.progress = Fanout(Progress(console), feed)
    if live_port is None:
        return env.progress, None
    try:
        page = LiveServer(feed.log, live_port, cpus=env.pinning.engine).start()
    except LiveError:
        feed.end()
        raise
    console.print(f"live page: {page.url}", markup=False, highlight=False, soft_wrap=True)
    return env.progress, page


def _event_log(workdir: Path) -> EventLog:
    """The run's live events, written to its work folder for `watch` when it can be."""
    try:
        return EventLog(sink=side_file(leftovers.work_folder(workdir)))
    except OSError as error:
        console.print(f"serverlab watch cannot follow this run: {error.strerror}", markup=False)
        return EventLog()


def watch(db: str, port: int) -> int:
    """`serverlab watch`: the live page of the run going on in `db`, served until it ends;
    returns its id."""
    db_path = Path(db)
    run_id = live_watch.running_run(db_path)
    cpus = Pinning.default().engine  # the generator's CPUs, as the run's own page
    log = EventLog()
    page = LiveServer(log, port, cpus=cpus)
    live_watch.Follower(live_watch.side_file_of(db_path, run_id), log, cpus).start()
    page.start()
    console.print(
        f"run {run_id}: live page {page.url}", markup=False, highlight=False, soft_wrap=True
    )
    try:
        log.wait_closed()
        page.drain(WATCH_DRAIN_S)  # open pages get the last events before the server goes
    finally:
        page.stop()
    return run_id


def _refuse_local_only(plans: list[TestPlan]) -> None:
    linked = sorted({plan.scenario for plan in plans if plan.link})
    if linked:
        raise ServerError(
            f"scenarios with a shaped link run locally only: {', '.join(linked)} "
            "(in the virtual lab, `serverlab lab up --rate-mbit R` shapes every host's link)"
        )


@contextlib.contextmanager
def _spread(session: Session, spread: Spread | None):
    """Hands the session's tests to a Ray cluster for as long as the run lasts."""
    if spread is None:
        yield
        return
    from serverlab.cluster import driver

    address, allowed = _cluster_address(spread)
    cluster = driver.open_cluster(address, spread.generators, allowed)
    try:
        session.execute = driver.executor_for(cluster)
        session.placement = {**cluster.metadata(), **_lab_note(spread)}
        yield
    finally:
        driver.close(cluster)


def _cluster_address(spread: Spread) -> tuple[str, set[str]]:
    """The Ray address to connect to and the hosts load may go to. The virtual lab is
    entered first: this process then lives in the lab's head namespace, where Ray is."""
    if spread.address != "lab":
        return spread.address, set(spread.cluster_hosts)
    lab = manage.read(manage.DEFAULT_NAME)
    if lab is None or manage.status(manage.DEFAULT_NAME) != manage.UP:
        raise ServerError("the virtual lab is not up: run `serverlab lab up --generators N`")
    enter(Namespace(lab.head.netns))
    return lab.ray_address, {host.address for host in lab.hosts}


def _lab_note(spread: Spread) -> dict:
    if spread.address != "lab":
        return {}
    return {
        "note": "virtual lab on one machine: the server and the generators share its CPUs, "
        "so figures are capacity figures, not speed figures",
        "lab_link": manage.link(manage.DEFAULT_NAME),
    }


def _clean_up_after_dead_runs(store: Store, workdir: Path) -> None:
    abandoned = store.mark_abandoned()
    if abandoned:
        runs = ", ".join(str(run_id) for run_id in abandoned)
        console.print(f"run {runs} had died: marked abandoned (--resume runs its tests again)")
    reaped = leftovers.reap(workdir)
    if reaped:
        console.print(f"removed what dead runs left behind: {reaped.describe()}")
    stale = manage.reap_stale()
    if stale:
        console.print(f"removed half-made or forgotten virtual labs: {literal(', '.join(stale))}")


def prepare_limits(suite: Suite) -> dict:
    """Raises our descriptor limit (the servers and engine inherit it) and refuses, before
    anything starts, a suite whose [needs] this machine does not meet."""
    changed = tuning.raise_nofile(suite.needs.get("nofile"))
    short = tuning.shortfalls(suite.needs)
    if short:
        raise ServerError(tuning.refusal(str(suite.path), short))
    return {"in_force": tuning.in_force(), "rlimit_nofile_raised": changed}


def tune(suite_path: str | None, profile: str | None, apply: bool) -> list[str]:
    """Prints the limits table; with `apply` sets what is short first. Returns the changes."""
    needs = plan_suite(suite_path, 1.0, None, None, profile).suite.needs if suite_path else {}
    changes = []
    if apply:
        if not tuning.is_root():
            raise ServerError("serverlab tune --apply must run as root (it writes /proc/sys)")
        changes = tuning.apply(needs)
    table = Table("limit", "in force", "needed", "ok", "note")
    for row in tuning.rows(needs):
        mark = "[green]ok[/green]" if row.ok else "[red]SHORT[/red]"
        needed = "-" if row.needed is None else str(row.needed)
        table.add_row(row.limit, row.in_force, needed, mark, row.note)
    terminal.console().print(table)
    return changes


def _verify_all(plans: list[TestPlan]) -> dict[str, str]:
    """Conformance before any benchmark: contestants that fail are left out of the run
    (returned, each with why). They are verified side by side (verify mostly waits on the
    server it checks), each one's lines printed whole as it ends; a Ctrl-C lets each finish
    its case and stop its server. Each is checked on the parts its tests use: the serving
    modes none of them sends to are left out (protocols.modes_unused), and so are the
    transports (TLS, HTTP/2), syslog over TLS and gRPC, whose cases take 37 s of a server's
    verify here: `serverlab verify` checks them."""
    names = sorted({p.contestant for p in plans})
    unused = {n: protocols.modes_unused([p for p in plans if p.contestant == n]) for n in names}
    refused: dict[str, str] = {}
    stop = threading.Event()
    jobs = max(1, min(VERIFY_JOBS, len(names)))
    console.print(f"verifying {len(names)} contestants against the spec, {jobs} at a time ...")
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        verifying = {pool.submit(_verify_for_run, n, unused[n], stop): n for n in names}
        for future in concurrent.futures.as_completed(verifying):
            _show_verified(verifying[future], *future.result(), refused)
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return refused


def _verify_for_run(
    name: str, unused: frozenset[str], stop: threading.Event
) -> tuple[VerifyReport, str]:
    """One contestant's verify for a run, and the note on the parts it leaves out."""
    manifest = find(name)
    report = verify_contestant(manifest, leave_out=UNSPOKEN_BY_RUNS | unused, stop=stop)
    claimed = set(manifest.implements)
    notes = [
        f"{', '.join(sorted(parts))}: {why}"
        for parts, why in (
            (unused & claimed, "not used by this run"),
            (UNSPOKEN_BY_RUNS & claimed, "checked by `serverlab verify` only"),
        )
        if parts
    ]
    return report, f" (not checked: {'; '.join(notes)})" if notes else ""


def _show_verified(name: str, report: VerifyReport, note: str, refused: dict[str, str]) -> None:
    console.print(f"verified {literal(name)}: {literal(report.summary() + note)}")
    if report.ok:
        return
    failed = [r for r in report.results if r.status == "FAIL"][:5]
    refused[name] = _verify_reason(report, [r.case_id for r in failed])
    for result in failed:
        # The reason may quote the server's own answer.
        said = literal(f"{result.case_id}: {result.reason}")
        console.print(f"  FAIL {said}", highlight=False)
    if report.error:
        console.print(f"  {literal(report.error, newlines=True)}", highlight=False)


def _verify_reason(report: VerifyReport, failed: list[str]) -> str:
    """One line for the stored run: the verdict and the first failed cases (their details,
    which may quote a server, stay on the terminal and in `serverlab verify`)."""
    verdict = report.summary().removeprefix(f"{report.name}: ")
    cases = f" ({', '.join(failed)})" if failed else ""
    return f"failed verify: {verdict}{cases}"


def report(db: str, selection, output: str, summary: bool) -> Path:
    # For runs made before the architecture labels were recorded with them.
    labels = {m.name: m.architecture for m in discover() if isinstance(m, Manifest)}
    with Tally() as progress:
        path = build_report(db, selection or None, output, labels, progress)
    if summary:
        print_summary(db, selection or None, console=terminal.console(), labels=labels)
        print_time_to_steady(db, selection or None, terminal.console())
    return path


def report_json(db: str, selection) -> dict:
    labels = {m.name: m.architecture for m in discover() if isinstance(m, Manifest)}
    return report_data(db, selection or None, labels)


def compare(db: str, side_a: str, side_b: str, metrics, note: str = "") -> None:
    """The comparison's table; ``note`` (machines mixed, say) printed under it."""
    rows = comparing.compare(db, side_a, side_b, metrics)
    interrupts.checkpoint("compare")  # tests stop here to send a signal before the table
    comparing.print_comparison(rows, side_a, side_b, note=note)


def compare_json(db: str, side_a: str, side_b: str, metrics, machines: dict) -> dict:
    """`compare --json`: the same rows, their cells, flags, n, intervals and verdicts, and
    the machines each side ran on."""
    rows = comparing.compare(db, side_a, side_b, metrics)
    return {
        "a": side_a,
        "b": side_b,
        "machines": machines,
        "rows": [row.as_dict() for row in rows],
    }


def export(db: str, csv_dir: str) -> list[Path]:
    return export_csv(db, csv_dir)


def publish(db: str, selection, out: str) -> PublishedSite:
    with Tally() as progress:
        return publish_site(db, selection, out, progress)


def recover(db: str, out: str) -> list[TableRecovery]:
    with Tally() as progress:
        return recover_rows(db, out, progress)


def engine_argv(args) -> tuple[str, list[str]]:
    binary = str(engine_binary())
    return binary, [binary, *args]


def lab_up(generators: int, rate_mbit: float | None, delay_ms: float = 0.0, loss_pct: float = 0.0):
    # Bad values are one line, before a word of progress.
    plan_lab(manage.DEFAULT_NAME, generators, rate_mbit, delay_ms, loss_pct)
    console.print(f"making the virtual lab: {generators} generators ...")
    with Tally() as progress:
        return manage.up(
            generators, rate_mbit, delay_ms=delay_ms, loss_pct=loss_pct, progress=progress
        )


def lab_link() -> dict:
    return manage.link(manage.DEFAULT_NAME)


def lab_down() -> dict[str, int]:
    return manage.down()


def spread_load(engine_args: list[str], spread: Spread) -> str:
    """`serverlab load --ray`: the engine's flags, their load spread over the generators."""
    from serverlab.cluster import adhoc

    address, allowed = _cluster_address(spread)
    return adhoc.spread_load(engine_args, address, spread.generators, allowed)
