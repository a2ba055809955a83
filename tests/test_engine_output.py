"""The engine's output as serverlab reads it: throughput counts answers, a run with no answer
says so, and a summary of another output version is not read as if it were this one."""

import subprocess
import sys

from serverlab.base.ports import free_port
from serverlab.run.execution.engine import (
    OUTPUT_VERSION,
    EngineRun,
    checked_version,
    engine_command,
)

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]


def test_a_load_by_hand_with_nothing_listening_says_no_answer_first_and_exits_non_zero():
    url = f"http://127.0.0.1:{free_port()}/perf"
    done = subprocess.run(
        [*SERVERLAB, "load", url, "-c", "2", "-d", "300ms"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("NO ANSWER: none of "), done.stdout
    assert "Requests/sec: 0.00" in done.stdout


def test_a_plan_with_nothing_listening_still_gives_a_summary_whose_rate_is_zero(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/perf"
    plan = tmp_path / "plan.json"
    plan.write_text(f'{{"target": "{url}", "requests": 40, "connections": 2}}')
    engine = EngineRun(engine_command(plan, cpus=None))
    engine.start()
    assert engine.wait(60) == 0, engine.stderr_tail
    summary = engine.summary
    assert summary is not None and summary["version"] == OUTPUT_VERSION
    assert summary["valid"] is True
    assert (summary["requests"], summary["answered"]) == (40, 0)
    assert summary["errors"]["connect"] == 40
    assert summary["rps"] == 0


def test_a_summary_of_another_output_version_is_marked_invalid_with_the_reason():
    stale = {"type": "summary", "version": 1, "valid": True, "invalid_reasons": [], "rps": 9.0}
    checked = checked_version(stale)
    assert checked["valid"] is False
    assert "engine output version 1" in checked["invalid_reasons"][0]
    assert stale["valid"] is True, "the record as read stays as it was"
    current = {**stale, "version": OUTPUT_VERSION}
    assert checked_version(current) == current
