"""The `serverlab` command: a thin click layer over the package's modules.

A user's mistake (unknown contestant, bad manifest, bad --set) is one line on stderr and
a non-zero exit code, never a traceback. Ctrl-C, SIGTERM, a closed terminal (SIGHUP) and a
closed output pipe all stop the command the same way (serverlab.base.interrupts): what it
started is stopped, a run is marked interrupted, and the exit code is 128 + the signal
(130 for Ctrl-C).
"""

# ruff: noqa: E402
# Ctrl-C while the imports below run (a third of a second, seconds on a busy machine) ends
# the command as quietly as later: the guard comes before them, main() replaces it.
from serverlab.base import interrupts

_BEFORE_GUARD = interrupts.guard_start()
interrupts.checkpoint("import")

import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import click
from rich.table import Table

interrupts.checkpoint("imports")

from serverlab import commands, history_commands
from serverlab.base import owner, scratch, terminal
from serverlab.base.netns import NetnsError
from serverlab.base.paths import CONTESTANTS_ENV
from serverlab.base.progress import Tally
from serverlab.base.terminal import literal
from serverlab.cluster.errors import ClusterError
from serverlab.conformance.cases import CaseFileError
from serverlab.conformance.outcome import FAIL, PASS, WARN
from serverlab.conformance.verify import VerifyReport, verify_contestant
from serverlab.contestant.build import build_contestant, run_contestant_tests
from serverlab.contestant.inventory import contestant_rows
from serverlab.contestant.manifest import (
    BrokenManifest,
    Manifest,
    ManifestError,
    UnknownContestantError,
    discover,
    find,
)
from serverlab.contestant.placeholders import PlaceholderError
from serverlab.contestant.server import ContestantServer, ServerError, log_tail, parse_assignments
from serverlab.lab.topology import LabError
from serverlab.results.compare import DEFAULT_METRICS
from serverlab.results.gate_formats import FORMATS
from serverlab.results.history import HISTORY_METRICS
from serverlab.results.report import DEFAULT_REPORT, SelectionError
from serverlab.results.store import DEFAULT_DB, StoreError
from serverlab.run.execution.engine import EngineError
from serverlab.run.plan.live.server import LiveError
from serverlab.run.plan.paired import PairedError
from serverlab.run.plan.suite.file import SuiteError

USER_ERRORS = (
    LiveError,
    ManifestError,
    UnknownContestantError,
    ServerError,
    CaseFileError,
    PlaceholderError,
    SuiteError,
    StoreError,
    SelectionError,
    EngineError,
    LabError,
    ClusterError,
    NetnsError,
    PairedError,
)
STATUS_STYLE = {PASS: "green", WARN: "yellow", FAIL: "red"}
DB_OPTION = click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=str(DEFAULT_DB),
    show_default=True,
    help="results database (SQLite)",
)
SET_OPTION = click.option(
    "--set", "assignments", multiple=True, metavar="KEY=VALUE", help="a tunable's value"
)


