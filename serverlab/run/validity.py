"""A finished test's status. The measurement flags (generator-bound, rate shortfall,
errors) are derived from the stored figures by `serverlab.results.report.metrics`, so that the
thresholds live in one place; the runner only adds what it alone saw."""

from __future__ import annotations

from serverlab.results.store import Crash, RecordedTest
from serverlab.run.machine import Pinning


def assess(test: RecordedTest, pinning: Pinning, crash: Crash | None) -> tuple[str, dict]:
    """Returns (status, validity flags) for a test whose engine has finished."""
    flags = dict(test.validity)
    if pinning.shared:
        flags["shared_cpus"] = f"server {pinning.server}, engine {pinning.engine}"
    if crash is not None:
        return "crashed", flags
    if flags.get("generator_lost"):
        # A load that lost part of itself mid-run measured something else than planned.
        return "invalid", flags
    summary = test.summary
    if summary is None or summary.get("valid") is False:
        return "invalid", flags
    return "ok", flags
