"""The `serverlab` command: a thin click layer over the package's modules.

A user's mistake (unknown contestant, bad manifest, bad --set) is one line on stderr and
a non-zero exit code, never a traceback.
"""

import json
import os
import signal
import sys
import time

import click
from rich.console import Console
from rich.table import Table

from serverlab.build import build_contestant
from serverlab.cases import CaseFileError
from serverlab.inventory import contestant_rows
from serverlab.manifest import (
    BrokenManifest,
    Manifest,
    ManifestError,
    UnknownContestantError,
    discover,
    find,
)
from serverlab.outcome import FAIL, PASS, WARN
from serverlab.paths import CONTESTANTS_ENV
from serverlab.placeholders import PlaceholderError
from serverlab.server import ContestantServer, ServerError, log_tail, parse_assignments
from serverlab.verify import VerifyReport, verify_contestant

USER_ERRORS = (ManifestError, UnknownContestantError, ServerError, CaseFileError, PlaceholderError)
STATUS_STYLE = {PASS: "green", WARN: "yellow", FAIL: "red"}
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
    # Piped output (CI logs, grep) keeps one line per contestant instead of wrapping at 80.
    Console(width=None if sys.stdout.isatty() else 240).print(table)


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
    signal.signal(signal.SIGTERM, _interrupt)
    # A shell starts background jobs with SIGINT ignored; `kill -INT` must still stop us.
    signal.signal(signal.SIGINT, signal.default_int_handler)
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


def _interrupt(signum, frame):
    """SIGTERM stops `serve` the way Ctrl-C does: the server is stopped, not orphaned."""
    raise KeyboardInterrupt


def _split_broken(entries):
    """(valid manifests, names of broken ones), each broken one reported on stderr."""
    broken = [entry for entry in entries if isinstance(entry, BrokenManifest)]
    for entry in broken:
        click.secho(f"invalid manifest: {entry.error}", fg="red", err=True)
    return [e for e in entries if isinstance(e, Manifest)], [e.name for e in broken]


def main() -> None:
    try:
        cli(standalone_mode=True)
    except USER_ERRORS as error:
        UserError(str(error)).show()
        sys.exit(2)
    except KeyboardInterrupt:
        # Servers were stopped on the way out (context managers and finally blocks).
        click.echo("serverlab: interrupted", err=True)
        sys.exit(130)
