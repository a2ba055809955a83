"""The driver of a distributed run: it connects to a Ray cluster, checks that every node
runs the same serverlab and engine, places one generator per `serverlab_loadgen` node
(STRICT_SPREAD) and the server actor on the `serverlab_server` node, and hands each test
plan to the server actor. The runner commits what comes back, as for a local run.

Ray's own processes report usage to outside hosts unless told not to: every connection
made here sets RAY_USAGE_STATS_ENABLED=0 first.

When a node dies, each of its Ray agents sends every driver the last 20 lines of the node's
raylet log (its `[state-dump]` of event counters, and more), some 45 lines in the middle of
a run's progress. The driver prints Ray's messages cut before that tail, and each message
once: the run says itself which generator was lost, and the tail stays in the node's log.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import re
import time
from dataclasses import dataclass, field

from serverlab.base.paths import CONTESTANTS_ENV
from serverlab.cluster.actors import Generator, Server
from serverlab.cluster.errors import ClusterError
from serverlab.cluster.version import mismatches, node_version
from serverlab.results.records import RecordedTest
from serverlab.run.execution.executor import Environment, new_test
from serverlab.run.execution.testplan import TestPlan

SERVER_RESOURCE = "serverlab_server"
LOADGEN_RESOURCE = "serverlab_loadgen"
PLACEMENT_TIMEOUT_S = 60
CALL_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15
POLL_S = 0.5
# Ray's message on a dead raylet ends with its log's tail (ray/_private/process_watcher.py).
RAYLET_LOG_TAIL = re.compile(r"\s*Last \d+ lines of the Raylet logs:.*", re.DOTALL)
STATE_DUMP = "[state-dump]"
SAME_MESSAGE_S = 30.0


@dataclass
class Cluster:
    address: str
    server: object
    generators: list
    placement: object
    nodes: dict[str, dict] = field(default_factory=dict)  # node address -> its version
    server_address: str = ""
    generator_addresses: list[str] = field(default_factory=list)

    def metadata(self) -> dict:
        return {
            "ray_address": self.address,
            "server": self.server_address,
            "generators": list(self.generator_addresses),
            "nodes": self.nodes,
        }


def connect(address: str) -> None:
    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    if not ray.is_initialized():
        ray.init(
            address=address,
            logging_level="ERROR",
            log_to_driver=False,
            namespace="serverlab",
            configure_logging=False,
        )
        _print_ray_messages_without_log_tails()


def without_log_tail(message: str) -> str:
    """Ray's message to the driver without a dead raylet's log tail, nor any line of its
    state dump; empty when nothing else is left."""
    cut = RAYLET_LOG_TAIL.sub(" (its log: raylet.out in that node's Ray session folder)", message)
    return "\n".join(line for line in cut.splitlines() if STATE_DUMP not in line).strip()


def _print_ray_messages_without_log_tails() -> None:
    """Wraps Ray's printer of the messages it sends the driver (the one function its
    listener thread calls for them, ray 2.60.0 as pinned) with `without_log_tail`."""
    from ray._private import worker

    printer = worker.print_to_stdstream
    if getattr(printer, "printed", None) is not None:
        return  # wrapped already
    printed: dict[str, float] = {}  # message -> when it was printed

    def print_cut(data: dict, ignore_prefix: bool) -> None:
        now = time.monotonic()
        lines = [without_log_tail(line) for line in data.get("lines", [])]
        # Each of a dead node's agents sends the same message: it is printed once.
        lines = [m for m in lines if m and now - printed.get(m, -math.inf) > SAME_MESSAGE_S]
        printed.update((message, now) for message in lines)
        if lines:
            printer({**data, "lines": lines}, ignore_prefix=ignore_prefix)

    print_cut.printed = printed  # type: ignore[attr-defined]
    worker.print_to_stdstream = print_cut


def open_cluster(
    address: str, generators: int | None, allowed: set[str], with_server: bool = True
) -> Cluster:
    """Connects, checks versions, places the actors (the server's only `with_server`);
    ClusterError when the cluster cannot run a test as asked. `allowed` are the only
    addresses load may be sent to."""
    import ray
    from ray.util.placement_group import placement_group

    connect(address)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    _check_versions(nodes)
    loadgen = [n for n in nodes if n["Resources"].get(LOADGEN_RESOURCE)]
    servers = [n for n in nodes if n["Resources"].get(SERVER_RESOURCE)]
    wanted = generators or len(loadgen)
    if with_server and not servers:
        raise ClusterError(f"no node has the {SERVER_RESOURCE} resource")
    if wanted < 1 or wanted > len(loadgen):
        raise ClusterError(
            f"{wanted} generators asked for, {len(loadgen)} nodes have {LOADGEN_RESOURCE}"
        )
    group = placement_group([{LOADGEN_RESOURCE: 1}] * wanted, strategy="STRICT_SPREAD")
    try:
        ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
    except Exception as error:
        raise ClusterError(f"cannot place {wanted} generators one per node: {error}") from None
    cluster = _place(address, group, wanted, with_server)
    cluster.nodes = {n["NodeManagerAddress"]: n.get("version", {}) for n in nodes}
    if with_server:
        _check_addresses(cluster, allowed)
    return cluster


def _place(address: str, group, wanted: int, with_server: bool) -> Cluster:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    generator_class = ray.remote(Generator)
    server_class = ray.remote(Server)
    generators = [
        generator_class.options(
            num_cpus=0,
            max_concurrency=4,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, i),
        ).remote()
        for i in range(wanted)
    ]
    server = None
    if with_server:
        server = server_class.options(
            num_cpus=0, max_concurrency=4, resources={SERVER_RESOURCE: 1}
        ).remote(contestants=os.environ.get(CONTESTANTS_ENV))
    actors = [a for a in [server, *generators] if a is not None]
    described = ray.get([a.describe.remote() for a in actors], timeout=CALL_TIMEOUT_S)
    return Cluster(
        address,
        server,
        generators,
        group,
        server_address=described[0]["address"] if server else "",
        generator_addresses=[d["address"] for d in described[1 if server else 0 :]],
    )


def _check_versions(nodes: list[dict]) -> None:
    """Every node's serverlab commit and engine binary, asked on that node; a run across
    nodes that differ is refused before any test starts, naming the node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(node_version)
    refs = {
        node["NodeManagerAddress"]: probe.options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote()
        for node in nodes
    }
    versions = dict(zip(refs, ray.get(list(refs.values()), timeout=CALL_TIMEOUT_S), strict=True))
    for node in nodes:
        node["version"] = versions[node["NodeManagerAddress"]]
    problems = mismatches(versions)
    if problems:
        raise ClusterError("nodes differ, nothing was run: " + "; ".join(problems))


def _check_addresses(cluster: Cluster, allowed: set[str]) -> None:
    address = ipaddress.ip_address(cluster.server_address)
    if not address.is_loopback and cluster.server_address not in allowed:
        raise ClusterError(
            f"the server node is {cluster.server_address}, which is neither a host of a lab "
            f"serverlab made nor in --cluster-hosts: no load is sent there"
        )


def executor_for(cluster: Cluster):
    """The runner's `execute` for this cluster: the plan goes to the server actor."""

    def execute(plan: TestPlan, env: Environment) -> RecordedTest:
        import ray
        from ray.exceptions import RayError, RayTaskError

        reference = cluster.server.execute.remote(plan.to_json(), cluster.generators)
        try:
            while not ray.wait([reference], timeout=POLL_S)[0]:
                pass
            test = ray.get(reference)
        except KeyboardInterrupt:
            stop(cluster)
            raise
        except RayTaskError as error:
            # The server host is there but our code on it raised: say what, not "lost".
            test = new_test(plan, env)
            test.status = "invalid"
            test.validity = {"server_error": _last_line(error)}
        except RayError as error:
            test = new_test(plan, env)
            test.status = "invalid"
            test.validity = {"server_node_lost": str(error).splitlines()[0][:500]}
        test.run_id = env.run_id
        if test.validity.get("generator_lost"):
            _drop_lost(cluster)
        return test

    return execute


def _drop_lost(cluster: Cluster) -> None:
    """Keeps the generators that still answer, so that the suite goes on with them."""
    import ray
    from ray.exceptions import RayError

    kept, addresses = [], []
    for generator, address in zip(cluster.generators, cluster.generator_addresses, strict=True):
        with contextlib.suppress(RayError):
            ray.get(generator.describe.remote(), timeout=STOP_TIMEOUT_S)
            kept.append(generator)
            addresses.append(address)
    cluster.generators, cluster.generator_addresses = kept, addresses


def stop(cluster: Cluster) -> None:
    """Stops every engine and server the actors started, on every node, then the actors."""
    import ray
    from ray.exceptions import RayError

    actors = [a for a in [cluster.server, *cluster.generators] if a is not None]
    pending = [a.kill_everything.remote() for a in actors]
    with contextlib.suppress(RayError, TimeoutError):
        ray.get(pending, timeout=STOP_TIMEOUT_S)
    for actor in actors:
        with contextlib.suppress(RayError):
            ray.kill(actor)


def close(cluster: Cluster) -> None:
    from ray.util.placement_group import remove_placement_group

    stop(cluster)
    with contextlib.suppress(Exception):
        remove_placement_group(cluster.placement)


def _last_line(error: Exception) -> str:
    """The raising line of a remote traceback (Ray's text starts with where it ran)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:500]
