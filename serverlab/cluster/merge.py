"""Generators' outputs merged into one, by the engine itself (`serverlab-load --merge`):
interval lines interval by interval, emit records cycle by cycle, and the summaries by
adding their HdrHistograms, so that a merged percentile is the percentile of every sample
of every generator, never an average of percentiles."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from serverlab.run.execution.engine import EngineError, engine_binary

MERGE_TIMEOUT_S = 120


def merge(outputs: list[dict], folder: Path) -> dict:
    """{"intervals": [...], "emits": [...], "summary": {...}} of several engine outputs
    (each {"intervals", "emits", "summary"}); the outputs stay in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, output in enumerate(outputs):
        path = folder / f"generator-{index}.jsonl"
        lines = [*output["intervals"], *output["emits"]]
        if output["summary"] is not None:
            lines.append(output["summary"])
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    merged: dict = {"intervals": [], "emits": [], "summary": None}
    for line in merge_files(folder, json_lines=True).splitlines():
        record = json.loads(line)
        kind = record.get("type")
        if kind == "interval":
            merged["intervals"].append(record)
        elif kind == "emit":
            merged["emits"].append(record)
        elif kind == "summary":
            merged["summary"] = record
    return merged


def merge_files(folder: Path, json_lines: bool) -> str:
    """The engine's merge of the generator outputs in `folder`: JSON Lines, or its human
    summary."""
    files = sorted(str(p) for p in folder.glob("generator-*.jsonl"))
    done = subprocess.run(
        [str(engine_binary()), "--merge", *files, *(["--json"] if json_lines else [])],
        capture_output=True,
        text=True,
        timeout=MERGE_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise EngineError(f"serverlab-load --merge failed: {done.stderr.strip()[:500]}")
    return done.stdout
