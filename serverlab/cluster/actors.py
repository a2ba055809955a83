"""The two actors of a distributed test, each on the node that has its role's resource.

`Generator` (one per `serverlab_loadgen` node) checks its part of the plan, measures its
clock against the server's, and runs one engine at the instant it is given. A TLS part
comes with its CA certificate's PEM text (the CA file it names is on the server's host):
the generator trusts its own copy, in its work folder, deleted after the run. `Server` (on
the `serverlab_server` node) runs the executor there, as a local run would: the contestant
on this host's loopback and its lab or cluster address, the monitor, the control calls
(which the spec answers from loopback only), with the load coming from the generators.

Both are threaded (a second call can stop the first), and everything they start carries
their worker's owner mark, so that `stop` finds it all.
"""

from __future__ import annotations

import contextlib
import os
import signal

from serverlab.base import owner, scratch
from serverlab.base.httpclient import HttpError
from serverlab.base.paths import CONTESTANTS_ENV
from serverlab.base.tlskeys import CaPemError, certificate_pem
from serverlab.cluster import clock
from serverlab.cluster.version import node_version
from serverlab.contestant.manifest import find
from serverlab.results.records import RecordedTest
from serverlab.run.execution.engine import (
    EngineError,
    EngineRun,
    check_plans,
    engine_command,
    write_plan,
)
from serverlab.run.execution.executor import Environment, execute
from serverlab.run.execution.testplan import TestPlan
from serverlab.run.host.machine import Pinning

# Seconds past its planned end a generator's engine may run before it is stopped.
ENGINE_GRACE_S = 30.0
# The generator's copy of the CA a TLS part trusts, in its work folder.
CA_COPY = "tls-ca.pem"


def _address() -> str:
    import ray

    return ray.util.get_node_ip_address()


class Generator:
    """One engine on this node, for one part of each test's load."""

    def __init__(self):
        self.workdir = scratch.make("generator-")
        self.engine: EngineRun | None = None

    def describe(self) -> dict:
        return {**node_version(), "address": _address(), "pid": os.getpid()}

    def prepare(
        self,
        plan: dict,
        host: str,
        port: int,
        clock_required: bool = True,
        ca_pem: str | None = None,
    ) -> dict:
        """The engine's verdict on this part of the plan, and this host's clock against the
        server's (NTP-style, through /timestamp). `ca_pem`: see `run`."""
        (verdict,) = check_plans([self._own_ca(plan, ca_pem)])
        if not verdict.get("ok"):
            raise EngineError(f"generator {_address()} refuses its plan: {verdict['error']}")
        try:
            offset = clock.measure(host, port)
        except (clock.ClockError, HttpError, OSError):
            # An ad-hoc target may have no /timestamp (an HTTPS port closes on plain HTTP).
            if clock_required:
                raise
            offset = clock.unknown()
        return {
            "address": _address(),
            "offset_ms": offset.offset_ms,
            "uncertainty_ms": offset.uncertainty_ms,
            "round_trip_ms": offset.round_trip_ms,
        }

    def run(self, plan: dict, budget_s: float, ca_pem: str | None = None) -> dict:
        """Runs the engine on this part of the plan until it ends (or `budget_s` more than
        planned); returns its output lines and the tail of its stderr. `ca_pem`: the PEM
        text of the CA a TLS part trusts, which the engine reads from a copy here."""
        try:
            path = write_plan(self._own_ca(plan, ca_pem), self.workdir / "plan.json")
            self.engine = EngineRun(engine_command(path, cpus=None))
            self.engine.start()
            self.engine.wait(budget_s)
        finally:
            (self.workdir / CA_COPY).unlink(missing_ok=True)
        engine, self.engine = self.engine, None
        return {
            "address": _address(),
            "intervals": engine.intervals,
            "emits": engine.emits,
            "summary": engine.summary,
            "stderr_tail": engine.stderr_tail,
        }

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.stop()

    def _own_ca(self, plan: dict, ca_pem: str | None) -> dict:
        """The plan trusting this generator's copy of its CA, written from `ca_pem`: the
        file the plan names is on the server's host. EngineError if the PEM did not come,
        or is anything but certificates."""
        tls = plan.get("tls") or {}
        if not tls.get("ca_file"):
            return plan
        if ca_pem is None:
            raise EngineError(
                f"a TLS plan trusting {tls['ca_file']} came without that CA's PEM: a"
                " generator on another host has no such file"
            )
        try:
            certificate_pem(ca_pem, "the CA sent with the plan")
        except CaPemError as err:
            raise EngineError(str(err)) from None
        copy = self.workdir / CA_COPY
        copy.write_text(ca_pem, encoding="ascii")  # a certificate: public
        return {**plan, "tls": {**tls, "ca_file": str(copy)}}

    def kill_everything(self) -> int:
        return _kill_owned()


class Server:
    """The contestant's host: the executor runs here, on the plans the driver sends."""

    def __init__(self, server_cpus: str | None = None, contestants: str | None = None):
        if contestants:
            # The driver's contestants folder, when it names one (tests do).
            os.environ[CONTESTANTS_ENV] = contestants
        self.workdir = scratch.make("server-") / "work"
        self.cpus = server_cpus or ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))

    def describe(self) -> dict:
        return {**node_version(), "address": _address(), "pid": os.getpid()}

    def execute(
        self, plan_json: str, generators: list, server_cpus: str | None = None
    ) -> RecordedTest:
        from serverlab.cluster.traffic import RayLoad

        plan = TestPlan.from_json(plan_json)
        env = Environment(
            manifest_of=find,
            pinning=Pinning(server=server_cpus or self.cpus, engine=""),
            workdir=self.workdir,
            load=RayLoad(generators, _address()),
            host=_address(),
        )
        return execute(plan, env)

    def kill_everything(self) -> int:
        return _kill_owned()


def _kill_owned() -> int:
    """SIGKILLs every process this worker started (servers, engines and their children)
    and removes its scratch folders: the actor is killed next, so no exit hook of the
    worker would run."""
    mine = [pid for pid in owner.owned_by(owner.token()) if pid != os.getpid()]
    for pid in mine:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    scratch.remove_own()
    return len(mine)
