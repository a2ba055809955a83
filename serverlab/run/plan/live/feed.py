"""The runner's progress hooks as live events (serverlab.run.plan.live.events).

A `LiveFeed` takes the same calls as the terminal's progress display (begin, test_started,
interval, sample, test_finished, end) from the runner's threads and only queues them; its
own thread, pinned to the generator's CPUs, turns them into events. Interval lines come
from the runner's load (local engine lines as they arrive); a test whose lines did not come
as it ran (a `--ray` run's generators return theirs at its end) sends the merged ones it
recorded when it finishes, so either way each point goes out once. A push test's emit
cycles come the same way: each interval line lists the cycles whose deliveries it received
(engine output version 8), added up here per cycle so far; at the test's end its emit
records (merged, for a spread run) replace them. The table of finished cells is the
report's own summary rows (serverlab.results.report.summary)."""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path

from serverlab.base.paramtext import params_text
from serverlab.base.spec import PUSH_BEHAVIOURS
from serverlab.results.records import RecordedTest
from serverlab.results.report.cells.scenarios import scenario_labels
from serverlab.results.report.figures.table import METRICS_BY_NAME
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.report.summary import TERMINAL_METRICS, scenario_groups, summary_rows
from serverlab.run.execution.testplan import TestPlan
from serverlab.run.plan.live.events import EventLog

# The monitor samples at 10 Hz; the page gets one sample a second.
SAMPLE_EVERY_S = 1.0
SIDE_FILE = "live.jsonl"
# Cycles of the test in hand kept so far (the newest): the engine's own bound on emit lines.
MAX_CYCLES = 10_000


def pin_thread(cpus: str | None) -> None:
    """The calling thread onto `cpus` (pid 0: this thread only; threads it starts inherit
    it). The generator's CPUs: the live page never takes the server's."""
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",") if c})


def plan_view(plan: TestPlan) -> dict:
    return {
        "scenario": plan.scenario,
        "contestant": plan.contestant,
        "repeat": plan.repeat + 1,
        "params": plan.params,
        "tunables": plan.tunables,
        "estimate_s": plan.estimate_s,
        "budget_s": plan.budget_s,
        "push": plan.params.get("behaviour") in PUSH_BEHAVIOURS,
    }


class LiveFeed:
    def __init__(self, log: EventLog, cpus: str | None, run_id=lambda: None):
        self.log = log
        self.cpus = cpus
        self.run_id = run_id  # read at begin: the runner numbers its run just before
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._last_sample = 0.0
        self._done: list[RecordedTest] = []
        self._streamed = 0  # interval lines of the test in hand that came as it ran
        self._sampled = 0  # and monitor samples
        self._step_start = self._step_end = 0.0  # where the load's step in hand began, ended
        self._cycles = CyclesSoFar()
        self._thread = threading.Thread(target=self._work, name="serverlab-live-feed", daemon=True)
        self._thread.start()

    # The progress display's calls, from the runner's threads: queued only.
    def begin(self, plans: list[TestPlan], skipped: int) -> None:
        self._queue.put(("begin", plans, skipped))

    def test_started(self, index: int, plan: TestPlan) -> None:
        self._queue.put(("started", index, plan, time.time()))

    def interval(self, record: dict) -> None:
        self._queue.put(("interval", record))

    def sample(self, sample) -> None:
        now = time.monotonic()
        # A sample without the CPU (not read that tick) waits for one that has it.
        if sample.cpu_percent is not None and now - self._last_sample >= SAMPLE_EVERY_S:
            self._last_sample = now
            self._queue.put(("sample", sample.cpu_percent, sample.rss_bytes))

    def test_finished(self, test: RecordedTest) -> None:
        self._queue.put(("finished", test, time.time()))

    def end(self) -> None:
        self._queue.put(("end",))
        self._thread.join(timeout=10)

    def _work(self) -> None:
        pin_thread(self.cpus)
        while True:
            kind, *args = self._queue.get()
            if kind == "end":
                self.log.add("end", at=time.time())
                self.log.close()
                return
            try:
                getattr(self, f"_{kind}")(*args)
            except Exception as error:  # noqa: BLE001 (the page is told; the run goes on)
                self.log.add("problem", text=f"the live feed failed on {kind}: {error!r}")

    def _begin(self, plans: list[TestPlan], skipped: int) -> None:
        self.log.add(
            "begin",
            run_id=self.run_id(),
            at=time.time(),
            skipped=skipped,
            tests=[{"label": _label(p), "estimate_s": p.estimate_s} for p in plans],
        )

    def _started(self, index: int, plan: TestPlan, at: float) -> None:
        self._streamed = self._sampled = 0
        self._step_start = self._step_end = 0.0
        self._cycles = CyclesSoFar()
        self.log.add("started", index=index, at=at, label=_label(plan), plan=plan_view(plan))

    def _interval(self, record: dict) -> None:
        self._streamed += 1
        point = interval_point(record)
        # A capacity search's steps are engine runs of their own, each counting from 0:
        # on the page they follow one another.
        if point["t"] is not None:
            if point["t"] <= self._step_end - self._step_start:
                self._step_start = self._step_end
            point["t"] += self._step_start
            self._step_end = point["t"]
        point["cycles"] = self._cycles.add(record.get("cycles") or [])
        self.log.add("interval", **point)

    def _sample(self, cpu: float | None, rss: int | None, at: float | None = None) -> None:
        self._sampled += 1
        self.log.add("sample", at=at or time.time(), cpu_percent=cpu, rss_bytes=rss)

    def _finished(self, test: RecordedTest, at: float) -> None:
        self._done.append(test)
        # Lines that did not come as it ran (a spread run's, merged at its end) come now.
        late = [] if self._streamed else [interval_point(i.data) for i in test.intervals]
        if not self._sampled:  # the server's monitor ran elsewhere (a spread run's server host)
            for sample in _per_second(test):
                self._sample(sample.cpu_percent, sample.rss_bytes, _sample_time(test, sample))
        self.log.add(
            "finished",
            at=at,
            status=test.status,
            flags=[f.text for f in validity_flags(test)],
            # A push test's p50 and p99 are its delivery delay's.
            p50_ms=_percentile(test, "p50"),
            p99_ms=_percentile(test, "p99"),
            intervals=late,
            cycles=cycle_points(test),
        )
        self.log.add("cells", rows=cell_rows(self._done))