class UserError(click.ClickException):
    """Printed as one line, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        # The message may quote a suite, a manifest or a server's log: shown as written.
        click.echo(f"serverlab: error: {_plain(self.message)}", err=True)


@click.group()
@click.option(
    "--contestants-dir",
    type=click.Path(file_okay=False, exists=True),
    help=f"folder of <name>/contestant.toml (default: ${CONTESTANTS_ENV} or "
    "the repository's contestants/)",
)
def cli(contestants_dir):
    """serverlab: compare server architectures under load, against one spec."""
    if contestants_dir:
        os.environ[CONTESTANTS_ENV] = os.path.abspath(contestants_dir)


def _reasons_not_claimed(name: str, parts: list[str]) -> dict[str, str]:
    """Why the contestant does not claim each part verify left unchecked, where it says."""
    try:
        reasons = find(name).not_claimed
    except (ManifestError, UnknownContestantError):
        return {}
    return {part: reasons[part] for part in parts if part in reasons}


@cli.command()
def contestants():
    """List the contestants: language, architecture, version, built or not."""
    table = Table("name", "language", "architecture", "version", "built")
    for row in contestant_rows():
        if row.error:
            error = literal(row.error)
            table.add_row(literal(row.name), "[red]invalid manifest[/red]", error, "", "")
        else:
            cells = (row.name, row.language, row.architecture, row.version, row.built)
            table.add_row(*(literal(cell) for cell in cells))
    terminal.console().print(table)


@cli.command()
@click.argument("names", nargs=-1)
def build(names):
    """Install Debian packages and build the named contestants (default: all)."""
    if names:
        manifests, failed = [find(name) for name in names], []
    else:
        manifests, failed = _split_broken(discover())
    for manifest in manifests:
        name = _plain(manifest.name)
        click.echo(f"building {name} ...")
        result = build_contestant(manifest)
        if result.ok:
            click.secho(f"built   {name} in {result.seconds:.1f} s", fg="green")
        else:
            failed.append(manifest.name)
            click.secho(
                f"FAILED  {name} after {result.seconds:.1f} s: {_plain(result.detail)}",
                fg="red",
                err=True,
            )
    if failed:
        raise UserError(f"build failed for {', '.join(failed)}")


@cli.command("contestant-tests")
@click.argument("names", nargs=-1)
def contestant_tests(names):
    """Run the contestants' own tests (formatter, linter, unit tests): each manifest's
    `test` command (default: every contestant)."""
    manifests, failed = _split_broken(discover()) if not names else ([find(n) for n in names], [])
    for manifest in manifests:
        result = run_contestant_tests(manifest)
        name, detail = _plain(manifest.name), _plain(result.detail)
        if result.ok:
            note = f" ({detail})" if result.detail else ""
            click.secho(f"passed  {name} in {result.seconds:.1f} s{note}", fg="green")
        else:
            failed.append(manifest.name)
            click.secho(f"FAILED  {name}: {detail}", fg="red", err=True)
    if failed:
        raise UserError(f"contestant tests failed for {', '.join(failed)}")


# The old name, kept for this one version: `check` read as "check the contestant", which
# verify does, while the command runs the contestant's own tests.
@cli.command(hidden=True)
@click.argument("names", nargs=-1)
@click.pass_context
def check(ctx, names):
    """The old name of contestant-tests."""
    notice = "serverlab: `check` is now `contestant-tests`; the old name goes in the next version"
    click.echo(notice, err=True)
    ctx.invoke(contestant_tests, names=names)


@cli.command()
@click.argument("name")
@click.option("--port", type=int, required=True, help="HTTP port on 127.0.0.1")
@click.option("--syslog-port", type=int, help="syslog port (TCP and UDP); default: a free one")
@click.option("--docroot", type=click.Path(file_okay=False, exists=True))
@SET_OPTION
@click.option("--cpus", help="pin the server to these CPUs (taskset -c)")
def serve(name, port, syslog_port, docroot, assignments, cpus):
    """Run one contestant in the foreground until Ctrl-C."""
    server = ContestantServer(
        find(name),
        port=port,
        syslog_port=syslog_port,
        docroot=docroot,
        settings=parse_assignments(assignments),
        cpus=cpus,
    )
    try:
        server.start()
        click.echo(
            f"{name} listening on http://127.0.0.1:{server.port} "
            f"(syslog {server.syslog_port}), docroot {server.docroot}"
        )
        if server.tls_port:
            click.echo(
                f"TLS on https://127.0.0.1:{server.tls_port}, trusting only the run's CA "
                f"{server.tls.ca_cert} (gone when the server stops)"
            )
        if server.syslog_tls_port:
            click.echo(f"syslog over TLS (RFC 5425) on 127.0.0.1:{server.syslog_tls_port}")
        if server.h2c_port:
            click.echo(f"h2c (HTTP/2 with prior knowledge) on 127.0.0.1:{server.h2c_port}")
        click.echo(f"log: {server.log_path}; Ctrl-C stops it")
        while server.alive:
            time.sleep(0.2)
        raise UserError(
            f"{name} stopped by itself ({server.exit_status.describe()}); "
            f"log tail:\n{log_tail(server.log_path)}"
        )
    except KeyboardInterrupt:
        click.echo(f"\nstopping {name} ...")
    finally:
        server.stop()
    click.echo(f"{name} stopped; log kept at {server.log_path}")


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--all", "all_contestants", is_flag=True, help="every contestant")
@click.option("--case", "pattern", metavar="GLOB", help="only the cases whose id matches")
@SET_OPTION
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON on stdout")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="contestants verified side by side; each one's results print whole when it ends",
)
def verify(names, all_contestants, pattern, assignments, as_json, jobs):
    """Check contestants against spec/cases: PASS / WARN / FAIL per case."""
    if all_contestants == bool(names):
        raise UserError("name contestants or give --all (not both)")
    known = {entry.name for entry in discover()}
    for name in names:
        if name not in known:
            find(name)  # raises the error that lists the known names
    names = names or sorted(known)
    settings = parse_assignments(assignments)
    if jobs > 1 and len(names) > 1:
        options = [*(("--case", pattern) if pattern else ()), *_set_options(assignments)]
        if not verify_side_by_side(names, options, as_json, jobs):
            sys.exit(1)
        return
    # A verify killed with -9 left its server and its folder (docroot, secret): gone now.
    owner.reap_orphans()
    scratch.reap()
    with Tally() as progress:
        progress.begin(len(names), "verify")
        reports = []
        for name in names:
            reports.append(_verify_one(name, pattern, settings, as_json))
            progress.advance(f"{_plain(name)} {'passed' if reports[-1].ok else 'FAILED'}")
    if as_json:
        click.echo(json.dumps([report.as_dict() for report in reports], indent=2))
    if not all(report.ok for report in reports):
        sys.exit(1)


def _set_options(assignments):
    return [word for assignment in assignments for word in ("--set", assignment)]


def verify_side_by_side(names, options, as_json, jobs) -> bool:
    """Verifies each contestant in a `serverlab verify NAME` of its own, `jobs` at a time
    (verify mostly waits on the server it checks); prints each one's output whole as it
    ends, never interleaved. True when every one passed."""
    click.echo(
        f"verifying {len(names)} contestants, {jobs} at a time; each prints when it ends",
        err=True,
    )
    reports, failed = {}, []
    with Tally() as progress:
        progress.begin(len(names), "verify")
        for name, code, out, err in verify_children(names, options, as_json, jobs):
            _show_child(name, code, out, err, as_json, reports, failed)
            progress.advance(f"{_plain(name)} {'passed' if code == 0 else 'FAILED'}")
    if as_json:
        click.echo(json.dumps([r for name in names for r in reports.get(name, [])], indent=2))
    ended = f"failed: {', '.join(sorted(failed))}" if failed else "all passed"
    colour = "red" if failed else "green"
    click.secho(f"verify: {len(names)} contestants, {ended}", fg=colour, err=as_json)
    return not failed


def _show_child(name, code, out, err, as_json, reports, failed) -> None:
    """One child verify's output, whole; its JSON kept for the end."""
    click.echo(err, nl=False, err=True)
    if as_json:
        reports[name] = json.loads(out) if out.strip() else []
    else:
        click.echo(out, nl=False)
    if code != 0:
        failed.append(name)


