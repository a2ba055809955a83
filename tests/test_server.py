import json
import socket
import sys
import time

import psutil
import pytest
from conftest import write_manifest

from serverlab.base import httpclient
from serverlab.contestant.manifest import find, load_manifest
from serverlab.contestant.server import (
    ContestantServer,
    ServerError,
    UnknownTunableError,
    parse_assignments,
    resolve_settings,
)


def port_is_free(port: int) -> bool:
    """Bindable the way a server binds (SO_REUSEADDR lets TIME_WAIT leftovers be)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def tiny_manifest(root, start: str, ready: str = "tcp", timeout: float = 5) -> object:
    text = f"""
name = "tiny"
language = "python"
architecture = "test"
implements = ["perf"]
version = "true"
start = "HOST={{host}} {start}"
ready = "{ready}"
ready_timeout_s = {timeout}
"""
    return load_manifest(write_manifest(root, "tiny", text))


def test_start_ready_stats_and_clean_stop(contestants_dir):
    server = ContestantServer(find("reference"))
    with server:
        assert server.alive
        assert httpclient.get(server.port, "/perf").status == 200
        assert server.stats()["server"] == "reference"
        pid = server.process.pid
        children = psutil.Process(pid).children(recursive=True)
        port = server.port
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not any(child.is_running() for child in children)
    assert server.exit_status is not None
    assert port_is_free(port)
    assert not server.workdir.exists(), "a workdir serverlab made is removed"


def test_placeholders_expand_with_tunable_overrides(contestants_dir):
    server = ContestantServer(find("reference"), settings={"fault": "traversal"})
    command = server.start_command
    assert f"--port {server.port} " in command
    assert f"--syslog-port {server.syslog_port} " in command
    assert f"--docroot {server.docroot} " in command
    assert "--name reference --fault traversal --die-after 0 " in command
    ending = "--host 127.0.0.1 --clock-skew-ms 0 --syslog-mode count"
    assert command.endswith(ending), "{host}: loopback locally"
    server.cleanup()
    elsewhere = ContestantServer(find("reference"), host="198.18.0.2")
    assert "--host 198.18.0.2 " in elsewhere.start_command
    elsewhere.cleanup()


def test_unknown_tunable_is_an_error(contestants_dir):
    known = r"\(known: clock_skew_ms, die_after, fault, syslog_mode\)"
    with pytest.raises(UnknownTunableError, match=r"no tunable 'threads' " + known):
        resolve_settings(find("reference"), {"threads": "4"})


def test_assignments_parse_and_refuse_missing_equals():
    assert parse_assignments(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ServerError, match="key=value"):
        parse_assignments(["oops"])


def test_crash_on_start_is_reported_with_the_log_tail(contestants_dir):
    manifest = find("reference")
    broken = manifest.__class__(
        **{**manifest.__dict__, "start": manifest.start + " --crash-at-start"}
    )
    server = ContestantServer(broken)
    started = time.monotonic()
    with pytest.raises(ServerError) as error:
        server.start()
    assert time.monotonic() - started < 10, "an early exit is noticed before the ready timeout"
    assert "exit code 7" in str(error.value)
    assert "crashing at start as asked" in str(error.value)
    assert server.process is None
    server.cleanup()


def test_a_server_that_never_gets_ready_times_out(tmp_path):
    manifest = tiny_manifest(tmp_path, "echo waiting forever on {port}; exec sleep 60", timeout=0.5)
    server = ContestantServer(manifest)
    with pytest.raises(ServerError, match=r"not ready after 0.5 s(.|\n)*waiting forever"):
        server.start()
    assert server.exit_status.signal is not None, "it was stopped by a signal"
    server.cleanup()


def test_stop_leaves_no_process_behind_even_a_background_child(tmp_path):
    start = (
        f"sleep 300 & exec {sys.executable} -c 'import socket,sys,time; s=socket.socket();"
        ' s.bind((\\"127.0.0.1\\", int(sys.argv[1]))); s.listen(); time.sleep(300)\' {port}'
    )
    manifest = tiny_manifest(tmp_path, start)
    with ContestantServer(manifest) as server:
        tree = [psutil.Process(server.process.pid)]
        tree += tree[0].children(recursive=True)
        assert len(tree) == 2, "the shell's exec'd python plus its background sleep"
    for process in tree:
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE


def test_sigterm_ignored_is_followed_by_sigkill(tmp_path):
    start = (
        f"exec {sys.executable} -c 'import signal,socket,sys,time;"
        " signal.signal(signal.SIGTERM, signal.SIG_IGN); s=socket.socket();"
        ' s.bind((\\"127.0.0.1\\", int(sys.argv[1]))); s.listen(); time.sleep(300)\' {port}'
    )
    server = ContestantServer(tiny_manifest(tmp_path, start), stop_grace_s=0.5)
    server.start()
    status = server.stop()
    assert status.signal == 9
    server.cleanup()


def test_cpu_pinning_uses_taskset(contestants_dir):
    with ContestantServer(find("reference"), cpus="0") as server:
        assert psutil.Process(server.process.pid).cpu_affinity() == [0]


# A server that writes its argv as JSON to {workdir}/argv.json, then listens on {port}.
ARGV_SERVER = (
    "import json,os,socket,sys,time; w=sys.argv[2]; "
    "open(os.path.join(w, 'argv.json'), 'w').write(json.dumps(sys.argv[1:])); "
    "s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(300)"
)
HOSTILE_PATH = '/tmp/a b/it\'s "q" $(touch M) `touch M` ; touch M'


def argv_manifest(root):
    python = sys.executable
    (root / "argv").mkdir(parents=True, exist_ok=True)
    (root / "argv" / "server.py").write_text(ARGV_SERVER)
    text = f"""
name = "argv"
language = "python"
architecture = "test"
implements = ["perf"]
version = "true"
start = "exec {python} server.py {{port}} {{workdir}} {{docroot}} {{extra}} {{count}} {{host}}"

[tunables.extra]
default = "plain"
type = "path"

[tunables.count]
default = "1"
type = "int"
min = 1
"""
    return load_manifest(write_manifest(root, "argv", text))


def test_values_with_shell_syntax_reach_the_argv_verbatim_and_never_run(tmp_path):
    manifest = argv_manifest(tmp_path / "contestants")
    workdir = tmp_path / "work dir 'x' $(touch M)"
    docroot = tmp_path / 'doc root "y" `touch M`'
    settings = {"extra": HOSTILE_PATH, "count": "+3"}
    with ContestantServer(manifest, workdir=workdir, docroot=docroot, settings=settings) as server:
        argv = json.loads((workdir / "argv.json").read_text())
        assert argv == [
            str(server.port),
            str(workdir),
            str(docroot),
            HOSTILE_PATH,
            "3",
            "127.0.0.1",
        ]
    for folder in (tmp_path, manifest.folder, workdir, docroot):
        assert not (folder / "M").exists(), f"a value ran as a command in {folder}"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"count": "$(touch M)"}, r"count = '\$\(touch M\)': expected an integer in 1\.\."),
        ({"count": "0"}, "expected an integer in 1.."),
        ({"extra": "a\0b"}, "without NUL"),
    ],
)
def test_a_value_its_type_refuses_stops_before_anything_starts(tmp_path, settings, message):
    manifest = argv_manifest(tmp_path / "contestants")
    with pytest.raises(ServerError, match=message):
        ContestantServer(manifest, settings=settings)
    assert not (manifest.folder / "M").exists()
