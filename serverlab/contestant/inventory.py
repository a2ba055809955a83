"""What `serverlab contestants` shows: each manifest with its version and build state."""

import subprocess
import tempfile
from dataclasses import dataclass

from serverlab.base import scratch
from serverlab.contestant.manifest import BrokenManifest, Manifest, discover
from serverlab.contestant.placeholders import render_command
from serverlab.contestant.server import placeholder_values

VERSION_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ContestantRow:
    name: str
    language: str = ""
    architecture: str = ""
    version: str = ""
    built: str = ""
    error: str = ""


def version_of(manifest: Manifest, timeout_s: float = VERSION_TIMEOUT_S) -> str:
    """The first line the version command prints, or a short reason why there is none."""
    with tempfile.TemporaryDirectory(prefix="version-", dir=scratch.own_folder()) as folder:
        defaults = {name: tunable.default for name, tunable in manifest.tunables.items()}
        values = placeholder_values(
            manifest,
            defaults,
            port=0,
            syslog_port=0,
            docroot=folder,
            workdir=folder,
            signals_file=f"{folder}/signals.jsonl",
        )
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", render_command(manifest.version, values)],
                cwd=manifest.folder,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return f"(no answer in {timeout_s:g} s)"
    lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
    if done.returncode != 0:
        return f"(failed: exit code {done.returncode})"
    return lines[0] if lines else "(printed nothing)"


def built_state(manifest: Manifest) -> str:
    if not manifest.artifacts:
        return "nothing to build" if not manifest.build else "yes (no artifacts listed)"
    return "yes" if manifest.is_built() else "no"


def contestant_rows(root=None) -> list[ContestantRow]:
    rows = []
    for entry in discover(root):
        if isinstance(entry, BrokenManifest):
            rows.append(ContestantRow(name=entry.name, error=entry.error))
            continue
        rows.append(
            ContestantRow(
                entry.name,
                entry.language,
                entry.architecture,
                version_of(entry),
                built_state(entry),
            )
        )
    return rows