def verify_children(names, options, as_json, jobs):
    """(name, exit code, stdout, stderr) of each child verify, in the order they end. A
    child still running when this stops (Ctrl-C) is stopped with SIGTERM and waited for."""
    children, lock, stopping = [], threading.Lock(), threading.Event()

    def one(name):
        argv = [sys.executable, "-c", "from serverlab.cli import main; main()", "verify", name]
        argv += [*options, *(["--json"] if as_json else [])]
        # Without --json, stderr joins stdout so that a contestant's lines keep their order.
        stderr = subprocess.PIPE if as_json else subprocess.STDOUT
        with lock:
            if stopping.is_set():
                return name, None, "", ""
            child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
            children.append(child)
        out, err = child.communicate()
        return name, child.returncode, out, err or ""

    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        for future in concurrent.futures.as_completed([pool.submit(one, n) for n in names]):
            yield future.result()
    finally:
        with lock:
            stopping.set()
        for child in children:
            if child.poll() is None:
                child.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _verify_one(name, pattern, settings, as_json):
    def show(result):
        # What was observed and why it failed quote the server's answers.
        style = STATUS_STYLE[result.status]
        line = f"{click.style(result.status, fg=style)}  {_plain(result.case_id)}"
        if result.observed:
            line += click.style(f" [{_plain(result.observed)}]", dim=True)
        reason = f"  {_plain(result.reason)}" if result.reason else ""
        click.echo(line + reason, err=as_json)

    click.echo(click.style(f"== {_plain(name)}", bold=True), err=as_json)
    try:
        report = verify_contestant(find(name), pattern=pattern, settings=settings, on_result=show)
    except (ManifestError, UnknownContestantError, ServerError) as error:
        report = VerifyReport(name, error=str(error))
    if report.error:
        click.secho(f"FAIL  {_plain(name)}: {_plain(report.error)}", fg="red", err=as_json)
    for crash in report.crashes:
        click.secho(f"CRASH {_plain(crash)}", fg="red", err=as_json)
    if report.not_claimed:
        click.echo(f"not claimed (not checked): {', '.join(report.not_claimed)}", err=as_json)
    for part, why in _reasons_not_claimed(name, report.not_claimed).items():
        click.echo(f"  {part}: {_plain(why)}", err=as_json)
    summary = _plain(report.summary())
    click.secho(summary, fg="green" if report.ok else "red", bold=True, err=as_json)
    return report


