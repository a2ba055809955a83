"""What an attack costs the server per unit of what it costs the client (issue 35): for each
attack group of a test beside a probe (sections.attacks), the server's CPU seconds over the
attack's window above its rate before the first attack (the monitor's /proc samples of the
server's process tree, kernel), and the RSS and descriptors it gained (the window's highest
sample less the last before the attack), beside the client's cost: the engine's CPU over the
same window above its own rate before (the monitor's samples of the engine process: the
engine's CPU is per process, not per group, so the probe's share is taken off by that rate,
not measured apart), and the attack group's own connections opened, HTTP/2 streams opened
and bytes written (the engine's summary of that group). Samples are laid on the load's
clock by `run_info["load_started_s"]`, where the load started on the monitor's clock; a
test without it (recorded before it was kept) has no amplification row."""

from __future__ import annotations

from dataclasses import dataclass

from serverlab.results.records import MonitorSample, RecordedTest
from serverlab.results.report.cells.cell import tunable_text
from serverlab.results.report.charts.chart import test_label
from serverlab.results.report.sections.attacks import attack_windows


@dataclass(frozen=True)
class Cost:
    """One side's figures over one attack's window."""

    cpu_s: float | None  # above its rate before the first attack
    rss_bytes: int | None = None  # gained
    fds: int | None = None  # gained


@dataclass(frozen=True)
class AmplificationRow:
    test: str
    tunables: str
    attack: str
    window: str
    server: Cost
    client: Cost
    connections: int | None
    streams: int | None
    bytes_written: int | None

    def as_dict(self) -> dict:
        return {
            "test": self.test,
            "tunables": self.tunables,
            "attack": self.attack,
            "window": self.window,
            "server_cpu_s": _number(self.server.cpu_s, "{:.3f}"),
            "client_cpu_s": _number(self.client.cpu_s, "{:.3f}"),
            "cpu_ratio": _ratio(self.server.cpu_s, self.client.cpu_s, "{:.2g}"),
            "rss_mib": _number(_mib(self.server.rss_bytes), "{:+.1f}"),
            "fds": _number(self.server.fds, "{:+d}"),
            "connections": _number(self.connections, "{:,}"),
            "streams": _number(self.streams, "{:,}"),
            "kib_written": _number(_kib(self.bytes_written), "{:,.0f}"),
            "cpu_ms_per_connection": _ratio(_ms(self.server.cpu_s), self.connections, "{:.3g}"),
            "cpu_us_per_stream": _ratio(_us(self.server.cpu_s), self.streams, "{:.3g}"),
            "rss_kib_per_connection": _ratio(
                _kib(self.server.rss_bytes), self.connections, "{:.3g}"
            ),
        }


def amplification_rows(tests: list[RecordedTest]) -> list[AmplificationRow]:
    return [row for test in tests for row in _rows(test)]


def _rows(test: RecordedTest) -> list[AmplificationRow]:
    started = test.run_info.get("load_started_s")
    windows = attack_windows(test)
    if not isinstance(started, int | float) or not windows or not test.samples:
        return []
    samples = sorted(test.samples, key=lambda sample: sample.t)
    first_s = windows[0][2]
    groups = (test.summary or {}).get("groups") or {}
    rows = []
    for name, kind, start, stop in windows:
        group = groups.get(name) or {}
        span = (started + start, started + stop)
        rows.append(
            AmplificationRow(
                test=test_label(test),
                tunables=tunable_text(test),
                attack=f"{name} ({kind})",
                window=f"{start:g}-{stop:g} s",
                server=Cost(
                    _excess(samples, "cpu_percent", started, started + first_s, span),
                    _gained(samples, "rss_bytes", span),
                    _gained(samples, "fds", span),
                ),
                client=Cost(
                    _excess(samples, "engine_cpu_percent", started, started + first_s, span)
                ),
                connections=group.get("connections_opened"),
                streams=group.get("streams_opened"),
                bytes_written=group.get("bytes_written"),
            )
        )
    return rows


def _cpu_s(samples: list[MonitorSample], field: str, start: float, stop: float) -> tuple:
    """CPU seconds from one field's samples (% of a core over the time since the sample
    before) ending in (start, stop], and the seconds they cover."""
    used = covered = 0.0
    for before, sample in zip(samples, samples[1:], strict=False):
        value = getattr(sample, field)
        if start < sample.t <= stop and value is not None:
            dt = sample.t - before.t
            used, covered = used + value / 100 * dt, covered + dt
    return used, covered


def _excess(samples, field: str, base_from: float, base_to: float, span) -> float | None:
    """CPU seconds over the span above the rate the field's samples had before the first
    attack (the probe's alone)."""
    used, covered = _cpu_s(samples, field, *span)
    base, base_covered = _cpu_s(samples, field, base_from, base_to)
    if not covered or not base_covered:
        return None
    return used - base / base_covered * covered


def _gained(samples: list[MonitorSample], field: str, span) -> int | None:
    """The window's highest sample of the field less the last one before it."""
    before = [getattr(s, field) for s in samples if s.t <= span[0]]
    during = [getattr(s, field) for s in samples if span[0] < s.t <= span[1]]
    during = [v for v in during if v is not None]
    if not before or before[-1] is None or not during:
        return None
    return max(during) - before[-1]


def _mib(value: int | None) -> float | None:
    return None if value is None else value / 2**20


def _kib(value: int | None) -> float | None:
    return None if value is None else value / 1024


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000


def _us(value: float | None) -> float | None:
    return None if value is None else value * 1e6


def _number(value, form: str) -> str:
    return "-" if value is None else form.format(value)


def _ratio(top: float | None, bottom: float | int | None, form: str) -> str:
    """top / bottom, or "-" where either is missing or not above zero: a server whose CPU
    over the attack was not above its rate before (a JIT still compiling through the
    baseline, the machine's noise) has no cost per unit to state."""
    if top is None or top <= 0 or not bottom or bottom <= 0:
        return "-"
    return form.format(top / bottom)
