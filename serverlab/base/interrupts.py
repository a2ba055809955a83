"""How a command is told to stop: Ctrl-C, SIGTERM, a closed terminal (SIGHUP) and a closed
output pipe all become a KeyboardInterrupt in the main thread, so that every `finally` on
the way out stops what was started, and the exit code says which it was (128 + signal).

SIGPIPE itself stays ignored, as Python sets it: a server under test that closes a socket
we write to must give an error on that socket, not stop the run. A closed *output* is
noticed where we write it (`output_lost`).
"""

from __future__ import annotations

import _thread
import os
import select
import signal
import threading


class Interrupted(KeyboardInterrupt):
    """A signal that ends the command the way Ctrl-C does."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_last = signal.SIGINT


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