@cli.command()
@click.argument("suite_file", type=click.Path(dir_okay=False))
@DB_OPTION
@click.option("--scale", type=float, default=1.0, show_default=True, help="duration factor")
@click.option("--profile", help="a [profiles.NAME] of the suite, e.g. quick (default: full)")
@click.option("--contestants", "only", help="comma-separated names: run only these")
@click.option("--repeats", type=int, help="override the suite's repeats")
@click.option("--dry-run", is_flag=True, help="print the tests and the estimated time, run nothing")
@click.option(
    "--json", "as_json", is_flag=True, help="with --dry-run: each test's plan, as JSON Lines"
)
@click.option("--resume", is_flag=True, help="skip tests this suite already finished in --db")
@click.option("--skip-verify", is_flag=True, help="no full conformance check before the suite")
@click.option(
    "--rerun-busy",
    type=int,
    default=0,
    metavar="N",
    help="re-run a repeat flagged machine-busy up to N times (the flagged one stays, superseded)",
)
@click.option(
    "--ray",
    "ray_address",
    metavar="HOST:PORT|lab",
    help="spread the load over a Ray cluster's generators ('lab': the virtual lab)",
)
@click.option("--generators", type=int, help="with --ray: how many generators (default: all)")
@click.option(
    "--cluster-hosts",
    help="with --ray HOST:PORT: the cluster's hosts, comma-separated; load goes nowhere else",
)
@click.option(
    "--live",
    "live_port",
    type=click.IntRange(0, 65535),
    is_flag=False,
    flag_value=0,
    default=None,
    metavar="[PORT]",
    help="serve a live page of the run on 127.0.0.1 (PORT, or any free one), behind a token",
)
def run(
    suite_file,
    db,
    scale,
    profile,
    only,
    repeats,
    dry_run,
    as_json,
    resume,
    skip_verify,
    rerun_busy,
    ray_address,
    generators,
    cluster_hosts,
    live_port,
):
    """Run a suite: every permutation x repeat, each in a fresh server, stored in --db."""
    if as_json and not dry_run:
        raise UserError("--json goes with --dry-run")
    if rerun_busy < 0:
        raise UserError(f"--rerun-busy {rerun_busy}: give 0 or more re-runs")
    if (generators or cluster_hosts) and not ray_address:
        raise UserError("--generators and --cluster-hosts go with --ray")
    hosts = tuple(h.strip() for h in (cluster_hosts or "").split(",") if h.strip())
    spread = commands.Spread(ray_address, generators, hosts) if ray_address else None
    names = [n.strip() for n in only.split(",") if n.strip()] if only else None
    planned = commands.plan_suite(suite_file, scale, names, repeats, profile, spread)
    if dry_run:
        (commands.print_plans if as_json else commands.print_plan)(planned)
        return
    outcome = commands.run(
        planned, db, resume, not skip_verify, spread, rerun_busy, live_port=live_port
    )
    if outcome.interrupted:
        click.echo("serverlab: interrupted; finished tests are kept (--resume continues)", err=True)
        sys.exit(128 + interrupts.last_signal())
    if outcome.refused:
        raise UserError(f"not run (failed verify): {', '.join(outcome.refused)}")


