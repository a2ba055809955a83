"""A test's traffic from several generators (serverlab.run.execution.traffic's interface, spread).

Begin: split the plan (serverlab.cluster.split), have each generator check its part and
measure its clock against the server's, pick one start instant on the server's clock, and
start every generator at it, translated to its own clock. A TLS plan's CA file is read here
and its PEM text sent with each part: a generator's host has no such file. Done: every generator has
answered; a generator whose actor or node dies is noted as lost, with when. Finish: the
generators' outputs merged exactly by the engine (interval by interval, histograms added),
each generator's own summary kept beside.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

import ray
from ray.exceptions import RayError

from serverlab.base.tlskeys import CaPemError, read_ca_pem
from serverlab.cluster.errors import ClusterError
from serverlab.cluster.merge import merge
from serverlab.cluster.split import split
from serverlab.run.execution.traffic import LoadResult

# Between the last generator's clock check and the common start: enough for every engine
# to start its threads and wait.
START_DELAY_S = 2.0
# How long a finished load's results may take to arrive.
FINISH_S = 60.0
# A generator above this CPU share was the bottleneck, not the server.
SATURATED_PERCENT = 90.0


class RayLoad:
    # Its generators hand their lines over when they end, too late to end a warm-up phase
    # when the rate is steady: the executor runs a separate warm-up before it instead.
    live_measure = False

    def __init__(self, generators: list, target_host: str, clock_required: bool = True):
        self.generators = generators
        self.target_host = target_host
        # An ad-hoc target may have no /timestamp: then the offsets are taken as zero.
        self.clock_required = clock_required

    def begin(self, plan, workdir, tag, on_interval=None, http_port=None, on_end=None):
        # on_end goes unused: the generators' results arrive once they have all ended, and
        # the executor closes its window when done() says so.
        parts = split(plan, len(self.generators))
        ca_pem = _ca_pem(plan)
        pairs = enumerate(zip(self.generators, parts, strict=True))
        # Each part is checked as it will run: sent to this host, and nowhere else.
        allowed = {"allowed_hosts": [self.target_host]}
        active = [(i, g, {**p, **allowed}) for i, (g, p) in pairs if p]
        # The clock is read through /timestamp: on the HTTP port, whatever the target (a
        # syslog flood's is the syslog port, which would take the request as a message).
        port = http_port or urlsplit(plan["target"]).port
        checks = ray.get(
            [
                g.prepare.remote(p, self.target_host, port, self.clock_required, ca_pem)
                for _, g, p in active
            ]
        )
        start_at_ms = time.time() * 1000 + START_DELAY_S * 1000
        budget_s = _planned_s(plan) + START_DELAY_S + 30.0
        futures, seen = [], []
        for (index, generator, part), check in zip(active, checks, strict=True):
            part = {
                **part,
                # This host's clock is the server's: each generator starts when its own
                # clock says the server's reads start_at_ms.
                "start_at_ms": int(start_at_ms - check["offset_ms"]),
                "clock_offset_ms": check["offset_ms"],
            }
            futures.append(generator.run.remote(part, budget_s, ca_pem))
            seen.append({"index": index, **check, **_numbering(part)})
        return _RayRunning(futures, [g for _, g, _ in active], seen, Path(workdir), tag)


def _ca_pem(plan: dict) -> str | None:
    """The certificate of the CA the plan trusts, as PEM text, read on this host (where the
    run made it, or where the user named it with --tls-ca); None for a plan without one."""
    path = (plan.get("tls") or {}).get("ca_file")
    if not path:
        return None
    try:
        return read_ca_pem(path)
    except CaPemError as err:
        raise ClusterError(str(err)) from None


def _numbering(part: dict) -> dict:
    """A syslog sender's first number (split.py gives each a range of its own), kept with
    its figures so that the receiver's count can be set against each sender's."""
    behaviour = part.get("behaviour", {})
    if behaviour.get("kind") != "syslog" or "seq_start" not in behaviour:
        return {}
    return {"seq_first": behaviour["seq_start"]}


def _planned_s(plan: dict) -> float:
    pacer = plan.get("pacer", {})
    if pacer.get("kind") == "users":
        return float(pacer["ramp_up_s"]) + float(pacer["hold_s"])
    return float(plan.get("duration_s") or 600.0)


class _RayRunning:
    local_pid = None

    def __init__(self, futures, generators, checks, workdir: Path, tag: str):
        self.futures, self.generators, self.checks = futures, generators, checks
        self.workdir, self.tag = workdir, tag
        self.started = time.monotonic()
        self.starts_at = self.started + START_DELAY_S
        self.outputs: dict[int, dict] = {}
        self.lost: dict[int, dict] = {}

    def done(self) -> bool:
        for position, future in enumerate(self.futures):
            if position in self.outputs or position in self.lost:
                continue
            ready, _ = ray.wait([future], timeout=0)
            if ready:
                self._collect(position, future)
        return len(self.outputs) + len(self.lost) == len(self.futures)

    def _collect(self, position: int, future) -> None:
        try:
            output = ray.get(future)
        except RayError as error:
            self._lose(position, str(error).splitlines()[0])
            return
        if output["summary"] is None:
            # An engine that died (killed, out of memory) leaves no summary to merge.
            tail = output["stderr_tail"].strip().splitlines()[-1:] or ["no summary"]
            self._lose(position, f"its engine ended without a summary: {tail[0]}")
            return
        self.outputs[position] = output

    def _lose(self, position: int, why: str) -> None:
        self.lost[position] = {
            "generator": self.checks[position]["index"],
            "address": self.checks[position]["address"],
            "after_s": round(time.monotonic() - self.started, 1),
            "error": why[:300],
        }

    def stop(self) -> None:
        for position, generator in enumerate(self.generators):
            if position not in self.outputs and position not in self.lost:
                generator.stop.remote()

    def finish(self) -> LoadResult:
        deadline = time.monotonic() + FINISH_S
        while not self.done() and time.monotonic() < deadline:
            time.sleep(0.1)
        for position in range(len(self.futures)):
            if position not in self.outputs and position not in self.lost:
                self.lost[position] = {
                    "generator": self.checks[position]["index"],
                    "error": "no answer",
                }
        outputs = [self.outputs[p] for p in sorted(self.outputs)]
        merged = merge(outputs, self.workdir / f"{self.tag}-merge") if outputs else {}
        return LoadResult(
            summary=merged.get("summary"),
            intervals=merged.get("intervals", []),
            emits=merged.get("emits", []),
            stderr_tail="\n".join(o["stderr_tail"] for o in outputs if o["stderr_tail"])[-2000:],
            generators=[self._generator(p) for p in sorted(self.outputs)],
            lost=[self.lost[p] for p in sorted(self.lost)],
        )

    def _generator(self, position: int) -> dict:
        """One generator's own figures: its summary, clock and whether it was saturated."""
        output, check = self.outputs[position], self.checks[position]
        summary = output["summary"] or {}
        duration = summary.get("duration_s") or 0
        # Spinning is CPU a latency-bound engine burns by choice, not saturation.
        working = (summary.get("client_cpu_s") or 0) - (summary.get("spin_cpu_s") or 0)
        cpu = 100 * working / duration if duration else None
        return {
            **check,
            "summary": summary,
            "cpu_percent": None if cpu is None else round(cpu, 1),
            "generator_bound": cpu is not None and cpu > SATURATED_PERCENT,
        }
