"""Deterministic file sets for `/files` load (seed 001's skewed mix of sizes up to tens of MB).

The same parameters always give the same names, sizes, bytes and popularity, so a set is
generated once, cached under `results/filesets/<hash of the parameters>/`, and never
committed. Content is a pseudo-random 64 KiB block per file, repeated: incompressible
enough for a server, and written at disk speed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLOCK_BYTES = 65536
COMPLETE_MARKER = ".complete"
URL_PREFIX = "/files/"
# lognormal: min and max lie this many standard deviations either side of the median,
# so nearly every draw falls inside and the few outside are clamped.
SIGMAS_TO_BOUNDS = 3.0


@dataclass(frozen=True)
class FileEntry:
    name: str
    size: int
    weight: float  # share of the requests, all weights sum to 1

    @property
    def url_path(self) -> str:
        return URL_PREFIX + self.name


@dataclass(frozen=True)
class FileSet:
    root: Path
    entries: tuple[FileEntry, ...]

    def weighted_paths(self) -> list[dict[str, Any]]:
        """The engine plan's `paths`: where requests go and how often."""
        return [{"path": e.url_path, "weight": e.weight} for e in self.entries]


def digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def entries_for(spec: dict[str, Any]) -> tuple[FileEntry, ...]:
    """Names, sizes and popularity: a pure function of the spec."""
    # A suite's `[filesets.*] seed` is this RNG seed (not a seed study).
    rng = random.Random(f"fileset-{spec['seed']}")
    count = int(spec["count"])
    sizes = [_size(rng, spec) for _ in range(count)]
    weights = _popularity(count, spec)
    # Popularity is dealt out at random so that the most asked-for file is not always
    # the first or the largest.
    order = list(range(count))
    rng.shuffle(order)
    return tuple(
        FileEntry(name=f"f{i:04d}.bin", size=sizes[i], weight=weights[order[i]])
        for i in range(count)
    )


def _size(rng: random.Random, spec: dict[str, Any]) -> int:
    low, high = int(spec["min_bytes"]), int(spec["max_bytes"])
    if spec["size_distribution"] == "uniform" or low == high:
        return rng.randint(low, high)
    log_low, log_high = math.log(low), math.log(high)
    median = (log_low + log_high) / 2
    sigma = (log_high - log_low) / (2 * SIGMAS_TO_BOUNDS)
    return min(high, max(low, round(math.exp(rng.gauss(median, sigma)))))


def _popularity(count: int, spec: dict[str, Any]) -> list[float]:
    if spec["popularity"] == "uniform":
        raw = [1.0] * count
    else:
        raw = [1.0 / (rank ** spec["zipf_s"]) for rank in range(1, count + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def materialize(spec: dict[str, Any], cache_root: Path) -> FileSet:
    """The file set on disk under `cache_root/<digest>/`, generated only if missing."""
    entries = entries_for(spec)
    root = Path(cache_root) / digest(spec)
    if not (root / COMPLETE_MARKER).is_file():
        _generate(spec, entries, root)
    return FileSet(root=root, entries=entries)


def _generate(spec: dict[str, Any], entries: tuple[FileEntry, ...], root: Path) -> None:
    # Built aside and renamed into place, so that an interrupted generation is never used.
    staging = root.with_name(f"{root.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for index, entry in enumerate(entries):
        _write_file(staging / entry.name, entry.size, f"{spec['seed']}-{index}")
    (staging / COMPLETE_MARKER).write_text(json.dumps(spec, sort_keys=True))
    shutil.rmtree(root, ignore_errors=True)
    os.replace(staging, root)


def _write_file(path: Path, size: int, block_rng_seed: str) -> None:
    block = random.Random(block_rng_seed).randbytes(BLOCK_BYTES)
    with open(path, "wb") as out:
        whole, rest = divmod(size, BLOCK_BYTES)
        for _ in range(whole):
            out.write(block)
        out.write(block[:rest])
