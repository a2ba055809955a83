"""Plan stage: the tests whose protocol a contestant or the engine cannot speak, found
before anything runs. A TLS test for a contestant that does not claim `tls` (or an RFC 5425
flood for one without `syslog-tls`), and any HTTP/2 test while the engine has no HTTP/2,
is refused with its reason, listed by the dry run and the run as the descriptor refusals
are (serverlab.run.plan.descriptors). A test of client groups runs without the groups the
contestant cannot receive (`left_out`), listed the same way; it is refused when that is
every group. It also says which of the serving modes a run's tests use (`modes_unused`), so
that the run's verify checks those and not the others. Pure: what the engine speaks is the
caller's to give.
"""

from __future__ import annotations

from collections.abc import Callable

from serverlab.base.engine_facts import FACTS, behaviour_paths
from serverlab.contestant.manifest import Manifest
from serverlab.run.execution.testplan import EVENT_SET, TestPlan
from serverlab.run.plan.descriptors import Refused
from serverlab.run.plan.suite.file import GROUP_KEY
from serverlab.run.plan.suite.permutation import HTTP2_TRANSPORTS, SYSLOG_TLS

# transport -> the spec part a contestant must claim to be sent it (spec §12).
TRANSPORT_PARTS = {"tls": "tls", "h2": "h2", "h2c": "h2c"}
# Attacks -> the spec part whose endpoint they attack (a slow POST needs POST /upload, the
# WebSocket attacks an upgrade of /ws): a server without it cannot receive them (issue 35).
ATTACK_PARTS = {
    "slow-upload": "upload",
    "ws-oversized": "websocket",
    "ws-fragments": "websocket",
    "ws-ping-flood": "websocket",
}
HTTP2 = HTTP2_TRANSPORTS
# A gRPC behaviour's transport -> the spec parts it needs: gRPC goes to the server's gRPC
# listener (its own, or its h2c and TLS ports when shared, spec §16), not to its HTTP/2 face.
GRPC_PARTS = {"h2c": ("grpc",), "h2": ("grpc", "tls")}

# The serving modes a run verifies only when one of its tests uses them, by the path its
# behaviour goes to (the engine's facts; syslog has none). Their cases are most of verify's
# time: part by part on go-nethttp here, push 8.0 s, SSE 8.6, WebSocket 6.8, syslog 3.7
# and syslog-parse 4.1 (they wait on emit cycles and counters), against 4.9 s for http,
# perf, files, upload and control together.
MODE_PATHS = {"/push": "push", "/sse": "sse", "/ws": "websocket", None: "syslog"}
MODES = frozenset(MODE_PATHS.values()) | {"syslog-parse"}
BEHAVIOUR_PATHS = behaviour_paths(FACTS)


def modes_unused(plans: list[TestPlan]) -> frozenset[str]:
    """The serving modes none of these tests sends to (a client group's behaviour
    included). A test that sets emitters uses push, whose cases check them, whatever its
    clients subscribe over; WebSocket attacks alone do not (they never subscribe).
    syslog-parse goes with syslog: a server that claims it is verified, and may be run, in
    parse mode."""
    used = set()
    for plan in plans:
        for p in [plan.params, *(plan.params.get(GROUP_KEY) or [])]:
            path = BEHAVIOUR_PATHS.get(p.get("behaviour", ""), "")
            used.add(MODE_PATHS.get(path))
        if any(call.path == EVENT_SET for call in plan.control):
            used.add("push")
    if "syslog" in used:
        used.add("syslog-parse")
    return MODES - used


def refusal(plan: TestPlan, manifest: Manifest, engine_h2: bool) -> str | None:
    """Why this test cannot run for want of a protocol, or None."""
    p = plan.params
    transport = p.get("transport")
    if transport in HTTP2 and not engine_h2:
        return (
            f"transport {transport} needs HTTP/2 in the load engine (--h2/--h2c), which "
            "this engine does not have yet"
        )
    groups = p.get(GROUP_KEY)
    why = _missing(p, manifest) if not groups else None
    if why is None and groups and len(left_out(p, manifest)) == len(groups):
        why = "; ".join(left_out(p, manifest).values())
    return f"{plan.contestant} {why}" if why else None


def left_out(p: dict, manifest: Manifest) -> dict[str, str]:
    """The client groups a contestant cannot receive (name -> why): a test of groups runs
    the others, and the dry run and the run's "Not run" list these (issue 35: nginx is
    sent the HTTP/1.1 attacks though it serves no WebSocket)."""
    out = {}
    for group in p.get(GROUP_KEY) or []:
        why = _missing({**p, **group}, manifest)
        if why:
            out[group["name"]] = why
    return out


def _missing(p: dict, manifest: Manifest) -> str | None:
    """Which spec part a load (a test's, or one group's over the test's) needs and the
    contestant does not claim, or None."""
    for part in _parts(p):
        if part not in manifest.implements:
            return f"does not claim the spec part `{part}`"
    part = ATTACK_PARTS.get(p.get("behaviour", ""))
    if part and part not in manifest.implements:
        return f"does not claim the spec part `{part}` ({p['behaviour']})"
    return None


def _parts(p: dict) -> tuple[str, ...]:
    """The spec parts the test's transport needs of the server."""
    transport = p.get("transport") or ""
    if str(p.get("behaviour", "")).startswith("grpc-"):
        return GRPC_PARTS.get(transport, ("grpc",))
    if p.get("behaviour") == "syslog" and p.get("syslog_transport") == SYSLOG_TLS:
        return ("syslog-tls",)
    part = TRANSPORT_PARTS.get(transport)
    return (part,) if part else ()


def refuse(
    plans: list[TestPlan], manifest_of: Callable[[str], Manifest], engine_h2: bool
) -> tuple[list[TestPlan], list[Refused]]:
    """(the tests that can run, in order; the refused ones, each with its reason)."""
    kept, refused = [], []
    for plan in plans:
        manifest = manifest_of(plan.contestant)
        why = refusal(plan, manifest, engine_h2)
        if why is None:
            kept.append(plan)
            gone = _left_out_of(plan, manifest)
            if gone:
                refused.append(Refused(plan, _left_out_text(plan.contestant, gone), tuple(gone)))
        else:
            refused.append(Refused(plan, why))
    return kept, refused


def _left_out_of(plan: TestPlan, manifest: Manifest) -> dict[str, str]:
    """The groups the contestant cannot receive that the test would otherwise run (a tuned
    test runs none marked `tuned = false` anyway)."""
    gone = left_out(plan.params, manifest)
    if not plan.tunables:
        return gone
    untuned = {g["name"] for g in plan.params.get(GROUP_KEY) or [] if not g.get("tuned", True)}
    return {name: why for name, why in gone.items() if name not in untuned}


def _left_out_text(contestant: str, gone: dict[str, str]) -> str:
    """Why a test runs without some of its groups: the reasons, each once."""
    reasons = dict.fromkeys(f"{contestant} {why}" for why in gone.values())
    return f"the test runs without them: {'; '.join(reasons)}"
