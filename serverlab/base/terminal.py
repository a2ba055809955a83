"""Where serverlab writes for people: one kind of rich console for every command.

A console here never ends the process on its own. Rich's default answer to a reader that
went away (`serverlab run ... | head`) is `SystemExit(1)`, which would skip the clean stop
of a run; ours hands the lost output to serverlab.base.interrupts, which stops the command the
way SIGPIPE would. Piped output (logs, grep) gets a fixed width, so that a line is one row.
"""

from __future__ import annotations

import sys

from rich.console import Console

from serverlab.base import interrupts

# Tables printed to a pipe or file: wide enough that a row is one line in a log.
PIPED_WIDTH = 200


class _Console(Console):
    def on_broken_pipe(self) -> None:
        interrupts.output_lost()


def console(stderr: bool = False, piped_width: int = PIPED_WIDTH) -> Console:
    """A console on stdout (or stderr): the terminal's width, or `piped_width` when the
    stream is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    return _Console(stderr=stderr, width=None if stream.isatty() else piped_width)
