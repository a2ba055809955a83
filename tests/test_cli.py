"""The `serverlab` command as a user runs it: exit codes, one-line errors, serve and Ctrl-C."""

import contextlib
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time

import click
import psutil
import pytest
from conftest import REFERENCE_MANIFEST, write_manifest

from serverlab import cli
from serverlab.base import httpclient, interrupts
from serverlab.base.netns import existing
from serverlab.base.ports import free_port
from serverlab.lab import manage
from serverlab.lab.topology import is_lab_namespace

SERVERLAB = [sys.executable, "-c", "from serverlab.cli import main; main()"]


def serverlab(*args, timeout=120):
    return subprocess.run([*SERVERLAB, *args], capture_output=True, text=True, timeout=timeout)


def test_contestants_lists_good_and_broken_manifests(contestants_dir):
    write_manifest(contestants_dir, "broken", 'name = "broken"\nlanguage = 3\n')
    done = serverlab("contestants")
    assert done.returncode == 0
    assert "reference" in done.stdout and "Python 3" in done.stdout
    assert "nothing to build" in done.stdout
    assert "broken" in done.stdout and "invalid manifest" in done.stdout


def test_unknown_contestant_is_one_line_and_exit_2(contestants_dir):
    done = serverlab("verify", "nope")
    assert done.returncode == 2
    assert done.stderr.strip() == ("serverlab: error: unknown contestant 'nope' (known: reference)")
    assert "Traceback" not in done.stderr


def test_verify_of_a_broken_manifest_fails_clearly(contestants_dir):
    write_manifest(contestants_dir, "broken", 'name = "broken"\nlanguage = 3\n')
    done = serverlab("verify", "broken")
    assert done.returncode == 1
    assert "broken/contestant.toml: key 'architecture': missing required key" in done.stdout


def test_verify_json_and_exit_codes(contestants_dir):
    good = serverlab("verify", "reference", "--case", "perf.*", "--json")
    assert good.returncode == 0, good.stderr
    [report] = json.loads(good.stdout)
    assert report["ok"] and {c["status"] for c in report["cases"]} == {"PASS"}
    assert "PASS  perf.get" in good.stderr
    bad = serverlab("verify", "reference", "--case", "perf.get", "--set", "fault=no_date_perf")
    assert bad.returncode == 1
    assert "FAIL  perf.get  200 response without a Date header" in bad.stdout
    assert "0 passed, 0 warned, 1 failed" in bad.stdout


def test_verify_side_by_side_prints_each_contestant_whole_and_fails_when_one_does(
    contestants_dir,
):
    broken = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "undated"')
    write_manifest(contestants_dir, "undated", broken.replace('"none"', '"no_date_perf"', 1))
    done = serverlab("verify", "--all", "--case", "perf.get", "--jobs", "2")
    assert done.returncode == 1, done.stdout
    blocks = {b.split("\n", 1)[0]: b for b in done.stdout.split("== ")[1:]}
    assert set(blocks) == {"reference", "undated"}
    assert "PASS  perf.get" in blocks["reference"] and "FAIL" not in blocks["reference"]
    assert "FAIL  perf.get  200 response without a Date header" in blocks["undated"]
    assert done.stdout.rstrip().endswith("verify: 2 contestants, failed: undated")
    as_json = serverlab("verify", "undated", "reference", "--case", "perf.get", "-j", "2", "--json")
    reports = [(r["contestant"], r["ok"]) for r in json.loads(as_json.stdout)]
    assert reports == [("undated", False), ("reference", True)]


def test_verify_all_piped_says_its_progress_in_plain_lines_on_stderr(contestants_dir):
    broken = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "undated"')
    write_manifest(contestants_dir, "undated", broken.replace('"none"', '"no_date_perf"', 1))
    done = serverlab("verify", "--all", "--case", "perf.get")
    assert done.returncode == 1, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    pattern = r"\[(\d)/2\] verify: (\S+) (passed|FAILED) \(\d+:\d\d elapsed, ~\d+:\d\d left\)"
    steps = [re.fullmatch(pattern, line) for line in lines]
    assert all(steps), lines
    assert [s.groups() for s in steps] == [("1", "reference", "passed"), ("2", "undated", "FAILED")]
    assert "\x1b" not in done.stderr, "no bar, no cursor movement when piped"
    side_by_side = serverlab("verify", "--all", "--case", "perf.get", "-j", "2")
    finished = sorted(re.findall(r"\[\d/2\] verify: (\S+) (\S+)", side_by_side.stderr))
    assert finished == [("reference", "passed"), ("undated", "FAILED")]


