"""How a command is told to stop: Ctrl-C, SIGTERM, a closed terminal (SIGHUP) and a closed
output pipe all become a KeyboardInterrupt in the main thread, so that every `finally` on
the way out stops what was started, and the exit code says which it was (128 + signal).

SIGPIPE itself stays ignored, as Python sets it: a server under test that closes a socket
we write to must give an error on that socket, not stop the run. A closed *output* is
noticed where we write it (`output_lost`).

Before that handling is installed, while the command's modules import (a third of a second,
seconds on a busy machine), `guard_start` makes Ctrl-C end the process at once with 130 and
one line: nothing has been started yet that would need stopping.
"""

from __future__ import annotations

import _thread
import os
import select
import signal
import sys
import threading


class Interrupted(KeyboardInterrupt):
    """A signal that ends the command the way Ctrl-C does."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_last = signal.SIGINT
# Tests name a point of the command's start here (`checkpoint`) to interrupt it there.
STOP_ENV = "SERVERLAB_TEST_STOP_AT"


def guard_start():
    """Ctrl-C ends the process quietly from now until `install`. Returns the handler it
    replaced, for `end_guard`."""
    try:
        return signal.signal(signal.SIGINT, _exit_while_starting)
    except ValueError:  # imported off the main thread: no signal is ours to handle
        return None


def end_guard(previous) -> None:
    """At the end of the entry module's imports: a command's `main` comes next, and the
    guard stays until it installs the full handling. A program that imported the module as
    a library (a test runner, say) gets its own Ctrl-C back."""
    if previous is not None and not _imported_by_main():
        signal.signal(signal.SIGINT, previous)


def _exit_while_starting(signum, frame):
    os.write(2, b"serverlab: interrupted\n")
    os._exit(128 + signum)


def _imported_by_main() -> bool:
    """Whether the module that called end_guard (two frames up) is imported by
    `__main__` (the `serverlab` script, or `python -c "from serverlab.cli import main"`)."""
    frame = sys._getframe(2).f_back
    while frame is not None and frame.f_globals.get("__name__", "").startswith("importlib"):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__") == "__main__"


def checkpoint(name: str) -> None:
    """A named point of the command's start. A test that sets SERVERLAB_TEST_STOP_AT to it
    finds the process stopped there (SIGSTOP to itself), sends its signal, then SIGCONT:
    the signal is then handled exactly at this point, not wherever a timer happened to land."""
    if os.environ.get(STOP_ENV) == name:
        del os.environ[STOP_ENV]  # once: the way out passes the same point again
        os.kill(os.getpid(), signal.SIGSTOP)


def last_signal() -> int:
    """The signal that interrupted the command (SIGINT unless another came)."""
    return _last


def install() -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise)
    # A shell starts background jobs with SIGINT ignored; `kill -INT` must still stop us.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise(signum, frame):
    global _last
    _last = signum
    raise Interrupted(signum)


def output_lost() -> None:
    """Our stdout or stderr lost its reader (`serverlab run | head`): silence it and stop
    the command as SIGPIPE would, from whichever thread noticed."""
    global _last
    _last = signal.SIGPIPE
    silence_broken_outputs()
    if threading.current_thread() is threading.main_thread():
        raise Interrupted(signal.SIGPIPE)
    _thread.interrupt_main()


def silence_broken_outputs() -> None:
    """Points stdout or stderr at /dev/null once its reader is gone, so that stopping
    cleanly does not fail on the next line printed."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        poller = select.poll()
        poller.register(fd, 0)
        if any(events & select.POLLERR for _, events in poller.poll(0)):
            os.dup2(devnull, fd)
    os.close(devnull)
