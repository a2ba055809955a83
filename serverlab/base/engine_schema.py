"""The load engine's output lines as its own JSON schema describes them, so that a record of a
line is made of the line's fields and types instead of a hand-written copy of them.

The engine prints the schema (`serverlab-load --print-schema`, generated from its Rust types);
it is read from the copy committed beside its facts (engine/schema/output.schema.json), which
the engine's tests keep equal to what it prints: serverlab then reads and stores engine output
with no engine built, at import, with no subprocess. tests/test_engine_schema.py checks the
records made of it against the built engine's own schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serverlab.base.paths import REPO_ROOT

OUTPUT_SCHEMA_FILE = REPO_ROOT / "engine" / "schema" / "output.schema.json"
# A JSON schema type of a plain value -> the Python type a record holds it as.
PLAIN_TYPES: dict[str, type] = {"integer": int, "number": float, "string": str, "boolean": bool}


def read_schema(path: Path = OUTPUT_SCHEMA_FILE) -> dict[str, Any]:
    return json.loads(path.read_text())


SCHEMA = read_schema()


@dataclass(frozen=True)
class LineField:
    """One field of an output line: its name, the Python type of its value, whether the
    engine may print null for it, and what the schema says it is."""

    name: str
    type: type
    nullable: bool
    description: str


def line_fields(
    definition: str, leave_out: frozenset[str] = frozenset(), schema: dict[str, Any] = SCHEMA
) -> list[LineField]:
    """The fields of one line type (a definition of the schema, e.g. "EmitLine"), in the
    schema's order, but those in `leave_out`; each must hold a plain value."""
    properties = schema["definitions"][definition]["properties"]
    return [
        _plain_field(definition, name, spec)
        for name, spec in properties.items()
        if name not in leave_out
    ]


def _plain_field(definition: str, name: str, spec: dict[str, Any]) -> LineField:
    kinds = spec.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    plain = [kind for kind in kinds if kind != "null"]
    if len(plain) != 1 or plain[0] not in PLAIN_TYPES:
        raise ValueError(
            f"{definition}.{name} is not a plain value ({spec.get('type') or 'a reference'}): "
            "a record of the line must leave it out or say how to hold it"
        )
    return LineField(name, PLAIN_TYPES[plain[0]], "null" in kinds, spec.get("description", ""))
