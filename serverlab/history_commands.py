"""The commands behind ``serverlab history`` and ``serverlab compare --paired`` /
``--fail-on-regression``: they read the results database (history, the gate) or run a
paired sitting through ``serverlab.commands.run`` and judge what it stored."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from serverlab import commands
from serverlab.base import interrupts, terminal
from serverlab.base.progress import Tally
from serverlab.contestant.manifest import find
from serverlab.results import gate, gate_formats, machines
from serverlab.results import history as histories
from serverlab.results.report.cells.scenarios import paired_arm
from serverlab.results.report.figures.table import METRICS_BY_NAME
from serverlab.results.report.selection import SelectionError, load_selected, parse_selection
from serverlab.run.plan import paired
from serverlab.run.plan.runner import RunOutcome


def history(
    db: str,
    selection: Sequence[str],
    metrics: Sequence[str],
    max_pvalue: float,
    as_json: bool,
    mix_machines: bool = False,
) -> list[histories.Series]:
    unknown = [m for m in metrics if m not in METRICS_BY_NAME]
    if unknown:
        raise SelectionError(f"unknown metric {', '.join(unknown)}")
    if not 0 < max_pvalue < 1:
        raise SelectionError(f"--max-pvalue {max_pvalue:g}: a p-value is between 0 and 1")
    with Tally() as progress:
        found = load_selected(db, parse_selection(list(selection) or None), progress)
    paired_runs = sorted({t.run_id for t in found.tests if paired_arm(t)})
    if paired_runs and len(paired_runs) == len({t.run_id for t in found.tests}):
        raise SelectionError(
            f"the selection holds only paired runs ({_runs_text(paired_runs)}): history "
            f"follows ordinary runs. {PAIRED_ELSEWHERE}"
        )
    series = histories.build_series(
        found.tests, found.runs, found.suites, metrics, max_pvalue, mix_machines
    )
    if as_json:
        terminal.console().print_json(histories.dumps(series))
    else:
        histories.print_history(series)
    if paired_runs:
        terminal.console(stderr=True).print(
            f"left out: paired {_runs_text(paired_runs)}. {PAIRED_ELSEWHERE}", highlight=False
        )
    return series


# Where a paired run's figures are read instead of in a history over runs.
PAIRED_ELSEWHERE = (
    "A paired run's arms (A, B, A') are two configurations in one sitting, judged against "
    "each other by the gate it printed; `serverlab report run:N` shows each arm apart."
)


def _runs_text(run_ids: list[int]) -> str:
    return ("run " if len(run_ids) == 1 else "runs ") + ", ".join(map(str, run_ids))


@dataclass(frozen=True)
class GateDocument:
    """Where the gate's verdict goes for CI (``--format``, ``--output``): each format in
    its file, or one format without a file on stdout, the terminal tables then moving to
    stderr so that stdout holds the document alone. One sitting of ``compare --paired``
    can so write its Markdown and its JUnit at once."""

    outputs: tuple[tuple[str, str | None], ...] = ()

    @property
    def on_stdout(self) -> bool:
        return any(path is None for _form, path in self.outputs)

    def tables(self):
        """Where the terminal tables go while this document is made."""
        if self.on_stdout:
            return contextlib.redirect_stdout(sys.stderr)
        return contextlib.nullcontext()

    def write(self, report: gate_formats.GateReport) -> None:
        for form, path in self.outputs:
            text = gate_formats.render(report, form)
            if path is None:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                Path(path).write_text(text, encoding="utf-8")


TEXT = GateDocument()


def gate_selections(
    db: str,
    side_a: str,
    side_b: str,
    metrics,
    threshold: float,
    note: str = "",
    document: GateDocument = TEXT,
) -> int:
    """The gate over two stored selections; returns its exit code. ``note`` (machines
    mixed) goes with its title and its verdict."""
    rows = gate.selection_gate(db, side_a, side_b, metrics, threshold)
    if not rows:
        raise SelectionError("the two sides measured no series in common")
    title = f"gate: B = {side_b} against A = {side_a}, fail on a regression over {threshold:g} %"
    code = gate.exit_code(rows)
    with document.tables():
        gate.print_gate(rows, title + (f"; {note}" if note else ""), threshold)
        verdict = gate.verdict_line(code) + (f"; {note}" if note else "")
        terminal.console().print(terminal.literal(verdict), highlight=False, soft_wrap=True)
    document.write(gate_formats.GateReport(title, threshold, rows, code, note))
    return code


def record_paired(suite_file: str, side_a: str, side_b: str, db: str, rounds: int) -> RunOutcome:
    """Run A, B, A' interleaved in one sitting and store it in ``db``; returns how it went
    (its run id, and whether a signal cut it short)."""
    a, b = paired.parse_config(side_a), paired.parse_config(side_b)
    planned = commands.plan_suite(suite_file, 1.0, None, None)
    names = sorted({p.contestant for p in planned.plans})
    manifests = {name: find(name) for name in names}
    for config in (a, b):
        paired.check_arm(config, names)
        if config.engine:
            # Another engine judges every plan too (plan_suite had this tree's judge them):
            # none is refused once the sitting runs.
            with paired.environment(config):
                commands.check_engine_plans(planned.suite, planned.plans)
    planned.plans = paired.interleave(planned.plans, a, b, rounds, manifests)
    outcome = commands.run(planned, db, False, False, execute=paired.paired_execute(a, b))
    if outcome.run is None:
        raise SelectionError("nothing ran: every contestant was refused")
    return outcome.run


def paired_run(
    suite_file: str,
    side_a: str,
    side_b: str,
    db: str,
    rounds: int,
    metrics,
    threshold: float | None,
    document: GateDocument = TEXT,
) -> int:
    """A paired sitting recorded and judged; returns the gate's exit code (0 with no gate),
    or 128 + the signal that cut the sitting short: a gate judged on part of a sitting
    would pass or fail on arms that did not all run."""
    outcome = record_paired(suite_file, side_a, side_b, db, rounds)
    run_id = outcome.run_id
    if outcome.interrupted:
        terminal.console(stderr=True).print(
            f"serverlab: interrupted; paired run {run_id} is kept, marked interrupted, "
            "and not judged",
            highlight=False,
        )
        return 128 + interrupts.last_signal()
    rows = gate.paired_gate(db, run_id, metrics, threshold or 0.0)
    title = (
        f"paired run {run_id}: B = {side_b} against A = {side_a} (A' = A again), {rounds} rounds"
    )
    with document.tables():
        gate.print_gate(rows, title, threshold)
    if threshold is None:
        return 0
    code = gate.exit_code(rows)
    with document.tables():
        terminal.console().print(gate.verdict_line(code), highlight=False)
    document.write(gate_formats.GateReport(title, threshold, rows, code))
    return code


def compare(
    side_a,
    side_b,
    db,
    metrics,
    suite_file,
    rounds,
    threshold,
    mix_machines=False,
    document: GateDocument = TEXT,
) -> int:
    """``serverlab compare``: the plain comparison of two selections, a paired run with
    ``suite_file``, and the gate with ``threshold``; returns the exit code. Stored sides
    from different machines are inconclusive (3) unless ``mix_machines``. ``document``: the
    gate's verdict for CI, beside the exit code."""
    if suite_file:
        gated = metrics or gate.GATE_METRICS
        return paired_run(suite_file, side_a, side_b, db, rounds, gated, threshold, document)
    found = machines.machines_of(db, side_a, side_b)
    if found.mixed and not mix_machines:
        code = _inconclusive(found)
        title = f"gate: B = {side_b} against A = {side_a}"
        document.write(gate_formats.GateReport(title, threshold or 0.0, [], code, found.refusal()))
        return code
    note = found.mixed_note() if found.mixed else ""
    with document.tables():
        commands.compare(db, side_a, side_b, metrics or commands.comparing.DEFAULT_METRICS, note)
    if threshold is None:
        return 0
    gated = metrics or gate.GATE_METRICS
    return gate_selections(db, side_a, side_b, gated, threshold, note, document)


def compare_json(db, side_a, side_b, metrics, mix_machines: bool) -> tuple[int, dict | None]:
    """``serverlab compare --json``: the exit code (3: machines differ) and the data."""
    found = machines.machines_of(db, side_a, side_b)
    if found.mixed and not mix_machines:
        return _inconclusive(found), None
    return 0, commands.compare_json(db, side_a, side_b, metrics, found.as_dict())


def _inconclusive(found: machines.Machines) -> int:
    """One line saying which machines, and the gate's inconclusive exit code."""
    said = f"serverlab: {found.refusal()}"
    terminal.console(stderr=True).print(terminal.literal(said), highlight=False, soft_wrap=True)
    return gate.EXIT_CODES[gate.GateOutcome.INCONCLUSIVE]
