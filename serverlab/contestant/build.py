"""`serverlab build`: Debian packages with scripts/apt-ensure, then each manifest's build."""

import subprocess
import time
from dataclasses import dataclass

from serverlab.base.paths import apt_ensure_script
from serverlab.contestant.manifest import Manifest
from serverlab.contestant.placeholders import render_command
from serverlab.contestant.server import log_tail_text

BUILD_TIMEOUT_S = 30 * 60


@dataclass(frozen=True)
class BuildResult:
    name: str
    ok: bool
    seconds: float
    detail: str = ""  # what went wrong, with the end of the output


def build_contestant(manifest: Manifest) -> BuildResult:
    started = time.monotonic()
    steps = []
    if manifest.debian_packages:
        steps.append(("apt-ensure", [str(apt_ensure_script()), *manifest.debian_packages]))
    if manifest.build:
        steps.append(("build", ["/bin/sh", "-c", _command(manifest, manifest.build)]))
    for label, argv in steps:
        problem = _run(argv, manifest)
        if problem:
            return BuildResult(
                manifest.name, False, time.monotonic() - started, f"{label} failed: {problem}"
            )
    if not manifest.is_built():
        missing = [a for a in manifest.artifacts if not (manifest.folder / a).exists()]
        return BuildResult(
            manifest.name,
            False,
            time.monotonic() - started,
            f"the build left no {', '.join(missing)}",
        )
    return BuildResult(manifest.name, True, time.monotonic() - started)


def _run(argv: list[str], manifest: Manifest) -> str:
    """Runs one step in the contestant's folder; '' on success, else the reason."""
    try:
        done = subprocess.run(
            argv,
            cwd=manifest.folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"still running after {BUILD_TIMEOUT_S} s"
    except OSError as error:
        return str(error)
    if done.returncode == 0:
        return ""
    output = done.stdout.decode("utf-8", errors="replace")
    return f"exit code {done.returncode}; output ends:\n{log_tail_text(output)}"


def _command(manifest: Manifest, template: str) -> str:
    return render_command(template, {"name": manifest.name})


def run_contestant_tests(manifest: Manifest) -> BuildResult:
    """Runs the manifest's `test` command: the contestant's own formatter, linter and unit
    tests, in its folder. A contestant without one passes trivially (detail says so)."""
    started = time.monotonic()
    if not manifest.test:
        return BuildResult(manifest.name, True, 0.0, "no test command")
    problem = _run(["/bin/sh", "-c", _command(manifest, manifest.test)], manifest)
    return BuildResult(manifest.name, not problem, time.monotonic() - started, problem)
