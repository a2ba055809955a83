"""The seed studies' published figures as data (``published/seed-NNN.toml``): the tables as
the seeds printed them, and the comparisons that set our figures beside theirs.

A comparison is a ratio numerator / denominator between two sides (or one side's value when
it has no denominator). A side names a scenario, a contestant, a metric, and optionally
tunables and parameters that its tests must have; what a side leaves out it takes from the
comparison. ``expect`` makes the comparison part of the verdict on the seed's conclusion.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from serverlab.results.report.figures.seed_figures import SEED_METRICS

SEEDS = ("000", "001", "002", "003", "004")
EXPECTATIONS = ("above", "below", "between", "at_most")
# Matches every scenario of the seed's suite: figures pooled over all its tests.
EVERY_SCENARIO = "*"
# A parameter value meaning "the largest value the selected tests have".
LARGEST = "max"


class PublishedError(ValueError):
    """A published-figures file that does not say what the report needs."""


@dataclass(frozen=True)
class Side:
    scenario: str
    contestant: str
    metric: str
    tunables: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Expectation:
    kind: str
    bounds: tuple[float, ...]

    def met_by(self, value: float) -> bool:
        if self.kind == "above":
            return value > self.bounds[0]
        if self.kind == "below":
            return value < self.bounds[0]
        if self.kind == "at_most":
            return value <= self.bounds[0]
        low, high = self.bounds
        return low <= value <= high

    def text(self) -> str:
        if self.kind == "between":
            return f"between {self.bounds[0]:g} and {self.bounds[1]:g}"
        return f"{self.kind.replace('_', ' ')} {self.bounds[0]:g}"


@dataclass(frozen=True)
class Comparison:
    label: str
    numerator: Side
    denominator: Side | None
    params: tuple[tuple[str, Any], ...] = ()
    published: tuple[float, ...] = ()
    expect: Expectation | None = None
    beside: bool = False


@dataclass(frozen=True)
class PublishedTable:
    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Published:
    seed: str
    title: str
    source: str
    claim: str
    metric_note: str
    tables: tuple[PublishedTable, ...]
    comparisons: tuple[Comparison, ...]


def load_published(seed: str) -> Published:
    """The published figures of one seed, checked, from the package's data files."""
    if seed not in SEEDS:
        raise PublishedError(f"no seed {seed!r} (seeds: {', '.join(SEEDS)})")
    name = f"seed-{seed}.toml"
    text = (
        resources.files("serverlab.results.report").joinpath("published", name).read_text("utf-8")
    )
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise PublishedError(f"{name}: not valid TOML: {err}") from err
    try:
        return _published(doc)
    except (KeyError, TypeError, ValueError) as err:
        raise PublishedError(f"{name}: {err}") from err


def _published(doc: dict) -> Published:
    return Published(
        seed=str(doc["seed"]),
        title=doc["title"],
        source=doc["source"],
        claim=doc["claim"],
        metric_note=doc.get("metric_note", ""),
        tables=tuple(_table(t) for t in doc.get("published", [])),
        comparisons=tuple(_comparison(c) for c in doc["comparisons"]),
    )


def _table(raw: dict) -> PublishedTable:
    columns = tuple(raw["columns"])
    rows = tuple(tuple(str(cell) for cell in row) for row in raw["rows"])
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"table {raw['caption']!r}: row {row} has not {len(columns)} cells")
    return PublishedTable(raw["caption"], columns, rows)


def _comparison(raw: dict) -> Comparison:
    label = raw["label"]
    numerator = _side(raw, raw["numerator"], label)
    denominator = _side(raw, raw["denominator"], label) if "denominator" in raw else None
    published = tuple(float(v) for v in raw.get("published", []))
    wanted = 2 if denominator else 1
    if published and len(published) != wanted:
        raise ValueError(f"{label!r}: published needs {wanted} figure(s), has {len(published)}")
    return Comparison(
        label=label,
        numerator=numerator,
        denominator=denominator,
        params=tuple(sorted(raw.get("params", {}).items())),
        published=published,
        expect=_expectation(raw["expect"], label) if "expect" in raw else None,
        beside=bool(raw.get("beside", False)),
    )


def _side(comparison: dict, raw: dict, label: str) -> Side:
    merged = {k: comparison[k] for k in ("scenario", "metric") if k in comparison} | raw
    metric = merged["metric"]
    if metric not in SEED_METRICS:
        raise ValueError(f"{label!r}: unknown metric {metric!r} ({', '.join(SEED_METRICS)})")
    tunables = tuple(sorted((k, str(v)) for k, v in merged.get("tunables", {}).items()))
    return Side(merged["scenario"], merged["contestant"], metric, tunables)


def _expectation(raw: dict, label: str) -> Expectation:
    if len(raw) != 1 or next(iter(raw)) not in EXPECTATIONS:
        raise ValueError(f"{label!r}: expect needs one of {', '.join(EXPECTATIONS)}")
    kind, value = next(iter(raw.items()))
    bounds = tuple(float(v) for v in value) if isinstance(value, list) else (float(value),)
    if len(bounds) != (2 if kind == "between" else 1):
        raise ValueError(f"{label!r}: expect {kind} has {len(bounds)} bound(s)")
    return Expectation(kind, bounds)
