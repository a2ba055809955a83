"""Where serverlab writes for people: one kind of rich console for every command, and one
way to print a name that came from outside.

A console here never ends the process on its own. Rich's default answer to a reader that
went away (`serverlab run ... | head`) is `SystemExit(1)`, which would skip the clean stop
of a run; ours hands the lost output to serverlab.base.interrupts, which stops the command the
way SIGPIPE would. Piped output (logs, grep) gets a fixed width, so that a line is one row.

Names are data: a scenario, a contestant, a tunable's value, a server's answer are printed
as written (`literal`), never read as Rich markup or emoji codes, and never handed to the
terminal as control characters.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from serverlab.base import interrupts

# Tables printed to a pipe or file: wide enough that a row is one line in a log.
PIPED_WIDTH = 200


class _Console(Console):
    def on_broken_pipe(self) -> None:
        interrupts.output_lost()


def console(stderr: bool = False, piped_width: int = PIPED_WIDTH) -> Console:
    """A console on stdout (or stderr): the terminal's width, or `piped_width` when the
    stream is not a terminal. No emoji codes: a name like `a:b:` stays as written."""
    stream = sys.stderr if stderr else sys.stdout
    return _Console(stderr=stderr, width=None if stream.isatty() else piped_width, emoji=False)


def literal(text: object, *, markup: bool = True, newlines: bool = False) -> str:
    """`text` (a name from a suite, a manifest or a server) as it is written: every
    character Python would not print in a repr (ESC, other controls, bidi overrides) shown
    as its escape (`\\x1b`), so that it cannot move the cursor, clear the screen or hide
    what follows. With `markup` (for a rich console) its square brackets are escaped too;
    without it (click.echo), the text is returned as is otherwise. `newlines` keeps line
    breaks, for a message of several lines."""
    shown = "".join(
        ch if ch.isprintable() or (newlines and ch == "\n") else repr(ch)[1:-1] for ch in str(text)
    )
    return escape(shown) if markup else shown
