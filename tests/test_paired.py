"""`serverlab compare --paired` as a CI job meets it when things go wrong: a signal mid-sitting,
arms that cannot run. Real servers (the reference server, serving TLS so that each test has
a key), real engines, real signals, real SQLite files."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_manifest
from test_tls import TLS_MANIFEST

SERVERLAB = [str(Path(sys.executable).parent / "serverlab")]
TINY = """
name = "tiny"
repeats = 1
contestants = ["reference-tls"]

[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 2
duration_s = 1
"""


@pytest.fixture
def tiny(contestants_dir, tmp_path) -> Path:
    """A one-test suite of the reference server that serves TLS: each test has a key."""
    write_manifest(contestants_dir, "reference-tls", TLS_MANIFEST)
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    return suite


def paired(suite: Path, db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*SERVERLAB, "compare", "--paired", str(suite), *args, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stored(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # the schema is not written yet


def keys_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("server.key"))


def wait_until(predicate, process: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("signum", "code", "gate"),
    [(signal.SIGTERM, 143, ()), (signal.SIGINT, 130, ("--fail-on-regression", "5"))],
)
def test_a_signal_mid_sitting_exits_128_plus_it_with_no_gate_table_and_no_key_left(
    tiny, tmp_path, signum, code, gate
):
    db = tmp_path / "results" / "lab.db"
    sitting = paired(tiny, db, "--rounds", "2", "-", "fault=none", *gate)
    # The second test (B) holds its key: its server is starting or under load.
    wait_until(lambda: stored(db) >= 1 and keys_under(db.parent / "work"), sitting)
    sitting.send_signal(signum)
    out, err = sitting.communicate(timeout=60)
    assert sitting.returncode == code, out + err
    assert "B vs A" not in out and "gate" not in out, "a table judged on part of a sitting"
    assert "paired run 1 is kept, marked interrupted, and not judged" in err
    assert "Traceback" not in err
    assert keys_under(db.parent) == [], "the dropped test's folder kept its server key"
    assert not any((db.parent / "work").iterdir())
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]


@pytest.mark.parametrize(
    ("arm", "said"),
    [
        (
            "engine=/etc/passwd",
            "engine=/etc/passwd: not a serverlab-load of this version: it cannot be run",
        ),
        ("engine=/bin/true", "not a serverlab-load of this version: its --version says"),
        ("contestants={empty}", "contestants={empty}: unknown contestant 'reference-tls'"),
        ("workers=1 workers=2", "workers=1 and workers=2: workers given twice"),
        ("engine={engine} engine={engine}", "engine given twice"),
    ],
)
def test_a_bad_arm_is_refused_in_one_line_before_any_test_runs(tiny, tmp_path, arm, said):
    from serverlab.run.execution.engine import engine_binary

    empty = tmp_path / "empty"
    empty.mkdir()
    words = {"empty": empty, "engine": engine_binary()}
    db = tmp_path / "results" / "lab.db"
    done = paired(tiny, db, "-", arm.format(**words))
    out, err = done.communicate(timeout=60)
    assert done.returncode == 2, out + err
    assert err.count("\n") == 1 and err.startswith("serverlab: error: ")
    assert said.format(**words) in err
    assert out == "" and not db.parent.exists(), "something ran before the arm was refused"


def test_another_build_of_this_engine_is_an_arm_and_another_program_is_not(tmp_path):
    from serverlab.run.execution.engine import engine_binary
    from serverlab.run.plan import paired

    other_build = tmp_path / "serverlab-load-branch"
    other_build.write_bytes(engine_binary().read_bytes())
    other_build.chmod(0o755)
    paired.check_arm(paired.parse_config(f"engine={other_build}"), [])
    impostor = tmp_path / "serverlab-load"
    impostor.write_text("#!/bin/sh\necho serverlab-load 0.0.9\n")
    impostor.chmod(0o755)
    with pytest.raises(paired.PairedError, match="says 'serverlab-load 0.0.9'"):
        paired.check_arm(paired.parse_config(f"engine={impostor}"), [])


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_stored_compare_exits_128_plus_it_with_no_table(tmp_path, signum, code):
    from history_fixture import load_compact
    from test_cli import stopped_at

    from serverlab.results.store import Store

    data = json.loads((Path(__file__).parent / "data" / "history_runs.json").read_text())
    recorded = load_compact(data, tmp_path / "lab.db")
    runs = recorded.planted_runs
    a, b = f"run:{runs[0]},{runs[1]},{runs[2]}", f"run:{runs[3]},{runs[4]}"
    gate = ("--fail-on-regression", "25")
    with stopped_at("compare", "compare", a, b, "--db", str(recorded.db), *gate) as command:
        command.send_signal(signum)
        command.send_signal(signal.SIGCONT)
        out, err = command.communicate(timeout=60)
    assert command.returncode == code, out + err
    assert out == "" and err.strip() == "serverlab: interrupted"
    with Store(recorded.db, create=False) as store:
        assert len(store.runs()) == len(data["runs"])


def test_an_arms_engine_that_refuses_the_suites_plans_is_refused_before_any_test(tiny, tmp_path):
    from serverlab.run.execution.engine import engine_version

    # This version's name, but a judge of plans that refuses every one (an older build, say).
    engine = tmp_path / "serverlab-load"
    engine.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && {{ echo "{engine_version()}"; exit 0; }}\n'
        'while read -r line; do echo \'{"ok": false, "error": "not this build", '
        '"field": "clients"}\'; done\nexit 2\n'
    )
    engine.chmod(0o755)
    db = tmp_path / "results" / "lab.db"
    done = paired(tiny, db, "-", f"engine={engine}")
    out, err = done.communicate(timeout=60)
    assert done.returncode == 2, out + err
    assert err.count("\n") == 1 and "the engine refuses it: not this build" in err
    assert not db.parent.exists()
