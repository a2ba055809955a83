"""The `serverlab` command: a thin click layer over the package's modules.

A user's mistake (unknown contestant, bad manifest, bad --set) is one line on stderr and
a non-zero exit code, never a traceback. Ctrl-C, SIGTERM, a closed terminal (SIGHUP) and a
closed output pipe all stop the command the same way (serverlab.base.interrupts): what it
started is stopped, a run is marked interrupted, and the exit code is 128 + the signal
(130 for Ctrl-C).
"""

import contextlib
import json
import os
import signal
import sys
import time

import click
from rich.table import Table

from serverlab import commands
from serverlab.base import interrupts, owner, scratch, terminal
from serverlab.base.netns import NetnsError
from serverlab.base.paths import CONTESTANTS_ENV
from serverlab.cluster.errors import ClusterError
from serverlab.conformance.cases import CaseFileError
from serverlab.conformance.outcome import FAIL, PASS, WARN
from serverlab.conformance.verify import VerifyReport, verify_contestant
from serverlab.contestant.build import build_contestant, check_contestant
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
from serverlab.results.report import DEFAULT_REPORT, SelectionError
from serverlab.results.store import DEFAULT_DB, StoreError
from serverlab.run.engine import EngineError
from serverlab.run.suite import SuiteError

USER_ERRORS = (
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
        click.echo(f"serverlab: error: {self.message}", err=True)


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


@cli.command()
def contestants():
    """List the contestants: language, architecture, version, built or not."""
    table = Table("name", "language", "architecture", "version", "built")
    for row in contestant_rows():
        if row.error:
            table.add_row(row.name, "[red]invalid manifest[/red]", row.error, "", "")
        else:
            table.add_row(row.name, row.language, row.architecture, row.version, row.built)
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
        click.echo(f"building {manifest.name} ...")
        result = build_contestant(manifest)
        if result.ok:
            click.secho(f"built   {manifest.name} in {result.seconds:.1f} s", fg="green")
        else:
            failed.append(manifest.name)
            click.secho(
                f"FAILED  {manifest.name} after {result.seconds:.1f} s: {result.detail}",
                fg="red",
                err=True,
            )
    if failed:
        raise UserError(f"build failed for {', '.join(failed)}")


@cli.command()
@click.argument("names", nargs=-1)
def check(names):
    """Run the contestants' own checks (formatter, linter, unit tests): each manifest's
    `test` command (default: every contestant)."""
    manifests, failed = _split_broken(discover()) if not names else ([find(n) for n in names], [])
    for manifest in manifests:
        result = check_contestant(manifest)
        if result.ok:
            note = f" ({result.detail})" if result.detail else ""
            click.secho(f"passed  {manifest.name} in {result.seconds:.1f} s{note}", fg="green")
        else:
            failed.append(manifest.name)
            click.secho(f"FAILED  {manifest.name}: {result.detail}", fg="red", err=True)
    if failed:
        raise UserError(f"checks failed for {', '.join(failed)}")


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
def verify(names, all_contestants, pattern, assignments, as_json):
    """Check contestants against spec/cases: PASS / WARN / FAIL per case."""
    if all_contestants == bool(names):
        raise UserError("name contestants or give --all (not both)")
    known = {entry.name for entry in discover()}
    for name in names:
        if name not in known:
            find(name)  # raises the error that lists the known names
    names = names or sorted(known)
    settings = parse_assignments(assignments)
    # A verify killed with -9 left its server and its folder (docroot, secret): gone now.
    owner.reap_orphans()
    scratch.reap()
    reports = [_verify_one(name, pattern, settings, as_json) for name in names]
    if as_json:
        click.echo(json.dumps([report.as_dict() for report in reports], indent=2))
    if not all(report.ok for report in reports):
        sys.exit(1)


def _verify_one(name, pattern, settings, as_json):
    def show(result):
        style = STATUS_STYLE[result.status]
        line = f"{click.style(result.status, fg=style)}  {result.case_id}"
        if result.observed:
            line += click.style(f" [{result.observed}]", dim=True)
        click.echo(line + (f"  {result.reason}" if result.reason else ""), err=as_json)

    click.echo(click.style(f"== {name}", bold=True), err=as_json)
    try:
        report = verify_contestant(find(name), pattern=pattern, settings=settings, on_result=show)
    except (ManifestError, UnknownContestantError, ServerError) as error:
        report = VerifyReport(name, error=str(error))
    if report.error:
        click.secho(f"FAIL  {name}: {report.error}", fg="red", err=as_json)
    for crash in report.crashes:
        click.secho(f"CRASH {crash}", fg="red", err=as_json)
    click.secho(report.summary(), fg="green" if report.ok else "red", bold=True, err=as_json)
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
    ray_address,
    generators,
    cluster_hosts,
):
    """Run a suite: every permutation x repeat, each in a fresh server, stored in --db."""
    if as_json and not dry_run:
        raise UserError("--json goes with --dry-run")
    if (generators or cluster_hosts) and not ray_address:
        raise UserError("--generators and --cluster-hosts go with --ray")
    hosts = tuple(h.strip() for h in (cluster_hosts or "").split(",") if h.strip())
    spread = commands.Spread(ray_address, generators, hosts) if ray_address else None
    names = [n.strip() for n in only.split(",") if n.strip()] if only else None
    planned = commands.load(suite_file, scale, names, repeats, profile)
    if dry_run:
        (commands.print_plans if as_json else commands.print_plan)(planned)
        return
    outcome = commands.run(planned, db, resume, not skip_verify, spread)
    if outcome.interrupted:
        click.echo("serverlab: interrupted; finished tests are kept (--resume continues)", err=True)
        sys.exit(128 + interrupts.last_signal())
    if outcome.refused:
        raise UserError(f"not run (failed verify): {', '.join(outcome.refused)}")


