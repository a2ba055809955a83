"""Owner marks: whatever serverlab starts is found again by the mark, and only a dead
owner's processes are ever reaped."""

import os
import signal
import subprocess
import sys
import time

import psutil

from serverlab.base import owner

# An owner that starts a marked server (whose child wipes its own environment, as nginx's
# workers may), prints the server's pid, and waits to be killed.
OWNER_SCRIPT = """
import subprocess, sys, time
from serverlab.base import owner
server = owner.popen(["/bin/sh", "-c", "env -i sleep 300 & exec sleep 300"])
print(server.pid, flush=True)
time.sleep(300)
"""


def start_owner() -> tuple[subprocess.Popen, psutil.Process]:
    boss = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT], stdout=subprocess.PIPE, text=True)
    server = psutil.Process(int(boss.stdout.readline()))
    deadline = time.monotonic() + 10
    while len(server.children()) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    return boss, server


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_mark_names_a_live_process_until_it_ends():
    child = subprocess.Popen(["sleep", "30"])
    mark = owner.token(child.pid)
    assert owner.alive(mark)
    child.kill()
    child.wait()
    assert not owner.alive(mark)
    assert not owner.alive("garbage") and not owner.alive(f"{os.getpid()}.1")


def test_a_marked_child_runs_in_its_own_session_with_its_owners_mark():
    child = owner.popen(["sleep", "30"])
    try:
        # Between fork and exec the child still shows our own environment: the mark is in
        # the one it execs with.
        # Nor does the new name say the exec is done: the kernel names the process before
        # it sets up the new environment, so /proc/PID/environ reads empty in between.
        deadline = time.monotonic() + 10
        while owner.mark_of(child.pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert psutil.Process(child.pid).name() == "sleep"
        assert os.getsid(child.pid) == child.pid
        assert owner.mark_of(child.pid) == owner.token()
        assert child.pid in owner.owned_by(owner.token())
    finally:
        child.kill()
        child.wait()


def test_only_a_dead_owners_processes_are_reaped_with_their_whole_session():
    dead_boss, orphan = start_owner()
    live_boss, kept = start_owner()
    try:
        orphan_tree = [orphan, *orphan.children(recursive=True)]
        assert any(owner.mark_of(p.pid) is None for p in orphan_tree), "env -i lost the mark"
        dead_boss.send_signal(signal.SIGKILL)
        dead_boss.wait()
        reaped = owner.reap_orphans()
        assert {p.pid for p in orphan_tree} <= set(reaped)
        psutil.wait_procs(orphan_tree, timeout=5)
        assert all(gone(p) for p in orphan_tree)
        assert not gone(kept) and kept.pid not in reaped, "a live owner's server is kept"
    finally:
        live_boss.kill()
        live_boss.wait()
    assert kept.pid in owner.reap_orphans(), "once its owner died, it is an orphan too"
    _, alive = psutil.wait_procs([kept], timeout=5)
    assert not alive


# A command whose child outlives the handle it lost (as when an interrupt cuts Popen short):
# serverlab's main reaps what still carries its mark on the way out, whatever the exit.
FORGETFUL = """
import sys
from serverlab import cli
from serverlab.base import owner

def forgetful():
    server = owner.popen(["/bin/sh", "-c", "sleep 300 & exec sleep 300"])
    print(server.pid, flush=True)
    raise KeyboardInterrupt

cli._main = forgetful
cli.main()
"""


def test_a_command_leaves_nothing_marked_as_its_own_behind():
    command = subprocess.run(
        [sys.executable, "-c", FORGETFUL], capture_output=True, text=True, timeout=30
    )
    pid = int(command.stdout.split()[0])
    deadline = time.monotonic() + 5
    while _session_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _session_alive(pid), command.stderr


def _session_alive(pid: int) -> list[psutil.Process]:
    """The server and the rest of its session, still running (zombies are dead)."""
    return [p for p in psutil.process_iter() if _session_of(p) == pid and not gone(p)]


def _session_of(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except OSError:
        return None
