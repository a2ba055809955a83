"""The records serverlab makes of the engine's output lines are made of the engine's own output
schema (`serverlab-load --print-schema`): an emit cycle holds each field of the built engine's
emit line with its type, the store keeps each in a column, and a line becomes a record as is."""

from __future__ import annotations

import json
import subprocess
from dataclasses import fields

import jsonschema
import pytest
from test_engine_output import emit_line

from serverlab.base import engine_schema
from serverlab.results.records import NOT_IN_A_CYCLE, EmitCycle, emit_cycle
from serverlab.results.store import Store
from serverlab.run.execution.engine import engine_binary


def printed_schema() -> dict:
    out = subprocess.run(
        [str(engine_binary()), "--print-schema"], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_an_emit_cycle_holds_each_field_of_the_built_engines_emit_line_with_its_type():
    printed = engine_schema.line_fields("EmitLine", NOT_IN_A_CYCLE, schema=printed_schema())
    held = {f.name: f.type for f in fields(EmitCycle)}
    assert held == {f.name: f.type | None if f.nullable else f.type for f in printed}
    assert {"drain_us", "delay_histogram", "received"} <= held.keys()
    assert "places" not in held, "a cycle's places are its EmitRecord rows"


def test_the_store_keeps_each_field_of_an_emit_cycle_in_a_column_of_its_own(tmp_path):
    with Store(tmp_path / "lab.db") as store:
        columns, _ = store.table_rows("emit_cycles")
    assert sorted(columns) == sorted(["test_id", *(f.name for f in fields(EmitCycle))])


def test_an_engine_emit_line_becomes_a_cycle_record_field_for_field():
    line = emit_line(4, 3, [[1, 0], [5, 2]], [900, 1_500], 700)
    jsonschema.validate(line, printed_schema())  # a line as the engine prints it
    cycle = emit_cycle(line)
    assert {f.name: getattr(cycle, f.name) for f in fields(cycle)} == {
        name: value for name, value in line.items() if name not in NOT_IN_A_CYCLE
    }
    unstamped = emit_cycle({k: v for k, v in line.items() if k != "drain_us"})
    assert unstamped.drain_us is None and unstamped.received == 3


def test_a_line_field_that_holds_no_plain_value_is_refused_by_name():
    with pytest.raises(ValueError, match=r"EmitLine\.duration_ms is not a plain value"):
        engine_schema.line_fields("EmitLine", frozenset({"type", "places"}))
