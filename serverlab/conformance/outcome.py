"""The result of one conformance case: PASS, WARN or FAIL, with the reasons."""

from dataclasses import dataclass, field

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


class CaseAborted(Exception):
    """Raised by a check that cannot go on; the runner records it as a FAIL."""


@dataclass
class Outcome:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What the server did (e.g. "403"), for reports of how each server meets bad input.
    observed: list[str] = field(default_factory=list)
    # What a check measured (e.g. how many streams it held), shown whatever its status.
    notes: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        self.failures.append(reason)

    def warn(self, reason: str) -> None:
        self.warnings.append(reason)

    def require(self, condition: bool, reason: str) -> bool:
        """Records a failure unless `condition`; returns the condition."""
        if not condition:
            self.fail(reason)
        return condition

    def abort(self, reason: str):
        raise CaseAborted(reason)

    def soften(self) -> None:
        """A SHOULD case: its failures are warnings."""
        self.warnings = self.failures + self.warnings
        self.failures = []

    def excuse(self, table: str, label: str, reason: str) -> None:
        """A failure or warning the contestant's manifest explains (`framing_limits`,
        `protocol_limits`) is one warning that gives the reason, then what the check saw;
        passing anyway is a warning that the entry is stale."""
        deviations = self.failures + self.warnings
        if not deviations:
            self.warn(f"passes, yet the manifest's {table} lists it: drop the entry")
            return
        self.warnings = [f"{label}: {reason} [{'; '.join(deviations)}]"]
        self.failures = []

    @property
    def status(self) -> str:
        if self.failures:
            return FAIL
        return WARN if self.warnings else PASS

    @property
    def reason(self) -> str:
        return "; ".join(self.failures or self.warnings)


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    status: str
    reason: str
    seconds: float
    observed: str = ""

    def as_dict(self) -> dict:
        return {
            "case": self.case_id,
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "observed": self.observed,
        }
