"""Client groups in one engine run (issue 35): each group's figures kept apart, and merged
exactly, group by group, by `--merge`.

The real engine binary runs two groups against the reference server through a relay
(tests/test_engine_abuse.py) that records each connection's bytes: the groups go to two
paths, so that the wire says which group each connection, request and answer belongs to."""

import json
import subprocess
from pathlib import Path

from test_engine_abuse import Capture, relay, relayed, server

from serverlab.results.report.figures.hdr import added, values_at_quantiles
from serverlab.run.execution.engine import engine_binary

INTERVAL_S = 0.5
# A keep-alive closed loop on /perf for the first 2 s; an open loop on /timestamp from 1.5 s.
GROUPS = [
    {"name": "perf", "connections": 2, "stop_s": 2.0, "paths": [{"path": "/perf", "weight": 1}]},
    {
        "name": "stamp",
        "connections": 3,
        "start_s": 1.5,
        "stop_s": 3.0,
        "pacer": {"kind": "open", "rate": 100.0},
        "paths": [{"path": "/timestamp", "weight": 1}],
    },
]
PATHS = {"perf": b"/perf", "stamp": b"/timestamp"}


def run_groups(port: int, tmp_path: Path, name: str) -> tuple[list[dict], Path]:
    """The grouped plan run by the engine against `port`: its output lines, and its file."""
    plan = {
        "target": f"http://127.0.0.1:{port}/perf",
        "duration_s": 3.0,
        "interval_ms": int(INTERVAL_S * 1000),
        "threads": 1,
        "groups": GROUPS,
    }
    (plan_file := tmp_path / f"{name}.plan.json").write_text(json.dumps(plan))
    done = subprocess.run(
        [str(engine_binary()), "--plan", str(plan_file), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (output := tmp_path / f"{name}.jsonl").write_text(done.stdout)
    return [json.loads(line) for line in done.stdout.splitlines()], output


def on_the_wire(captures: list[Capture], path: bytes) -> dict:
    """What the relay saw of one path's connections: connections, requests, answers."""
    mine = [c for c in captures if f"GET {path.decode()} ".encode() in c.sent]
    return {
        "connections_opened": len(mine),
        "requests": sum(c.sent.count(b"GET " + path + b" HTTP/1.1") for c in mine),
        "answers": sum(c.received.count(b"HTTP/1.1 200 ") for c in mine),
    }


def test_two_groups_figures_are_kept_apart_as_the_wire_shows_them(tmp_path):
    with server("--docroot", str(tmp_path)) as port, relay(port) as (via, captures):
        lines, _ = run_groups(via, tmp_path, "run")
        relayed(captures)
    summary = lines[-1]
    assert summary["type"] == "summary" and set(summary["groups"]) == {"perf", "stamp"}
    for name, group in summary["groups"].items():
        wire = on_the_wire(captures, PATHS[name])
        assert group["connections_opened"] == wire["connections_opened"], name
        # Every request started reached the wire; an answer may be cut by the group's end.
        assert group["started"] == wire["requests"], name
        assert wire["answers"] - group["connections_opened"] <= group["answered"], name
        assert group["answered"] <= wire["answers"], name
        assert group["errors"]["connect"] == 0 and group["status"]["2xx"] == group["ok"], name
    # No connection carried both groups' requests.
    assert sum(on_the_wire(captures, p)["connections_opened"] for p in PATHS.values()) == len(
        captures
    )
    perf, stamp = summary["groups"]["perf"], summary["groups"]["stamp"]
    assert perf["window"] == {"start_s": 0.0, "stop_s": 2.0}
    assert stamp["window"] == {"start_s": 1.5, "stop_s": 3.0}
    assert perf["plan"]["connections"] == 2 and stamp["plan"]["pacer"]["kind"] == "open"
    assert summary["requests"] == perf["requests"] + stamp["requests"]
    assert summary["connections_opened"] == len(captures)


def test_a_group_that_starts_later_has_no_attempts_in_the_intervals_before_its_start(
    tmp_path,
):
    with server("--docroot", str(tmp_path)) as port:
        lines, _ = run_groups(port, tmp_path, "run")
    intervals = [line for line in lines if line["type"] == "interval"]
    before = [line for line in intervals if line["elapsed_s"] < GROUPS[1]["start_s"]]
    assert len(before) == 2, [line["elapsed_s"] for line in intervals]
    for line in before:
        stamp = line["groups"]["stamp"]
        assert (stamp["completed"], stamp["connections_opened"]) == (0, 0), line["elapsed_s"]
        assert stamp["latency_p50_us"] is None
        assert line["groups"]["perf"]["completed"] == line["completed"] > 0
    during = [line["groups"]["stamp"]["completed"] for line in intervals if line not in before]
    assert sum(during) == lines[-1]["groups"]["stamp"]["requests"] > 0
    for line in intervals:
        parts = line["groups"].values()
        assert line["completed"] == sum(part["completed"] for part in parts)
        assert line["elapsed_s"] == max(part["elapsed_s"] for part in parts)


def test_merged_groups_add_their_counts_and_their_histograms_group_by_group(tmp_path):
    with server("--docroot", str(tmp_path)) as port:
        runs = [run_groups(port, tmp_path, name) for name in ("one", "two")]
    done = subprocess.run(
        [str(engine_binary()), "--merge", *(str(output) for _, output in runs), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    merged_lines = [json.loads(line) for line in done.stdout.splitlines()]
    merged = merged_lines[-1]
    inputs = [lines[-1] for lines, _ in runs]
    for name in PATHS:
        group = merged["groups"][name]
        parts = [summary["groups"][name] for summary in inputs]
        for count in ("requests", "answered", "started", "connections_opened"):
            assert group[count] == sum(part[count] for part in parts), (name, count)
        assert group["generators"] == 2 and group["window"] == parts[0]["window"]
        whole = added(part["histogram"] for part in parts)
        p50, p99 = values_at_quantiles(whole, [0.5, 0.99])
        assert (group["latency_us"]["p50"], group["latency_us"]["p99"]) == (p50, p99), name
        assert group["latency_us"]["count"] == whole.get_total_count()
    first_intervals = [line for line in merged_lines if line["type"] == "interval"]
    for k, line in enumerate(first_intervals):
        for name in PATHS:
            own = [
                lines[k]["groups"][name]["completed"]
                for lines, _ in runs
                if k < len(lines) and lines[k]["type"] == "interval"
            ]
            assert line["groups"][name]["completed"] == sum(own), (k, name)


def test_outputs_whose_groups_differ_are_not_merged(tmp_path):
    with server("--docroot", str(tmp_path)) as port:
        lines, output = run_groups(port, tmp_path, "run")
    renamed = output.read_text().replace('"stamp"', '"other"')
    (other := tmp_path / "other.jsonl").write_text(renamed)
    done = subprocess.run(
        [str(engine_binary()), "--merge", str(output), str(other), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f'serverlab-load: --merge: {other}: client groups ["other", "perf"] differ from '
        'the first input\'s ["perf", "stamp"]: groups are merged by name'
    )
