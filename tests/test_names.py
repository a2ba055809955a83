"""Names are data: whatever a suite, a manifest or a server names is printed as written,
never read as Rich markup or emoji codes, and never handed to the terminal as a control
character. Real runs of the reference server, through the `serverlab` command."""

import io
import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import REFERENCE_MANIFEST, write_manifest
from rich.console import Console

from serverlab.base.terminal import literal
from serverlab.contestant.manifest import find
from serverlab.results.store import Store
from serverlab.run.execution.executor import Environment
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.progress import Progress
from serverlab.run.plan.runner import Session, run_suite
from serverlab.run.plan.suite.load import load_suite

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]
ESC = "\x1b"
# As TOML writes them: a closing tag with nothing to close, markup, a screen-clearing escape,
# emoji codes.
NAMES = {
    "x[/]": "x[/]",
    "[red]x[/red]": "[red]x[/red]",
    "e\\u001b[2Jx": "e\x1b[2Jx",
    ":fire:a:b:": ":fire:a:b:",
}
SHOWN = {"e\x1b[2Jx": "e\\x1b[2Jx"}  # how a name with a control character is printed


def suite_text(names) -> str:
    scenarios = "".join(
        f'[[scenario]]\nname = "{name}"\nbehaviour = "keepalive"\nclients = 2\nduration_s = 1\n'
        for name in names
    )
    return f'name = "odd[/]"\ncontestants = ["reference"]\n{scenarios}'


def serverlab(*args, env=None):
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Two real runs of a suite whose scenario names are hostile, on one database."""
    root = tmp_path_factory.mktemp("names")
    write_manifest(root / "contestants", "reference", REFERENCE_MANIFEST)
    env = {**os.environ, "SERVERLAB_CONTESTANTS": str(root / "contestants")}
    suite = root / "suite.toml"
    suite.write_text(suite_text(NAMES))
    db = root / "lab.db"
    runs = [serverlab("run", str(suite), "--db", str(db), "--skip-verify", env=env)]
    runs.append(serverlab("run", str(suite), "--db", str(db), "--skip-verify", env=env))
    return {"env": env, "suite": suite, "db": db, "runs": runs}


def assert_written_as_is(output: str) -> None:
    assert ESC not in output, "a control character reached the terminal raw"
    assert "Traceback" not in output
    for name in NAMES.values():
        assert SHOWN.get(name, name) in output, f"{name!r} not printed as written"
    assert "🔥" not in output


def test_a_run_prints_every_scenario_name_as_written_and_finishes(lab):
    for done in lab["runs"]:
        assert done.returncode == 0, done.stderr
        assert "4 tests finished" in done.stdout + done.stderr
        assert_written_as_is(done.stdout + done.stderr)
    with sqlite3.connect(lab["db"]) as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM runs ORDER BY id")]
        scenarios = {row[0] for row in db.execute("SELECT DISTINCT scenario FROM tests")}
    assert statuses == ["finished", "finished"]
    assert scenarios == set(NAMES.values()), "the names are stored as written too"


def test_a_dry_run_prints_every_scenario_name_as_written(lab):
    done = serverlab("run", str(lab["suite"]), "--dry-run", env=lab["env"])
    assert done.returncode == 0, done.stderr
    assert_written_as_is(done.stdout)
    assert "odd[/]" in done.stdout


def test_the_summary_and_the_comparison_print_names_as_written(lab):
    summary = serverlab(
        "report", "all", "--db", str(lab["db"]), "-o", str(lab["db"].parent / "r.html"),
        "--summary", env=lab["env"],
    )  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    assert_written_as_is(summary.stdout)
    compared = serverlab("compare", "run:1", "run:2", "--db", str(lab["db"]), env=lab["env"])
    assert compared.returncode == 0, compared.stderr
    assert_written_as_is(compared.stdout)


def test_contestants_and_their_broken_manifests_are_listed_as_written(tmp_path, monkeypatch):
    odd = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "ref[i]"').replace(
        'architecture = "asyncio event loop"', 'architecture = "x[/]loop\\u001b[2J"'
    )
    write_manifest(tmp_path, "ref[i]", odd)
    mismatched = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "[red]b\\u001b[31m"')
    write_manifest(tmp_path, "broken", mismatched)
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path))
    done = serverlab("contestants")
    assert done.returncode == 0, done.stderr
    assert "ref[i]" in done.stdout and "x[/]loop\\x1b[2J" in done.stdout
    assert "invalid manifest" in done.stdout and "'[red]b\\x1b[31m' differs" in done.stdout
    assert ESC not in done.stdout
    build = serverlab("build", env={**os.environ, "NO_COLOR": "1"})
    assert "invalid manifest: " in build.stderr and "'[red]b\\x1b[31m' differs" in build.stderr
    assert "Traceback" not in build.stderr and ESC not in build.stdout + build.stderr


NOISY = """
name = "noisy"
language = "sh"
architecture = "none"
implements = ["perf"]
version = "echo 1"
start = "sh -c 'printf \\"\\\\033[2J[/]boom [red]x[/red]\\\\n\\"; exit 3' {port} {host}"
"""


def test_what_a_server_says_is_shown_not_obeyed(tmp_path, monkeypatch):
    """A server that dies at start with a screen-clearing escape and markup in its log."""
    write_manifest(tmp_path / "contestants", "noisy", NOISY)
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path / "contestants"))
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_text(["a"]).replace('"reference"', '"noisy"'))
    said = "\\x1b[2J[/]boom [red]x[/red]"
    verified = serverlab("verify", "noisy")
    assert verified.returncode == 1 and said in verified.stdout
    run = serverlab("run", str(suite), "--db", str(tmp_path / "lab.db"))
    assert run.returncode == 2, run.stderr
    assert said in run.stderr and "not run (failed verify): noisy" in run.stderr
    assert ESC not in run.stdout + run.stderr and "Traceback" not in run.stderr


class _Broken(Progress):
    """A progress display that fails on the first finished test: the fault a name could
    cause before names were printed as data, which a real printer no longer produces."""

    def test_finished(self, test) -> None:
        raise RuntimeError("the printer broke")


def test_a_crash_while_printing_progress_ends_the_run_as_failed_not_running(
    contestants_dir, tmp_path
):
    suite = tmp_path / "suite.toml"
    suite.write_text(suite_text(["one"]))
    loaded = load_suite(suite)
    progress = _Broken(Console(file=io.StringIO()))
    with Store(tmp_path / "lab.db") as store:
        env = Environment(
            manifest_of=find, pinning=Pinning.default(), workdir=tmp_path / "work",
            progress=progress,
        )  # fmt: skip
        session = Session(loaded, plan_tests(loaded, find), store, env)
        with pytest.raises(RuntimeError, match="the printer broke"):
            run_suite(session)
        assert [run.status for run in store.runs()] == ["failed"]


@pytest.mark.parametrize(
    ("name", "markup", "shown"),
    [
        ("x[/]", False, "x[/]"),
        ("e\x1b[2Jx", False, "e\\x1b[2Jx"),
        ("a\u202eb\tc\nd", False, "a\\u202eb\\tc\\nd"),
        ("[red]x[/red]", True, "\\[red]x\\[/red]"),
    ],
)
def test_a_name_is_made_literal_for_the_terminal(name, markup, shown):
    assert literal(name, markup=markup) == shown
    out = Console(file=io.StringIO(), width=100, emoji=False)
    out.print(literal(name))
    assert out.file.getvalue().rstrip("\n") == literal(name, markup=False)
