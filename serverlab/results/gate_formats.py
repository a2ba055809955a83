"""The gate's verdict for CI systems (``compare … --fail-on-regression PCT --format F``),
written beside its exit code: Markdown fit for a pull-request comment, JUnit XML in which
each gated figure is a test case, and JSON. All three are drawn from the same rows as the
terminal table (``serverlab.results.gate``) and say the same things: per figure the delta
with its interval, the A/A floor, the verdict with its reason, and the flags.

The JSON document is versioned (``GATE_FORMAT``, ``GATE_VERSION``); docs/gate-output.md
describes its fields and keeps its changelog.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from serverlab.results.gate import EXIT_CODES, GATE_NOTE, Delta, GateOutcome, GateRow

FORMATS = ("markdown", "junit", "json")
GATE_FORMAT = "serverlab-gate"
GATE_VERSION = 1


@dataclass(frozen=True)
class GateReport:
    """One gate's judgement: its title, threshold (percent), rows and exit code; ``note``
    says what qualifies the whole (machines mixed), or why nothing was judged."""

    title: str
    threshold: float
    rows: list[GateRow]
    code: int
    note: str = ""

    @property
    def outcome(self) -> GateOutcome:
        return next(o for o, c in EXIT_CODES.items() if c == self.code)


def render(report: GateReport, form: str) -> str:
    return {"markdown": markdown, "junit": junit, "json": as_json}[form](report)


# --- JSON -------------------------------------------------------------------------------


def _delta(delta: Delta | None) -> dict | None:
    if delta is None:
        return None
    return {
        "percent": delta.percent,
        "low": delta.low,
        "high": delta.high,
        "coverage": delta.coverage,
    }


def row_data(row: GateRow) -> dict:
    return {
        "series": row.series,
        "figure": row.metric.name,
        "label": row.metric.label,
        "unit": row.metric.unit,
        "higher_is_better": row.metric.higher_is_better,
        "n_a": row.n_a,
        "n_b": row.n_b,
        "delta": _delta(row.delta),
        "floor": _delta(row.floor),
        "floor_size": row.floor_size,
        "difference": row.difference,
        "outcome": row.outcome.value,
        "reason": row.reason,
        "flags": list(row.flags),
    }


def as_json(report: GateReport) -> str:
    data = {
        "format": GATE_FORMAT,
        "version": GATE_VERSION,
        "title": report.title,
        "threshold_percent": report.threshold,
        "outcome": report.outcome.value,
        "exit_code": report.code,
        "note": report.note,
        "figures": [row_data(row) for row in report.rows],
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


# --- Markdown ---------------------------------------------------------------------------

MARKDOWN_COLUMNS = (
    "series",
    "figure",
    "n A/B",
    "B vs A [interval]",
    "A/A floor",
    "difference",
    "verdict",
    "flags",
)
ICONS = {GateOutcome.REGRESSION: "❌", GateOutcome.NONE: "✅", GateOutcome.INCONCLUSIVE: "⚠️"}


def _cell(text: str) -> str:
    """A table cell: a pipe or a line break from a label would end the cell or the row."""
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown_row(row: GateRow) -> list[str]:
    floor = "-" if row.floor is None else f"±{row.floor_size:.1f} % ({row.floor.text()})"
    unit = f" ({row.metric.unit})" if row.metric.unit else ""
    return [
        row.series,
        row.metric.label + unit,
        f"{row.n_a}/{row.n_b}",
        "-" if row.delta is None else row.delta.text(),
        floor,
        row.difference,
        f"{ICONS[row.outcome]} {row.outcome.value}: {row.reason}",
        ", ".join(row.flags) or "-",
    ]


def markdown(report: GateReport) -> str:
    head = (
        f"### serverlab gate: {ICONS[report.outcome]} {report.outcome.value} (exit {report.code})"
    )
    lines = [head, "", _cell(report.title) + (f"; {_cell(report.note)}" if report.note else "")]
    if report.rows:
        lines += ["", _line(MARKDOWN_COLUMNS), _line(["---"] * len(MARKDOWN_COLUMNS))]
        lines += [_line(markdown_row(row)) for row in report.rows]
    lines += ["", f"<sub>{GATE_NOTE}</sub>", ""]
    return "\n".join(lines)


def _line(cells) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


# --- JUnit ------------------------------------------------------------------------------


def junit(report: GateReport) -> str:
    """A <testsuites> of one <testsuite>: a <testcase> per gated figure (classname the
    series, name the figure), failed for a regression, skipped with its reason when
    inconclusive. With nothing judged, one skipped case says why: an empty suite would
    read as a pass."""
    suite = ET.Element("testsuite", name=report.title)
    for row in report.rows:
        case = ET.SubElement(suite, "testcase", classname=row.series, name=row.metric.label)
        _judged(case, row.outcome, row.reason, _details(row))
    if not report.rows:
        case = ET.SubElement(suite, "testcase", classname="serverlab gate", name="gate")
        _judged(case, GateOutcome.INCONCLUSIVE, report.note or "nothing to judge", report.note)
    counts = _counts(suite)
    suite.attrib.update(counts)
    root = ET.Element("testsuites", name="serverlab gate", **counts)
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _judged(case: ET.Element, outcome: GateOutcome, reason: str, details: str) -> None:
    if outcome is GateOutcome.REGRESSION:
        ET.SubElement(case, "failure", message=reason, type="regression").text = details
    elif outcome is GateOutcome.INCONCLUSIVE:
        ET.SubElement(case, "skipped", message=reason).text = details


def _details(row: GateRow) -> str:
    cells = dict(zip(MARKDOWN_COLUMNS, markdown_row(row), strict=True))
    return "; ".join(f"{k}: {v}" for k, v in cells.items())


def _counts(suite: ET.Element) -> dict[str, str]:
    cases = suite.findall("testcase")
    return {
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c.find("failure") is not None)),
        "errors": "0",
        "skipped": str(sum(1 for c in cases if c.find("skipped") is not None)),
    }