def test_verify_unknown_tunable_is_a_user_error(contestants_dir):
    done = serverlab("verify", "reference", "--set", "threads=4")
    assert done.returncode == 1
    known = "(known: clock_skew_ms, die_after, fault, syslog_mode)"
    assert f"has no tunable 'threads' {known}" in done.stdout


def test_verify_needs_names_or_all(contestants_dir):
    done = serverlab("verify")
    assert done.returncode == 2 and "name contestants or give --all" in done.stderr


def test_serve_runs_until_ctrl_c_and_stops_cleanly(contestants_dir, tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [*SERVERLAB, "serve", "reference", "--port", str(port), "--docroot", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = process.stdout.readline()
        assert f"listening on http://127.0.0.1:{port}" in first_line
        assert "log:" in process.stdout.readline()
        (tmp_path / "f.txt").write_text("served")
        assert httpclient.get(port, "/files/f.txt").body == b"served"
        children = psutil.Process(process.pid).children(recursive=True)
        assert children, "the contestant runs under serverlab"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
        assert "stopped" in process.stdout.read()
        time.sleep(0.1)
        assert not any(child.is_running() for child in children)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


# Named points of a command's start, in order (serverlab.base.interrupts.checkpoint): in the
# entry module's imports, at main, as the command begins, on the way out.
STARTING_POINTS = ["import", "imports", "main", "command", "exit"]


@contextlib.contextmanager
def stopped(argv: list[str], env: dict | None = None):
    """A process that stops itself (SIGSTOP) at a chosen point; killed if the test leaves
    it running."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _, status = os.waitpid(process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), "ended before the point"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def stopped_at(point: str, *args: str):
    """`serverlab ARGS`, stopped at the named point of its start."""
    return stopped([*SERVERLAB, *args], env={**os.environ, interrupts.STOP_ENV: point})


def interrupted_now(command: subprocess.Popen) -> str:
    """Ctrl-C to a stopped command, then on with it; its stderr once it has ended. Pending
    while the process is stopped, the real SIGINT is handled right where it stopped."""
    command.send_signal(signal.SIGINT)
    command.send_signal(signal.SIGCONT)
    _, err = command.communicate(timeout=60)
    return err


# `serverlab contestants`, stopped as its entry module starts to import a module: no hook of
# serverlab's own, so the same program shows what any version of serverlab does there.
STOP_ON_IMPORT = """
import os, signal, sys
def stop(event, args):
    if event == "import" and args[0] == {module!r} and not stop.done:
        stop.done = True
        os.kill(os.getpid(), signal.SIGSTOP)
stop.done = False
sys.addaudithook(stop)
from serverlab.cli import main
main()
"""


@pytest.mark.parametrize("module", ["click", "rich.table", "serverlab.commands"])
def test_ctrl_c_while_the_command_imports_exits_130_quietly(contestants_dir, module):
    program = STOP_ON_IMPORT.format(module=module)
    with stopped([sys.executable, "-c", program, "contestants"]) as command:
        err = interrupted_now(command)
    assert command.returncode == 130
    assert err == "serverlab: interrupted\n"


@pytest.mark.parametrize("point", STARTING_POINTS)
def test_ctrl_c_at_each_point_of_a_commands_start_exits_130_quietly(contestants_dir, point):
    with stopped_at(point, "contestants") as command:
        err = interrupted_now(command)
    assert command.returncode == 130
    assert err == "serverlab: interrupted\n"


@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.1, 0.2, 0.3])
def test_ctrl_c_in_a_commands_first_moments_exits_130_quietly(contestants_dir, tmp_path, delay_s):
    suite = tmp_path / "suite.toml"
    suite.write_text(
        'contestants = ["reference"]\n[[scenario]]\nname = "long"\nbehaviour = "keepalive"\n'
        "clients = 2\nduration_s = 60\n"
    )
    # From the first line of serverlab's own code: Python's start-up before it is not ours.
    with stopped_at("import", "run", str(suite), "--db", str(tmp_path / "lab.db")) as command:
        command.send_signal(signal.SIGCONT)
        time.sleep(delay_s)
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=60)
    assert command.returncode == 130, err
    assert "Traceback" not in err and err.endswith("interrupted\n")


def test_a_program_that_imports_the_cli_keeps_its_own_ctrl_c(tmp_path):
    (tmp_path / "uses_cli.py").write_text("from serverlab import cli\n")
    program = (
        "import signal, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import uses_cli\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout == "True\n"


# A manifest's required keys for a contestant that is only its build and test commands.
SH_BASE = """
language = "sh"
architecture = "none"
implements = ["perf"]
version = "echo 1"
start = "true {port} {host}"
"""


def test_build_reports_each_contestant_and_fails_if_any_failed(tmp_path, monkeypatch):
    base = SH_BASE
    write_manifest(
        tmp_path, "good", f'name = "good"\n{base}build = "touch out"\nartifacts = ["out"]\n'
    )
    write_manifest(tmp_path, "bad", f'name = "bad"\n{base}build = "echo boom; exit 3"\n')
    write_manifest(tmp_path, "lazy", f'name = "lazy"\n{base}build = "true"\nartifacts = ["x"]\n')
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path))
    done = serverlab("build")
    assert done.returncode == 2
    assert "built   good" in done.stdout and (tmp_path / "good" / "out").exists()
    assert "FAILED  bad" in done.stderr and "exit code 3" in done.stderr
    assert "boom" in done.stderr
    assert "FAILED  lazy" in done.stderr and "left no x" in done.stderr
    assert "build failed for bad, lazy" in done.stderr
    assert serverlab("build", "good").returncode == 0


def test_contestant_tests_runs_each_manifests_test_command_and_fails_if_any_failed(
    tmp_path, monkeypatch
):
    write_manifest(tmp_path, "good", f'name = "good"\n{SH_BASE}test = "touch ran"\n')
    write_manifest(tmp_path, "bad", f'name = "bad"\n{SH_BASE}test = "echo broke; exit 4"\n')
    write_manifest(tmp_path, "none", f'name = "none"\n{SH_BASE}')
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path))
    done = serverlab("contestant-tests")
    assert done.returncode == 2
    assert "passed  good" in done.stdout and (tmp_path / "good" / "ran").exists()
    assert "passed  none" in done.stdout and "no test command" in done.stdout
    assert "FAILED  bad" in done.stderr and "exit code 4" in done.stderr and "broke" in done.stderr
    assert "contestant tests failed for bad" in done.stderr
    assert serverlab("contestant-tests", "good").returncode == 0


def test_the_old_name_check_still_runs_the_contestant_tests_with_a_one_line_notice(
    tmp_path, monkeypatch
):
    write_manifest(tmp_path, "good", f'name = "good"\n{SH_BASE}test = "touch ran"\n')
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path))
    done = serverlab("check", "good")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "good" / "ran").exists() and "passed  good" in done.stdout
    assert done.stderr.splitlines() == [
        "serverlab: `check` is now `contestant-tests`; the old name goes in the next version"
    ]
    commands = serverlab("--help").stdout.split("Commands:")[1]
    assert "contestant-tests" in commands and "check" not in [
        line.split()[0] for line in commands.splitlines() if line.strip()
    ]


def parse_as_serverlab(argv: list[str]) -> click.Context:
    """What `serverlab ARGV` would run, its options parsed by click as the command parses
    them; nothing is run. A bad option or command is a click.UsageError."""
    command, context = cli.cli, None
    while isinstance(command, click.Group):
        name, *argv = argv
        context = click.Context(command, info_name=command.name, parent=context)
        command = command.get_command(context, name)
        if command is None:
            raise click.UsageError(f"no command {name!r}")
    return command.make_context(name, argv, parent=context)


@pytest.mark.parametrize("lab_name", [manage.DEFAULT_NAME, "t-other lab"])
def test_the_advice_of_a_second_lab_up_is_a_command_lab_down_takes(lab_name):
    advice = shlex.split(manage.down_command(lab_name))
    env = dict(word.split("=", 1) for word in advice if "=" in word and not word.startswith("-"))
    argv = advice[len(env) :]
    assert argv[0] == "serverlab"
    assert parse_as_serverlab(argv[1:]).command is cli.lab_down
    # And the lab it names is the one that is up: lab down reads its name where lab up did.
    named = subprocess.run(
        [sys.executable, "-c", "from serverlab.lab import manage; print(manage.DEFAULT_NAME)"],
        env={k: v for k, v in os.environ.items() if k != "SERVERLAB_LAB"} | env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert named.stdout.strip() == (lab_name if env else "main")


def test_the_old_advice_would_not_have_parsed():
    with pytest.raises(click.UsageError, match="--name"):
        parse_as_serverlab(["lab", "down", "--name", "main"])


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--delay-ms", "-1", "--delay-ms must be 0..5000"),
        ("--loss-pct", "100", "below 100"),
        ("--rate-mbit", "inf", "--rate-mbit must be above 0 and at most 100000"),
        ("--rate-mbit", "nan", "--rate-mbit must be above 0"),
    ],
)
def test_a_lab_link_value_out_of_range_is_one_line_and_makes_nothing(option, value, said):
    name = f"c{os.getpid() % 100000}"
    before = set(existing())
    done = subprocess.run(
        [*SERVERLAB, "lab", "up", option, value],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SERVERLAB_LAB": name},
    )
    assert done.returncode == 2 and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    # Only the namespaces of that lab: tests beside this one (pytest -n) make their own.
    made = [netns for netns in set(existing()) - before if is_lab_namespace(netns) == name]
    assert not made and not manage.status(name)


def read_terminal(fd: int, until: str, timeout_s: float = 60) -> str:
    """What a pseudo-terminal showed, read until `until` appears (or the other end closed)."""
    seen, deadline = b"", time.monotonic() + timeout_s
    while until.encode() not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


def test_ctrl_c_under_a_progress_bar_on_a_terminal_is_the_one_quiet_line(contestants_dir):
    broken = REFERENCE_MANIFEST.replace('name = "reference"', 'name = "second"')
    write_manifest(contestants_dir, "second", broken)
    main, child = os.openpty()
    command = subprocess.Popen(
        [*SERVERLAB, "verify", "--all", "--case", "perf.get"],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
    )
    os.close(child)
    try:
        shown = read_terminal(main, "1/2")
        assert "verify" in shown and "left" in shown, shown  # the bar, with its time left
        command.send_signal(signal.SIGINT)
        after = read_terminal(main, "interrupted\r\n")
        assert command.wait(timeout=60) == 130
    finally:
        os.close(main)
        if command.poll() is None:
            command.kill()
    assert "serverlab: interrupted" in after
    assert "Traceback" not in after and "KeyboardInterrupt" not in after


def test_verify_output_sent_to_a_file_stays_there_while_the_bar_is_on_the_terminal(
    contestants_dir, tmp_path
):
    write_manifest(
        contestants_dir, "second", REFERENCE_MANIFEST.replace('"reference"', '"second"', 1)
    )
    main, child = os.openpty()
    with open(tmp_path / "out.txt", "w") as out:
        command = subprocess.Popen(
            [*SERVERLAB, "verify", "--all", "--case", "perf.get"],
            stdin=child,
            stdout=out,
            stderr=child,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
        )
        os.close(child)
        try:
            shown = read_terminal(main, "\\0")  # all of it, until the command closes it
            assert command.wait(timeout=120) == 0
        finally:
            os.close(main)
    written = (tmp_path / "out.txt").read_text()
    assert "== reference" in written and "== second" in written
    assert "PASS  perf.get" in written and "\\x1b" not in written
    assert "PASS  perf.get" not in shown and "verify" in shown
