"""The gate speaks CI: `compare … --fail-on-regression PCT --format markdown|junit|json`
writes its verdict beside the exit code. Checked by parsing what it writes (JUnit with a
real XML parser against the elements the JUnit schema requires, Markdown by its table
rows), on the committed recording of real runs (see test_history) in a real SQLite file."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from history_fixture import load_compact

from serverlab.results import gate, gate_formats

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]
COMPACT = Path(__file__).parent / "data" / "history_runs.json"
MARKDOWN_HEAD = "| " + " | ".join(gate_formats.MARKDOWN_COLUMNS) + " |"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return load_compact(json.loads(COMPACT.read_text()), tmp_path_factory.mktemp("g") / "g.db")


def serverlab(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=120)


def gate_run(recorded, side_a, side_b, *options):
    return serverlab(
        "compare", side_a, side_b, "--db", str(recorded.db), "--fail-on-regression", "10", *options
    )


def runs(ids) -> str:
    return "run:" + ",".join(map(str, ids))


def before_after(recorded):
    """Three runs of the fast version against three of the planted slow one."""
    first = recorded.first_slow
    return runs(recorded.planted_runs[:3]), runs(recorded.planted_runs[first : first + 3])


def table_rows(markdown: str) -> list[dict[str, str]]:
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert lines[0] == MARKDOWN_HEAD
    assert set(lines[1].replace("|", "").split()) == {"---"}
    names = gate_formats.MARKDOWN_COLUMNS
    return [dict(zip(names, _cells(line), strict=True)) for line in lines[2:]]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip()[1:-1].split(" | ")]


def junit_cases(text: str) -> tuple[ET.Element, list[ET.Element]]:
    """The document's root, checked against what the JUnit schema requires: <testsuites>
    holding <testsuite name tests failures errors skipped>, each holding <testcase name
    classname>, whose counts agree with their cases."""
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    cases = []
    for suite in root.findall("testsuite"):
        assert suite.get("name")
        found = suite.findall("testcase")
        for case in found:
            assert case.get("name") and case.get("classname")
            assert len([c for c in case if c.tag in ("failure", "skipped", "error")]) <= 1
        assert int(suite.get("tests")) == len(found)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in found)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in found)
        assert suite.get("errors") == "0"
        cases += found
    assert int(root.get("tests")) == len(cases)
    return root, cases


def test_a_planted_regression_is_a_markdown_row_per_figure_with_its_interval_and_floor(recorded):
    a, b = before_after(recorded)
    done = gate_run(recorded, a, b, "--format", "markdown")
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("### serverlab gate: ❌ regression (exit 1)")
    rows = table_rows(done.stdout)
    assert [row["figure"] for row in rows] == ["throughput (req/s)", "latency p50 (ms)",
                                               "latency p99 (ms)"]  # fmt: skip
    for row in rows:
        assert row["series"].startswith("files-keepalive / rust-zhtta")
        assert row["n A/B"] == "6/6"
        assert row["B vs A [interval]"].count("[") == 1, row
        assert row["A/A floor"].startswith("±"), row
        assert row["verdict"].startswith("❌ regression: worse by at least")
        assert row["flags"] == "-"
    # stdout holds the document alone; the terminal tables went to stderr.
    assert "gate: regression (exit 1)" in done.stderr


def test_a_planted_regression_fails_every_gated_figure_as_a_junit_test_case(recorded, tmp_path):
    a, b = before_after(recorded)
    out = tmp_path / "gate.xml"
    done = gate_run(recorded, a, b, "--format", "junit", "--output", str(out))
    assert done.returncode == 1, done.stderr
    assert "gate: regression (exit 1)" in done.stdout, "with --output, stdout keeps the tables"
    root, cases = junit_cases(out.read_text())
    assert root.get("failures") == "3" and root.get("skipped") == "0"
    assert [c.get("name") for c in cases] == ["throughput", "latency p50", "latency p99"]
    for case in cases:
        assert case.find("failure").get("message").startswith("worse by at least")


def test_too_few_tests_make_skipped_junit_cases_with_their_reason(recorded):
    first = recorded.first_slow
    a, b = runs(recorded.planted_runs[:1]), runs(recorded.planted_runs[first : first + 1])
    done = gate_run(recorded, a, b, "--format", "junit")
    assert done.returncode == 3, done.stderr
    root, cases = junit_cases(done.stdout)
    assert root.get("failures") == "0" and root.get("skipped") == str(len(cases)) == "3"
    for case in cases:
        assert case.find("skipped").get("message").startswith("too few tests (A 2, B 2)")
    rows = table_rows(gate_run(recorded, a, b, "--format", "markdown").stdout)
    assert all(row["verdict"].startswith("⚠️ inconclusive: too few tests") for row in rows)


def test_runs_of_one_version_pass_and_the_json_says_so_figure_by_figure(recorded):
    a, b = runs(recorded.planted_runs[:3]), runs(recorded.planted_runs[3:5])
    done = gate_run(recorded, a, b, "--format", "json", "--metric", "rps")
    data = json.loads(done.stdout)
    assert (data["format"], data["version"]) == ("serverlab-gate", 1)
    assert data["exit_code"] == done.returncode
    assert data["outcome"] == gate_formats.GateReport("", 0, [], done.returncode).outcome.value
    [figure] = data["figures"]
    assert figure["figure"] == "rps" and (figure["n_a"], figure["n_b"]) == (6, 4)
    assert figure["delta"]["low"] <= figure["delta"]["percent"] <= figure["delta"]["high"]
    assert figure["outcome"] != "regression"
    junit = gate_run(recorded, a, b, "--format", "junit", "--metric", "rps").stdout
    root, [case] = junit_cases(junit)
    assert root.get("failures") == "0"


def test_a_paired_runs_gate_renders_its_arms_as_junit_and_markdown(recorded):
    rows = gate.paired_gate(recorded.db, recorded.paired_regression_run, threshold=10)
    report = gate_formats.GateReport("paired", 10, rows, gate.exit_code(rows))
    assert report.code == 1
    _, cases = junit_cases(gate_formats.junit(report))
    assert len(cases) == len(rows) == len(table_rows(gate_formats.markdown(report))) == 3
    assert any(case.find("failure") is not None for case in cases)


def test_format_without_a_gate_is_a_one_line_error(recorded):
    a, b = before_after(recorded)
    done = serverlab("compare", a, b, "--db", str(recorded.db), "--format", "junit")
    assert done.returncode == 2
    assert done.stderr == "serverlab: error: --format junit goes with --fail-on-regression PCT\n"


def test_two_formats_on_stdout_are_a_one_line_error_and_each_output_gets_its_format(
    recorded, tmp_path
):
    a, b = before_after(recorded)
    two = ("--format", "junit", "--format", "json")
    done = gate_run(recorded, a, b, *two)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("serverlab: error: several --format need an --output each")
    xml, data = tmp_path / "g.xml", tmp_path / "g.json"
    done = gate_run(recorded, a, b, *two, "--output", str(xml), "--output", str(data))
    assert done.returncode == 1, done.stderr
    assert junit_cases(xml.read_text())[0].get("failures") == "3"
    assert json.loads(data.read_text())["exit_code"] == 1


PAIRED_SUITE = """
name = "tiny"
repeats = 1
contestants = ["reference"]

