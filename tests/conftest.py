"""Shared fixtures: a temporary contestants folder holding the reference server."""

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from reference_server import FAULTS

from serverlab.base import scratch
from serverlab.conformance.checks import CHECKS
from serverlab.conformance.context import VerifyContext, new_run_tag
from serverlab.conformance.fixtures import make_docroot
from serverlab.conformance.outcome import CaseAborted, Outcome

# Each pytest -n worker has a temporary folder of its own, so serverlab's scratch root
# ($TMPDIR/serverlab) is per worker: a command's reaping of dead owners' folders must not
# reach the folders a kill -9 test beside it leaves on purpose, and a test that checks for
# leftovers must not count those. Short, as Ray's socket paths under a lab's folder must
# stay within AF_UNIX's 107 bytes.
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    _own = Path(tempfile.gettempdir()) / f"t-{worker}"
    _own.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(_own)
    tempfile.tempdir = None

TESTS = Path(__file__).resolve().parent
REFERENCE_SERVER = TESTS / "reference_server.py"

REFERENCE_MANIFEST = f"""
name = "reference"
language = "python"
architecture = "asyncio event loop"
implements = ["perf", "files", "upload", "control", "push", "sse", "websocket", "syslog", \
"syslog-parse"]
version = "{sys.executable} --version"
start = "{sys.executable} {REFERENCE_SERVER} --port {{port}} --syslog-port {{syslog_port}} \
--docroot {{docroot}} --name {{name}} --fault {{fault}} --die-after {{die_after}} \
--host {{host}} --clock-skew-ms {{clock_skew_ms}} --syslog-mode {{syslog_mode}}"
ready = "/stats"
ready_timeout_s = 15

[tunables.fault]
default = "none"
type = "word"
words = {list(FAULTS)!r}
help = "which rule of the spec to break (see tests/reference_server.py)"

[tunables.syslog_mode]
default = "count"
type = "word"
words = ["count", "parse"]
help = "spec §7.1: count syslog messages, or parse each one too"

[tunables.clock_skew_ms]
default = "0"
type = "int"
help = "every time the server states (its /timestamp, its events' stamps) this far off, in ms"

[tunables.die_after]
default = "0"
type = "number"
min = 0
help = "seconds after which the server kills itself (0: never)"
"""


def live_suite(repeats: int, duration_s: float, push: bool = False, name: str = "t") -> str:
    """The short suite the live page's tests and bench/live-cost.py run against the reference
    server: one scenario, `fast`, of 4 keep-alive clients; or, `push`, 4 comet streams with
    an event every 500 ms (emit cycles to draw)."""
    behaviour = (
        'behaviour = "comet"\npacer = "users"\nemit_interval_ms = 500'
        if push
        else ('behaviour = "keepalive"')
    )
    return f"""name = "{name}"
repeats = {repeats}
contestants = ["reference"]

[[scenario]]
name = "fast"
{behaviour}
clients = 4
duration_s = {duration_s}
"""


def write_manifest(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "contestant.toml"
    path.write_text(text)
    return path


@pytest.fixture
def contestants_dir(tmp_path, monkeypatch) -> Path:
    """A contestants folder with the reference server, made the one serverlab uses."""
    root = tmp_path / "contestants"
    write_manifest(root, "reference", REFERENCE_MANIFEST)
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(root))
    return root


@pytest.fixture
def tmpfs(tmp_path) -> Path:
    """A small file system of our own (2 MiB), so that it can be filled or made read-only."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["chattr", "-R", "-i", str(mount)], capture_output=True)
    subprocess.run(["umount", "-l", str(mount)], check=True)


@contextlib.contextmanager
def faulty(mount: Path, fault: str) -> Iterator[Path]:
    """The tmpfs `mount` filled ("full disk") or seen through a read-only bind mount
    ("read-only mount") while the block runs; yields the folder to use."""
    if fault == "full disk":
        subprocess.run(["dd", "if=/dev/zero", f"of={mount}/filler", "bs=64k"], capture_output=True)
        try:
            yield mount
        finally:
            (mount / "filler").unlink(missing_ok=True)
        return
    view = mount.parent / "read-only"
    view.mkdir()
    subprocess.run(["mount", "--bind", "-o", "ro", str(mount), str(view)], check=True)
    try:
        yield view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=True)


def run_check(server, kind: str, params: dict) -> Outcome:
    """One check kind run against a started server, as verify runs a case of it (the case's
    id only names its events: "x"); an aborted case is a failure."""
    docroot = make_docroot(scratch.make("docroot-"))
    ctx = VerifyContext(server, docroot, new_run_tag(), "check.x", timeout_s=2.0, give_up_s=0.5)
    outcome = Outcome()
    try:
        CHECKS[kind](ctx, params, outcome)
    except CaseAborted as aborted:
        outcome.fail(str(aborted))
    return outcome
