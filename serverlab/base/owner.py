"""Which serverlab process owns a process it started, so that nothing it starts outlives it.

Every child (servers, engines, and whatever those start in turn) is started in a session
of its own with `SERVERLAB_OWNER=<pid>.<start time>` of the starting serverlab in its
environment. The mark is fixed before exec and inherited by every descendant, so there is
no window after `Popen` returns in which a child is not yet written down. A process whose
owner's pid and start time no longer match a live process is an orphan of a dead run, and
`reap_orphans` kills it with everything in its session. A live owner's processes are never
touched, so several runs and tests can share the machine.

The Ray nodes of a virtual lab outlive the `serverlab lab up` that started them: they carry
the lab's mark (`lab:<name>`) instead, alive for as long as the lab's state file exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

OWNER_ENV = "SERVERLAB_OWNER"
_PROC = Path("/proc")
LAB_MARK_PREFIX = "lab:"
# Where each virtual lab that is up says what it is made of (/run: gone with a reboot, as
# the lab's namespaces are).
LAB_STATE_DIR = Path(os.environ.get("SERVERLAB_LAB_STATE_DIR", "/run/serverlab/labs"))


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (exact, unlike a float time)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which may itself hold spaces and parentheses.
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19])


def token(pid: int | None = None) -> str:
    """The owner mark of a process (default: this one): `<pid>.<start ticks>`."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{start_ticks(pid)}"


def lab_mark(name: str) -> str:
    """The owner mark of a virtual lab's processes (serverlab.lab): they belong to the lab,
    not to the command that started them, and live as long as the lab is up."""
    return f"{LAB_MARK_PREFIX}{name}"


def lab_state_file(name: str) -> Path:
    return LAB_STATE_DIR / f"{name}.json"


def alive(mark: str) -> bool:
    """Whether the owner a mark names is still there: a process (a reused pid has another
    start time), or a lab whose state file still exists."""
    if mark.startswith(LAB_MARK_PREFIX):
        return lab_state_file(mark[len(LAB_MARK_PREFIX) :]).is_file()
    pid_text, _, ticks = mark.partition(".")
    if not pid_text.isdigit() or not ticks.isdigit():
        return False
    return start_ticks(int(pid_text)) == int(ticks)


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    return {**(os.environ if env is None else env), OWNER_ENV: token()}


def popen(argv: list[str], **kwargs) -> subprocess.Popen:
    """`subprocess.Popen` in a new session, marked as ours."""
    kwargs["env"] = child_env(kwargs.get("env"))
    return subprocess.Popen(argv, start_new_session=True, **kwargs)


def mark_of(pid: int) -> str | None:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = OWNER_ENV.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def _pids() -> list[int]:
    return [int(entry.name) for entry in _PROC.iterdir() if entry.name.isdigit()]


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def orphans() -> dict[int, str]:
    """pid -> mark of every process whose owner is gone, and of the rest of each session
    such a process leads (a descendant may have lost the mark, e.g. by rewriting its
    environment; it cannot leave the session without calling setsid itself)."""
    me = os.getpid()
    found = {}
    for pid in _pids():
        mark = mark_of(pid)
        if pid != me and mark and not alive(mark):
            found[pid] = mark
    return _with_their_sessions(found)


def mine() -> dict[int, str]:
    """pid -> mark of every process still carrying this process's own mark, with their
    sessions."""
    me, mark = os.getpid(), token()
    return _with_their_sessions({p: mark for p in _pids() if p != me and mark_of(p) == mark})


def _with_their_sessions(found: dict[int, str]) -> dict[int, str]:
    # Only sessions that a found process leads: those are the ones serverlab made.
    sessions = {pid for pid in found if _session(pid) == pid} - {_session(os.getpid())}
    for pid in _pids():
        if pid not in found and pid != os.getpid() and _session(pid) in sessions:
            found[pid] = f"session {_session(pid)}"
    return found


def reap_orphans() -> list[int]:
    """SIGKILLs every orphan (see `orphans`); returns their pids."""
    return _kill(orphans())


def reap_mine() -> list[int]:
    """SIGKILLs what this process started and still runs: the last net as a command ends,
    for a child whose start an interrupt cut short (Popen then returns no handle to stop)."""
    return _kill(mine())


def _kill(victims: dict[int, str]) -> list[int]:
    for pid in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return sorted(victims)


def owned_by(mark: str) -> list[int]:
    """The live processes carrying this owner's mark (for tests and diagnostics)."""
    return [pid for pid in _pids() if mark_of(pid) == mark]
