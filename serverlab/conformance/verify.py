"""`serverlab verify`: runs the conformance cases of spec/cases against one contestant.

The server is started with a docroot of known files; every case of its parts runs in
order. After a bad-input case the server must still answer; a crashed or hung server is
a FAIL of that case and is restarted so that the remaining cases still say something.
"""

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base import httpclient, scratch
from serverlab.base.waiting import wait_for
from serverlab.conformance.cases import Case, load_cases, select
from serverlab.conformance.checks import CHECKS
from serverlab.conformance.context import VerifyContext, new_run_tag
from serverlab.conformance.exchange import run_steps
from serverlab.conformance.fixtures import make_docroot
from serverlab.conformance.limits import limit_of, limits_problem
from serverlab.conformance.outcome import FAIL, PASS, WARN, CaseAborted, CaseResult, Outcome
from serverlab.contestant.manifest import SPEC_PARTS, SYSLOG_MODE, Manifest
from serverlab.contestant.server import ContestantServer, ServerError, log_tail

# A server's odd answer can break a check's reading of it; that is the server's FAIL.
ANSWER_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)
EXIT_GRACE_S = 1.0


@dataclass
class VerifyReport:
    name: str
    results: list[CaseResult] = field(default_factory=list)
    error: str = ""  # the contestant could not be checked at all
    crashes: list[str] = field(default_factory=list)
    # Spec parts with cases that the contestant does not claim: said, never skipped silently.
    not_claimed: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for result in self.results if result.status == status)

    @property
    def ok(self) -> bool:
        return not self.error and not self.crashes and self.count(FAIL) == 0

    def summary(self) -> str:
        if self.error:
            return f"{self.name}: FAIL ({self.error.splitlines()[0]})"
        text = (
            f"{self.name}: {self.count(PASS)} passed, {self.count(WARN)} warned, "
            f"{self.count(FAIL)} failed"
        )
        return text + (f", crashed {len(self.crashes)}x" if self.crashes else "")

    def as_dict(self) -> dict:
        return {
            "contestant": self.name,
            "ok": self.ok,
            "error": self.error,
            "crashes": self.crashes,
            "not_claimed": self.not_claimed,
            "cases": [r.as_dict() for r in self.results],
        }


def verify_contestant(
    manifest: Manifest,
    *,
    pattern: str | None = None,
    settings: dict[str, str] | None = None,
    cases_dir: Path | None = None,
    on_result: Callable[[CaseResult], None] = lambda result: None,
    give_up_s: float = 3.0,
    leave_out: frozenset[str] = frozenset(),
    stop: threading.Event | None = None,
) -> VerifyReport:
    """Every case of the parts the contestant claims, but those of `leave_out` (a run
    leaves out the transports none of its tests speaks, and says so). `stop`: once set, no
    further case starts (the report says so) and the server is stopped."""
    report = VerifyReport(manifest.name)
    if not manifest.is_built():
        missing = [a for a in manifest.artifacts if not (manifest.folder / a).exists()]
        report.error = (
            f"not built (missing {', '.join(missing)}); run: serverlab build {manifest.name}"
        )
        return report
    all_cases = load_cases(cases_dir)
    report.error = limits_problem(manifest, all_cases)
    if report.error:
        return report
    cases = select(all_cases, [p for p in manifest.parts() if p not in leave_out], pattern)
    if "syslog-parse" in manifest.implements:
        # Spec §7.1: parse mode counts everything count mode does, and parses too.
        settings = {SYSLOG_MODE: "parse", **(settings or {})}
    report.not_claimed = not_claimed(manifest, all_cases, pattern)
    with tempfile.TemporaryDirectory(
        prefix=f"verify-{manifest.name}-", dir=scratch.own_folder()
    ) as base:
        docroot = make_docroot(Path(base))
        server = ContestantServer(
            manifest, docroot=docroot.root, workdir=Path(base) / "work", settings=settings
        )
        try:
            server.start()
        except ServerError as error:
            report.error = str(error)
            return report
        context = VerifyContext(
            server=server, docroot=docroot, run_tag=new_run_tag(), give_up_s=give_up_s
        )
        try:
            for case in cases:
                if stop is not None and stop.is_set():
                    report.error = "stopped before every case had run"
                    break
                result = run_case(context, case, report)
                report.results.append(result)
                on_result(result)
                if report.error:
                    break
        finally:
            server.stop()
    return report


def not_claimed(manifest: Manifest, cases: list[Case], pattern: str | None) -> list[str]:
    """The parts with cases (that match the pattern) which the contestant does not claim."""
    parts = {case.part for case in select(cases, list(SPEC_PARTS), pattern)}
    return sorted(parts - set(manifest.parts()), key=SPEC_PARTS.index)


def run_case(ctx: VerifyContext, case: Case, report: VerifyReport) -> CaseResult:
    started = time.monotonic()
    ctx.case_id = case.id
    outcome = Outcome()
    try:
        if case.steps:
            run_steps(ctx, case.steps, outcome)
        elif case.check in CHECKS:
            CHECKS[case.check](ctx, case.params, outcome)
        else:
            outcome.fail(f"unknown check kind '{case.check}' in spec/cases")
    except CaseAborted as aborted:
        outcome.fail(str(aborted))
    except httpclient.HttpError as error:
        outcome.fail(str(error))
    except OSError as error:
        outcome.fail(f"socket error: {error}")
    except ANSWER_ERRORS as error:
        outcome.fail(f"unexpected answer ({type(error).__name__}: {error})")
    if case.level == "should":
        outcome.soften()
    if limit := limit_of(ctx.server.manifest, case.id):
        outcome.excuse(*limit)
    check_still_serving(ctx, case, outcome, report)
    observed = ", ".join(
        (outcome.observed if case.bad_input or case.records else []) + outcome.notes
    )
    return CaseResult(case.id, outcome.status, outcome.reason, time.monotonic() - started, observed)


def check_still_serving(
    ctx: VerifyContext, case: Case, outcome: Outcome, report: VerifyReport
) -> None:
    """After every case the server must be alive, and after bad input still answering."""
    server = ctx.server
    must_answer = case.bad_input and server.manifest.speaks_http
    if server.poll() is None and (not must_answer or ctx.answers()):
        return
    # A server that stopped answering may be on its way out: tell a crash from a hang.
    wait_for(lambda: server.poll() is not None, EXIT_GRACE_S)
    if server.poll() is not None:
        crash = f"server crashed ({server.exit_status.describe()}) during {case.id}"
        outcome.fail(f"{crash}; log tail: {log_tail(server.log_path, 5)}")
    else:
        crash = f"server stopped answering after {case.id}"
        outcome.fail(crash)
    report.crashes.append(crash)
    server.stop()
    try:
        server.start()
    except ServerError as error:
        report.error = f"could not restart after a crash: {error}"