@cli.group()
def lab():
    """The virtual lab: hosts in network namespaces on one machine, each a Ray node."""


@lab.command("up")
@click.option("--generators", type=int, default=2, show_default=True, help="load hosts")
@click.option("--rate-mbit", type=float, help="shape every host's link to this rate")
def lab_up(generators, rate_mbit):
    """Make the lab: a head, a server host and N generator hosts in 198.18.0.0/24."""
    made = commands.lab_up(generators, rate_mbit)
    for host in made.hosts:
        click.echo(f"{host.role:8} {host.address:12} {host.netns}")
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
def report(selection, db, output, summary):
    """Write the HTML report of the selected runs (default: latest; or all, run:N,
    suite:NAME, contestant:NAME)."""
    click.echo(commands.report(db, selection, output, summary))


@cli.command()
@click.argument("side_a")
@click.argument("side_b")
@DB_OPTION
@click.option("--metric", "metrics", multiple=True, type=click.Choice(DEFAULT_METRICS))
def compare(side_a, side_b, db, metrics):
    """Compare two selections: medians, intervals, and whether each difference is significant."""
    commands.compare(db, side_a, side_b, metrics or DEFAULT_METRICS)


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
    for table, rows in commands.recover(db, recover_to).items():
        click.echo(f"{table}: {rows} rows kept")
    click.echo(f"recovered into {recover_to}; read it with --db {recover_to}")


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--ray", "ray_address", metavar="HOST:PORT|lab", help="load from a Ray cluster's generators"
)
@click.option("--generators", type=int, help="with --ray: how many generators (default: all)")
@click.option("--cluster-hosts", help="with --ray HOST:PORT: the hosts load may go to")
@click.argument("engine_args", nargs=-1, type=click.UNPROCESSED)
def load(ray_address, generators, cluster_hosts, engine_args):
    """Run the load engine directly (serverlab-load's own flags; --help for them), or with
    --ray from several machines at once, its results merged."""
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
        click.secho(f"invalid manifest: {entry.error}", fg="red", err=True)
    return [e for e in entries if isinstance(e, Manifest)], [e.name for e in broken]


def main() -> None:
    # Everything started from here, however, carries this process's mark (serverlab.base.owner).
    os.environ[owner.OWNER_ENV] = owner.token()
    interrupts.install()
    try:
        _main()
    finally:
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