[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 2
duration_s = 1
"""


def test_one_paired_sitting_writes_its_junit_and_markdown_and_the_exit_code_agrees(
    contestants_dir, tmp_path
):
    suite = tmp_path / "tiny.toml"
    suite.write_text(PAIRED_SUITE)
    out, comment = tmp_path / "gate.xml", tmp_path / "gate.md"
    arm = "clock_skew_ms=0"
    done = subprocess.run(
        [*SERVERLAB, "compare", "--paired", str(suite), arm, arm, "--rounds", "2"]
        + ["--db", str(tmp_path / "p.db"), "--fail-on-regression", "50"]
        + ["--format", "junit", "--output", str(out)]
        + ["--format", "markdown", "--output", str(comment)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1, 3), done.stderr
    root, cases = junit_cases(out.read_text())
    assert [c.get("name") for c in cases] == ["throughput", "latency p50", "latency p99"]
    assert all(c.get("classname") == "fast / reference" for c in cases)
    verdict = {0: "no regression", 1: "regression", 3: "inconclusive"}[done.returncode]
    assert f"gate: {verdict} (exit {done.returncode})" in done.stdout
    assert (root.get("failures") != "0") == (done.returncode == 1)
    assert (root.get("failures") == root.get("skipped") == "0") == (done.returncode == 0)
    rows = table_rows(comment.read_text())
    assert [row["series"] for row in rows] == ["fast / reference"] * 3
    assert comment.read_text().startswith("### serverlab gate: ")
    assert f"{verdict} (exit {done.returncode})" in comment.read_text().splitlines()[0]