@cli.command()
@DB_OPTION
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="the page's port on 127.0.0.1 (default: any free one)",
)
def watch(db, port):
    """The live page of the run going on in --db (started in another terminal), until it ends."""
    run_id = commands.watch(db, port)
    click.echo(f"run {run_id} has ended")


@cli.group()
def lab():
    """The virtual lab: hosts in network namespaces on one machine, each a Ray node."""


@lab.command("up")
@click.option("--generators", type=int, default=2, show_default=True, help="load hosts")
@click.option("--rate-mbit", type=float, help="shape every host's link to this rate")
@click.option("--delay-ms", type=float, default=0.0, help="one-way delay between two hosts")
@click.option("--loss-pct", type=float, default=0.0, help="packets lost between two hosts, %")
def lab_up(generators, rate_mbit, delay_ms, loss_pct):
    """Make the lab: a head, a server host and N generator hosts in 198.18.0.0/24."""
    made = commands.lab_up(generators, rate_mbit, delay_ms, loss_pct)
    for host in made.hosts:
        click.echo(f"{host.role:8} {host.address:12} {host.netns}")
    link = commands.lab_link()
    if link.get("shaped_by"):
        click.echo(f"links by {link['shaped_by']}: round trip {link.get('rtt_ms')} ms")
    click.echo(f"Ray at {made.ray_address}; run a suite there with --ray lab")


@lab.command("down")
def lab_down():
    """Stop the lab's Ray nodes and remove its namespaces."""
    gone = commands.lab_down()
    click.echo(f"stopped {gone['processes']} processes, removed {gone['namespaces']} namespaces")


@cli.command()
@click.argument("suite_file", required=False, type=click.Path(dir_okay=False))
@click.option("--profile", help="the suite's profile whose needs count (default: full)")
@click.option("--apply", "apply_changes", is_flag=True, help="as root, set what is short")
def tune(suite_file, profile, apply_changes):
    """The limits large connection counts need: in force, needed by SUITE, OK or not."""
    changes = commands.tune(suite_file, profile, apply_changes)
    for change in changes:
        click.echo(f"changed {change}")
    if apply_changes and not changes:
        click.echo("nothing to change")


@cli.command()
@click.argument("selection", nargs=-1)
@DB_OPTION
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=str(DEFAULT_REPORT),
    show_default=True,
)
@click.option("--summary", is_flag=True, help="also print the summary table")
@click.option(
    "--json", "as_json", is_flag=True, help="print the report's cells as JSON instead of HTML"
)
def report(selection, db, output, summary, as_json):
    """Write the HTML report of the selected runs (default: latest; or all, run:N,
    suite:NAME, contestant:NAME)."""
    if as_json:
        click.echo(json.dumps(commands.report_json(db, selection), indent=2))
        return
    click.echo(commands.report(db, selection, output, summary))


@cli.command()
@click.argument("selection", nargs=-1)
@click.argument("out", type=click.Path(file_okay=False))
@DB_OPTION
def publish(selection, out, db):
    """Write the selected runs (default: all; or run:N, suite:NAME, contestant:NAME) as a
    static site in OUT: an index, each run's report, each suite's history, and every cell
    as JSON under results.schema.json. The same database gives the same bytes."""
    published = commands.publish(db, selection, out)
    click.echo(
        f"published {published.runs} runs, {len(published.files)} files: "
        f"{_plain(os.path.join(out, 'index.html'))}"
    )


