"""Suite stage: a suite's own tables, each checked at its line: `[needs]` (what a run asks
of the machine), `[links.NAME]` (shaped links) and `[filesets.NAME]` (generated file sets).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from serverlab.run.plan.suite.file import Lines, SuiteError, number, unknown_keys

# [needs] key -> what it asks of the machine (serverlab/run/host/tune.py checks and sets them).
NEEDS_KEYS = ("nofile", "somaxconn", "local_ports", "max_map_count", "tcp_tw_reuse")
LINK_KEYS = {"rate_mbit": True, "delay_ms": False, "loss_pct": False}  # key -> required
# key -> (least, most): beyond 100 Gbit/s tbf shapes nothing, beyond 5 s of delay (the
# virtual lab's --delay-ms limit too) a test's connections spend it in their handshakes,
# past 100 % there is no packet.
LINK_RANGES = {"rate_mbit": (0.001, 100_000), "delay_ms": (0, 5_000), "loss_pct": (0, 100)}
FILESET_DEFAULTS: dict[str, Any] = {
    "seed": 1,
    "count": 100,
    "min_bytes": 1024,
    "max_bytes": 1_000_000,
    "size_distribution": "lognormal",
    "popularity": "zipf",
    "zipf_s": 1.0,
}
SIZE_DISTRIBUTIONS = ("lognormal", "uniform")
POPULARITIES = ("zipf", "uniform")


def needs_table(path: Path, lines: Lines, needs: Any, header: str) -> dict[str, int]:
    if not isinstance(needs, dict):
        raise SuiteError(path, lines.in_table(header), f"{header} must be a table")
    for key, value in needs.items():
        where = lines.in_table(header, key)
        if key not in NEEDS_KEYS:
            raise SuiteError(path, where, f"unknown needs key {key!r} ({', '.join(NEEDS_KEYS)})")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SuiteError(path, where, f"{header}.{key} must be a non-negative int")
    return dict(needs)


def named_tables(path: Path, lines: Lines, doc: dict, key: str, check) -> dict[str, dict]:
    tables = doc.get(key, {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise SuiteError(path, lines.of(key), f"{key} must be [{key}.NAME] tables")
    return {name: check(path, lines, f"{key}.{name}", table) for name, table in tables.items()}


def link_table(path: Path, lines: Lines, header: str, table: dict) -> dict[str, float]:
    unknown_keys(path, lines, header, table, LINK_KEYS)
    if "rate_mbit" not in table:
        raise SuiteError(path, lines.in_table(header), f"{header} needs rate_mbit")
    return {
        key: number(path, lines, header, table, key, least, maximum=most)
        for key, (least, most) in LINK_RANGES.items()
        if key in table
    }


def fileset_table(path: Path, lines: Lines, header: str, table: dict) -> dict[str, Any]:
    unknown_keys(path, lines, header, table, FILESET_DEFAULTS)
    spec = {**FILESET_DEFAULTS, **table}
    for key in ("seed", "count", "min_bytes", "max_bytes"):
        if key in table:
            number(path, lines, header, table, key, 0 if key == "seed" else 1, (int,))
    if "zipf_s" in table:
        number(path, lines, header, table, "zipf_s", 0)
    if spec["max_bytes"] < spec["min_bytes"]:
        raise SuiteError(path, lines.in_table(header, "max_bytes"), "max_bytes < min_bytes")
    for key, allowed in (("size_distribution", SIZE_DISTRIBUTIONS), ("popularity", POPULARITIES)):
        if spec[key] not in allowed:
            where = lines.in_table(header, key)
            raise SuiteError(path, where, f"{header}.{key} must be one of {', '.join(allowed)}")
    return spec
