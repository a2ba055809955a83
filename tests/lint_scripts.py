"""Running one of scripts/ (the lint checks `make lint` runs) as a test would: its exit
status and output, on the tree or on a scratch copy with something planted."""

import shutil
import subprocess
import sys
from pathlib import Path

from serverlab.base.paths import REPO_ROOT


def run_script(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / name), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def package_copy(tmp_path: Path) -> Path:
    """A scratch copy of the serverlab package, under tmp_path/serverlab, with the engine's
    facts and output schema beside it where the package reads them (engine/schema/)."""
    package = tmp_path / "serverlab"
    shutil.copytree(REPO_ROOT / "serverlab", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO_ROOT / "engine" / "schema", tmp_path / "engine" / "schema")
    return package


def assert_tree_passes(name: str, verdict: str) -> None:
    """The script passes on the tree as committed, saying `verdict`."""
    done = run_script(name)
    assert done.returncode == 0, done.stdout
    assert verdict in done.stdout
