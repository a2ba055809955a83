"""The engine's output as serverlab reads it: throughput counts answers, a run with no answer
says so, a summary of another output version is not read as if it were this one, and a
cycle's emit lines, printed as it settles, add up to what the engine's own merge counts."""

import json
import subprocess
import sys
from pathlib import Path

from hdrh.histogram import HdrHistogram

from serverlab.base import httpclient
from serverlab.base.ports import free_port
from serverlab.contestant.manifest import find
from serverlab.contestant.server import ContestantServer
from serverlab.run.execution.engine import (
    OUTPUT_VERSION,
    EngineRun,
    checked_version,
    engine_binary,
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


def histogram_of(*delays_us: int) -> str:
    """Delays as the engine encodes them (bounds 1 us to 1 h, 3 digits)."""
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    for us in delays_us:
        histogram.record_value(us)
    return histogram.encode().decode()


def emit_line(seq: int, received: int, places: list, delays: list, drain) -> dict:
    return {
        "type": "emit", "event": "e1", "seq": seq, "total": 10 + seq, "received": received,
        "created_ms": 1_000 * seq + received, "duration_ms": {"min": received, "max": 3 * received},
        "places": places, "delay_histogram": histogram_of(*delays),
        "first_arrival_ms": 5_000.5 + received, "last_arrival_ms": 6_000.25 + received,
        "drain_us": drain, "drain_samples": received if drain is not None else 0,
    }  # fmt: skip


def engine_output(tmp_path, name: str, emits: list[dict]) -> Path:
    """A whole engine output: these emit lines, then a real summary (nothing listening)."""
    plan = tmp_path / "plan.json"
    plan.write_text(
        f'{{"target": "http://127.0.0.1:{free_port()}/", "requests": 2, "connections": 1}}'
    )
    done = subprocess.run(
        [*engine_command(plan, cpus=None)], capture_output=True, text=True, timeout=60
    )
    summary = done.stdout.splitlines()[-1]
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in emits) + summary + "\n")
    return path


def read_as_a_run(path: Path) -> EngineRun:
    run = EngineRun(["cat", str(path)])
    run.start()
    assert run.wait(30) == 0
    return run


def engine_merge(path: Path) -> list[dict]:
    done = subprocess.run(
        [str(engine_binary()), "--merge", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in map(json.loads, done.stdout.splitlines()) if line["type"] == "emit"]


def comparable(line: dict) -> dict:
    """A line with its histogram decoded: encodings of one histogram may differ."""
    histogram = HdrHistogram.decode(line["delay_histogram"])
    counts = [histogram.get_count_at_index(i) for i in range(histogram.counts_len)]
    return {**line, "delay_histogram": [(i, n) for i, n in enumerate(counts) if n]}


def test_a_cycles_further_lines_add_up_in_the_reader_as_the_engines_merge_adds_them(tmp_path):
    # Seq 4's later line (deliveries after its first was printed) comes after seq 5's.
    lines = [
        emit_line(4, 3, [[1, 0], [5, 2]], [900, 1_500, 2_000_000], 700),
        emit_line(5, 2, [[1, 1]], [3_000, 3_100], None),
        emit_line(4, 2, [[3, 1], [9, 4]], [1_400, 70_000], 9_100),
    ]
    path = engine_output(tmp_path, "out.jsonl", lines)
    read = read_as_a_run(path)
    merged = engine_merge(path)
    assert [(c["seq"], c["received"]) for c in read.emits] == [(4, 5), (5, 2)]
    assert [comparable(c) for c in read.emits] == [comparable(c) for c in merged]
    assert read.emits[0]["places"] == [[1, 0], [3, 1], [5, 2], [9, 4]]
    assert read.emits[0]["drain_us"] == 9_100 and read.emits[0]["drain_samples"] == 5
    # The reader's sum reads back in the engine (a generator's lines go to `--merge`).
    again = engine_output(tmp_path, "again.jsonl", read.emits)
    assert [comparable(c) for c in engine_merge(again)] == [comparable(c) for c in merged]


def test_a_push_run_prints_settled_cycles_during_it_and_loses_none(contestants_dir, tmp_path):
    """Comet against the reference server for 14 s, a cycle each 500 ms: the cycles of the
    first seconds settle (10 s without a delivery) and are printed among the interval lines;
    read back, each cycle is one record whose deliveries are those the engine's own merge of
    every line counts (the old path merged every worker's records at the end the same way),
    and every client received every cycle after its ramp."""
    clients = 40
    with ContestantServer(find("reference")) as server:
        answer = httpclient.post_json(server.port, "/event/set", {"name": "e1", "interval_ms": 500})
        assert answer.status == 200
        out = tmp_path / "run.jsonl"
        argv = [
            str(engine_binary()), f"http://127.0.0.1:{server.port}/push", "--comet", "e1",
            "--users", str(clients), "--ramp-up", "500ms", "--hold", "13500ms", "--json",
        ]  # fmt: skip
        # Exit code 3: a comet stream is never answered in full; its events are what counts.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        out.write_text(done.stdout)
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["type"] == "summary" and summary["events"]["lost"] == 0, done.stderr
    kinds = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    last_interval = max(i for i, kind in enumerate(kinds) if kind == "interval")
    assert "emit" in kinds[:last_interval], "settled cycles come during the run"
    read = read_as_a_run(out)
    merged = engine_merge(out)
    assert [(c["seq"], c["received"]) for c in read.emits] == [
        (c["seq"], c["received"]) for c in merged
    ]
    seqs = [c["seq"] for c in read.emits]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and len(seqs) >= 24
    joined = [c for c in read.emits if c["total"] == clients]
    # The newest cycle may be under way as the hold ends (the reference server emits every
    # 500 ms, on its own clock): its clients that had not yet received it are cut, not lost.
    *whole, newest = joined
    assert len(whole) >= 24 and all(c["received"] == clients for c in whole), [
        (c["seq"], c["received"]) for c in read.emits if c["received"] != clients
    ]
    assert newest["seq"] == seqs[-1] and newest["received"] <= clients