@cli.command()
@click.argument("side_a")
@click.argument("side_b")
@DB_OPTION
@click.option("--metric", "metrics", multiple=True, type=click.Choice(DEFAULT_METRICS))
@click.option(
    "--paired",
    "suite_file",
    metavar="SUITE",
    type=click.Path(dir_okay=False),
    help="run SUITE now with A and B as configurations (name=value,... or engine=PATH or "
    "contestants=DIR), interleaved A, B, A' in one sitting",
)
@click.option("--rounds", type=click.IntRange(min=2), default=4, show_default=True)
@click.option(
    "--fail-on-regression",
    "threshold",
    type=click.FloatRange(min=0),
    metavar="PCT",
    help="exit 1 if a regression over PCT % is supported, 0 if none, 3 if inconclusive",
)
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON")
@click.option(
    "--mix-machines",
    is_flag=True,
    help="compare runs of different machine fingerprints (said beside the verdict); "
    "without it such a comparison is inconclusive (exit 3)",
)
@click.option(
    "--format",
    "forms",
    multiple=True,
    type=click.Choice(FORMATS),
    help="with --fail-on-regression: the verdict for CI as well (markdown for a pull-request "
    "comment, junit, json), on stdout (the tables then go to stderr) or in --output; "
    "repeated, each with its --output",
)
@click.option(
    "--output",
    "outputs",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="with --format: write the verdict to this file (the n-th --output for the n-th "
    "--format); stdout keeps the tables",
)
def compare(
    side_a,
    side_b,
    db,
    metrics,
    suite_file,
    rounds,
    threshold,
    as_json,
    mix_machines,
    forms,
    outputs,
):
    """Compare two selections: medians, intervals, and whether each difference is significant.

    With --paired SUITE, A and B are configurations run now, interleaved with A again for an
    A/A noise floor. With --fail-on-regression PCT, a gate: exit 1 if a regression over PCT %
    stands out from zero and the floor, 0 if none, 3 if inconclusive or a test is flagged.
    Only runs of one machine fingerprint are compared: A and B from different machines are
    inconclusive (exit 3), unless --mix-machines. With --format markdown|junit|json, the
    gate's verdict is written for CI too (docs/gate-output.md)."""
    document = _gate_document(forms, outputs, threshold)
    if suite_file and mix_machines:
        raise UserError("--mix-machines goes without --paired: a sitting is one machine")
    if as_json:
        if suite_file or threshold is not None:
            raise UserError(
                "--json goes without --paired and --fail-on-regression "
                "(the gate's JSON: --format json)"
            )
        metrics = metrics or DEFAULT_METRICS
        code, data = history_commands.compare_json(db, side_a, side_b, metrics, mix_machines)
        if data is not None:
            click.echo(json.dumps(data, indent=2))
        sys.exit(code)
    sys.exit(
        history_commands.compare(
            side_a, side_b, db, metrics, suite_file, rounds, threshold, mix_machines, document
        )
    )


def _gate_document(forms, outputs, threshold) -> history_commands.GateDocument:
    """--format and --output paired in order; one --format may go without --output, to
    stdout."""
    if forms and threshold is None:
        raise UserError(f"--format {forms[0]} goes with --fail-on-regression PCT")
    if outputs and len(outputs) != len(forms):
        raise UserError("give one --output per --format (or one --format alone, for stdout)")
    if len(forms) > 1 and not outputs:
        raise UserError("several --format need an --output each; stdout holds only one")
    for output in outputs:
        if not os.path.isdir(os.path.dirname(os.path.abspath(output))):
            raise UserError(f"--output {output}: no such folder")
    paths = outputs or (None,) * len(forms)
    return history_commands.GateDocument(tuple(zip(forms, paths, strict=True)))


@cli.command()
@click.argument("selection", nargs=-1)
@DB_OPTION
@click.option("--metric", "metrics", multiple=True, type=click.Choice(DEFAULT_METRICS))
@click.option("--max-pvalue", type=float, default=0.001, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="the series as JSON")
@click.option("--mix-machines", is_flag=True, help="let a series cross machine fingerprints")
def history(selection, db, metrics, max_pvalue, as_json, mix_machines):
    """Every series (suite, scenario, contestant, figure, machine) over the selected runs
    (default: latest; or all, run:N,M, suite:NAME, contestant:NAME), with change points."""
    history_commands.history(
        db, selection, metrics or HISTORY_METRICS, max_pvalue, as_json, mix_machines
    )


