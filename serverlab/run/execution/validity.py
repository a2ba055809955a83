"""A finished test's status. The measurement flags (generator-bound, rate shortfall,
errors) are derived from the stored figures by `serverlab.results.report.figures.table`, so that the
thresholds live in one place; the runner only adds what it alone saw."""

from __future__ import annotations

from serverlab.results.records import Crash, RecordedTest
from serverlab.run.host.machine import Pinning

# Other processes' CPU over the load window above this share of one core: the test ran on
# a busy machine (`machine-busy`), and `serverlab run --rerun-busy N` runs it again.
MACHINE_BUSY_PERCENT = 15.0


def assess(test: RecordedTest, pinning: Pinning, crash: Crash | None) -> tuple[str, dict]:
    """Returns (status, validity flags) for a test whose engine has finished."""
    flags = dict(test.validity)
    if pinning.shared:
        flags["shared_cpus"] = f"server {pinning.server}, engine {pinning.engine}"
    flags.update(kernel_flags(test.run_info.get("kernel")))
    if crash is not None:
        return "crashed", flags
    if flags.get("generator_lost"):
        # A load that lost part of itself mid-run measured something else than planned.
        return "invalid", flags
    summary = test.summary
    if summary is None or summary.get("valid") is False:
        return "invalid", flags
    return "ok", flags


def kernel_flags(kernel: dict | None) -> dict:
    """The load window's flags: a failed read of /proc, or a busy machine."""
    if not kernel:
        return {}
    if kernel.get("error"):
        return {"kernel_read_failed": kernel["error"]}
    other = kernel.get("other_cpu_percent")
    if other is not None and other > MACHINE_BUSY_PERCENT:
        return {"machine_busy": f"{other:.0f} % of a core"}
    return {}
