"""Plan stage: the tests whose protocol a contestant or the engine cannot speak, found
before anything runs. A TLS test for a contestant that does not claim `tls` (or an RFC 5425
flood for one without `syslog-tls`), and any HTTP/2 test while the engine has no HTTP/2,
is refused with its reason, listed by the dry run and the run as the descriptor refusals
are (serverlab.run.plan.descriptors). Pure: what the engine speaks is the caller's to give.
"""

from __future__ import annotations

from collections.abc import Callable

from serverlab.contestant.manifest import Manifest
from serverlab.run.execution.testplan import TestPlan
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


def refusal(plan: TestPlan, manifest: Manifest, engine_h2: bool) -> str | None:
    """Why this test cannot run for want of a protocol, or None."""
    p = plan.params
    transport = p.get("transport")
    if transport in HTTP2 and not engine_h2:
        return (
            f"transport {transport} needs HTTP/2 in the load engine (--h2/--h2c), which "
            "this engine does not have yet"
        )
    for part in _parts(p):
        if part not in manifest.implements:
            return f"{plan.contestant} does not claim the spec part `{part}`"
    for behaviour in _behaviours(p):
        part = ATTACK_PARTS.get(behaviour)
        if part and part not in manifest.implements:
            return f"{plan.contestant} does not claim the spec part `{part}` ({behaviour})"
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


def _behaviours(p: dict) -> list[str]:
    """The test's behaviour and each of its client groups'."""
    groups = p.get(GROUP_KEY) or []
    return [p.get("behaviour", ""), *(g["behaviour"] for g in groups if "behaviour" in g)]


def refuse(
    plans: list[TestPlan], manifest_of: Callable[[str], Manifest], engine_h2: bool
) -> tuple[list[TestPlan], list[Refused]]:
    """(the tests that can run, in order; the refused ones, each with its reason)."""
    kept, refused = [], []
    for plan in plans:
        why = refusal(plan, manifest_of(plan.contestant), engine_h2)
        if why is None:
            kept.append(plan)
        else:
            refused.append(Refused(plan, why))
    return kept, refused