@cli.command()
@DB_OPTION
@click.option("--csv", "csv_dir", type=click.Path(file_okay=False), help="write a CSV per table")
@click.option(
    "--recover",
    "recover_to",
    type=click.Path(dir_okay=False),
    help="copy what a damaged database still holds into this new file",
)
def export(db, csv_dir, recover_to):
    """Export every table to CSV files, or recover a damaged database into a new one."""
    if bool(csv_dir) == bool(recover_to):
        raise UserError("give --csv DIR or --recover NEW.db (one of them)")
    if csv_dir:
        for path in commands.export(db, csv_dir):
            click.echo(path)
        return
    for table in commands.recover(db, recover_to):
        click.echo(table.describe())
    click.echo(f"recovered into {recover_to}; read it with --db {recover_to}")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--ray", "ray_address", metavar="HOST:PORT|lab", help="load from a Ray cluster's generators"
)
@click.option("--generators", type=int, help="with --ray: how many generators (default: all)")
@click.option("--cluster-hosts", help="with --ray HOST:PORT: the hosts load may go to")
@click.argument("engine_args", nargs=-1, type=click.UNPROCESSED)
def load(ray_address, generators, cluster_hosts, engine_args):
    """Run the load engine directly (serverlab-load's own flags and exit codes, 3 for no
    answer among them: `serverlab load -- --help`), or with --ray from several machines at
    once, its results merged."""
    if not ray_address:
        if generators or cluster_hosts:
            raise UserError("--generators and --cluster-hosts go with --ray")
        os.execv(*commands.engine_argv(engine_args))
    hosts = tuple(h.strip() for h in (cluster_hosts or "").split(",") if h.strip())
    spread = commands.Spread(ray_address, generators, hosts)
    click.echo(commands.spread_load(list(engine_args), spread), nl=False)


def _split_broken(entries):
    """(valid manifests, names of broken ones), each broken one reported on stderr."""
    broken = [entry for entry in entries if isinstance(entry, BrokenManifest)]
    for entry in broken:
        click.secho(f"invalid manifest: {_plain(entry.error)}", fg="red", err=True)
    return [e for e in entries if isinstance(e, Manifest)], [e.name for e in broken]


def _plain(text) -> str:
    """A name or a message from outside, for click.echo: as written, control characters
    shown (serverlab.base.terminal.literal), line breaks kept."""
    return literal(text, markup=False, newlines=True)


def main() -> None:
    try:
        interrupts.checkpoint("main")
        interrupts.install()
        # Everything started from here, however, carries this process's mark
        # (serverlab.base.owner).
        os.environ[owner.OWNER_ENV] = owner.token()
        interrupts.checkpoint("command")
        try:
            _main()
        finally:
            _leave()
    except KeyboardInterrupt as interrupt:
        # Before the command ran, or on the way out: what it started is reaped all the same.
        _leave()
        _exit_interrupted(interrupt)


def _leave() -> None:
    """The way out: what this process started and still runs is killed, and a Ctrl-C from
    here on no longer cuts that short."""
    interrupts.checkpoint("exit")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    owner.reap_mine()


def _main() -> None:
    try:
        code = cli.main(standalone_mode=False)
    except BrokenPipeError:
        interrupts.silence_broken_outputs()
        sys.exit(128 + signal.SIGPIPE)
    except click.exceptions.Abort as abort:
        # click turns KeyboardInterrupt into Abort; the signal is kept in its cause.
        _exit_interrupted(abort.__cause__ or abort.__context__)
    except KeyboardInterrupt as interrupt:
        _exit_interrupted(interrupt)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except USER_ERRORS as error:
        UserError(str(error)).show()
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


def _exit_interrupted(cause) -> None:
    # Servers were stopped on the way out (context managers and finally blocks).
    signum = getattr(cause, "signum", interrupts.last_signal())
    # A reader that went away (`| head`) needs no word, as with any command in a pipe.
    if signum != signal.SIGPIPE:
        with contextlib.suppress(OSError):
            click.echo("serverlab: interrupted", err=True)
    sys.exit(128 + signum)


interrupts.end_guard(_BEFORE_GUARD)