def _percentile(test: RecordedTest, name: str) -> float | None:
    """A finished test's request latency or, for a push test, delivery delay (ms)."""
    latency, delay = METRICS_BY_NAME[name], METRICS_BY_NAME[f"delay_{name}"]
    return (latency if latency.applies(test) else delay).of(test)


def _per_second(test: RecordedTest) -> list:
    """The test's recorded monitor samples, one a second (the first of each second)."""
    kept, last = [], None
    for sample in test.samples:
        if last is None or sample.t - last >= SAMPLE_EVERY_S:
            kept.append(sample)
            last = sample.t
    return kept


def _sample_time(test: RecordedTest, sample) -> float:
    """A recorded sample's Unix time: its monitor's start (stored in run_info) plus `t`."""
    return test.started_at + float(test.run_info.get("monitor_t0_s") or 0) + sample.t


def _label(plan: TestPlan) -> str:
    dims = params_text(plan.params, leave_out=("pacer",))
    return f"{plan.scenario} {plan.contestant} {dims} r{plan.repeat + 1}".strip()


def interval_point(record: dict) -> dict:
    """One interval line as the charts draw it: answered requests per second, push events
    received in the interval, failed attempts (every error kind added), and the p50 and p99
    in ms of the latencies answered and of the push delays received in the interval (the
    engine's interval histograms; None when the interval had none)."""
    errors = record.get("errors") or {}
    return {
        "t": record.get("elapsed_s"),
        "rps": record.get("rps"),
        "events": record.get("events"),
        "errors": sum(v for v in errors.values() if isinstance(v, int | float)),
        "open": record.get("open_connections"),
        **{
            f"{name}_{q}_ms": _ms(record.get(f"{field}_{q}_us"))
            for name, field in (("latency", "latency"), ("delay", "event_delay"))
            for q in ("p50", "p99")
        },
    }


def _ms(us: object) -> float | None:
    return us / 1000 if isinstance(us, int | float) else None


def cycle_points(test: RecordedTest) -> list[dict]:
    """A push test's emit cycles as the engine recorded each over the whole test (its emit
    records): completeness (deliveries received of the server's connections.total) and the
    last delivery's delay after the event was created, both on the server's clock."""
    return [
        _cycle_point(c.event, c.seq, c.received, c.total, c.last_arrival_ms - c.created_ms)
        for c in test.cycles
    ]


def _cycle_point(event: str, seq: int, received: int, total: int, last_ms: float) -> dict:
    return {
        "event": event,
        "seq": seq,
        "completeness": 100 * received / total if total else None,
        "last_delay_ms": last_ms,
    }


class CyclesSoFar:
    """A push test's emit cycles so far, from the cycles its interval lines list: per
    (event, seq), the deliveries received so far, the server's connections.total, and the
    longest delay so far, which is the last delivery's (a cycle's deliveries share their
    `created`; the engine reads delays at the server's millisecond grain)."""

    def __init__(self) -> None:
        self._cycles: dict[tuple[str, int], tuple[int, int, int]] = {}

    def add(self, ticks: list[dict]) -> list[dict]:
        """Adds one interval line's cycles; returns the points of those cycles so far."""
        points = []
        for tick in ticks:
            key = (tick["event"], tick["seq"])
            received, total, longest = self._cycles.pop(key, (0, 0, 0))
            mine = (
                received + tick["received"],
                max(total, tick["total"]),
                max(longest, tick["max_delay_us"]),
            )
            self._cycles[key] = mine  # re-inserted: the dict's first key is the stalest
            points.append(_cycle_point(*key, mine[0], mine[1], mine[2] / 1000))
        while len(self._cycles) > MAX_CYCLES:
            del self._cycles[next(iter(self._cycles))]
        return points


def cell_rows(tests: list[RecordedTest]) -> list[dict]:
    """The finished tests' summary rows: per scenario, contestant and tunables, the median
    of each figure over the repeats so far, its interval and n, and the flags."""
    labels = scenario_labels(tests)
    rows = []
    for key, group in scenario_groups(tests).items():
        for row in summary_rows(group, {}, scenarios=labels):
            figures = {cell.metric.name: cell for cell in row.figures}
            rows.append(
                {
                    "scenario": labels[key],
                    "contestant": row.contestant,
                    "tunables": row.tunables,
                    "counts": row.counts,
                    "figures": [_figure(figures[name]) for name in TERMINAL_METRICS],
                    "flags": row.flags,
                }
            )
    return rows


def _figure(cell) -> dict:
    median, interval = cell.text()
    return {
        "metric": cell.metric.label,
        "unit": cell.metric.unit,
        "median": median,
        "interval": interval,
    }


def side_file(work_folder: Path) -> Path:
    """Where a run writes its live events: its own work folder, removed when it ends."""
    work_folder.mkdir(parents=True, exist_ok=True)
    return work_folder / SIDE_FILE
