"""Another part's cases, carried over TLS, HTTP/2 over TLS, or h2c (spec §12-§14): its
exchanges, and over TLS also the check kinds whose clients follow `ctx.transport`.

A transport is conformant when every part the server claims works over it as it does in
cleartext HTTP/1.1, so the cases are the same ones, judged the same way. Over TLS they run
on serverlab's HTTP/1.1 client wrapped in Python's `ssl`; over HTTP/2 on httpx with its
`h2` extra, a client that shares nothing with the engine. HTTP/1.1-only requests (raw
bytes, chunked bodies, `Connection: close`, oversize headers) and targets httpx would
normalise are not sent over HTTP/2, nor bodies past its initial flow-control window (see
H2_BODY_LIMIT); the case says how many it left out.
"""

import h2.exceptions
import httpx

from serverlab.base import httpclient
from serverlab.conformance.cases import Case, load_cases
from serverlab.conformance.checks.gone import CHECKS as GONE_CHECKS
from serverlab.conformance.checks.push import CHECKS as PUSH_CHECKS
from serverlab.conformance.checks.sse import CHECKS as SSE_CHECKS
from serverlab.conformance.checks.websocket import CHECKS as WEBSOCKET_CHECKS
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.exchange import check_response, request_body, run_steps
from serverlab.conformance.outcome import CaseAborted, Outcome

HTTP1_ONLY = ("raw", "chunks", "header_filler", "close")
# Check kinds whose clients take the TLS port while ctx.transport is "tls"; sent_stamps
# opens a thousand raw sockets of its own on the cleartext port.
OVER_TLS_ALSO = frozenset(
    {
        "longpoll_timeout",
        "longpoll_event",
        "comet_stream",
        "fanout",
        "seq_continues",
        "emitter_replace",
        "emitter_clear_stops",
        "push_stats",
        "gone_subscriber",
        "sse_stream",
        "sse_heartbeat",
        "sse_replay",
        "sse_gap",
        "ws_echo",
        "ws_subscribe",
        "ws_publish",
        "ws_ping",
        "ws_close",
        "ws_deflate_declined",
        "ws_bad_frame",
    }
)
# Their functions, taken from the modules that define them: this module is part of the
# registry of every kind (checks/__init__.py), so it does not read that registry.
_OVER_TLS_CHECKS = {
    kind: {**PUSH_CHECKS, **GONE_CHECKS, **SSE_CHECKS, **WEBSOCKET_CHECKS}[kind]
    for kind in OVER_TLS_ALSO
}
# A body past HTTP/2's initial flow-control window may be answered early (a 413) and its
# stream reset; httpcore then fails the request while sending, before reading the answer.
H2_BODY_LIMIT = 65535


def carried(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Every exchange case of `part` over `transport`, if the server claims that part."""
    part, transport = params["part"], params["transport"]
    if part not in ctx.parts:
        outcome.observed.append(f"{part} not claimed: nothing to carry")
        return
    carried_checks = OVER_TLS_ALSO if transport == "tls" else frozenset()
    cases = [
        case
        for case in load_cases()
        if case.part == part and (case.steps or case.check in carried_checks)
    ]
    left_out = 0
    for case in cases:
        inner = Outcome()
        if transport == "tls":
            _over_tls(ctx, case, inner)
        elif not _over_h2(ctx, case, transport, inner):
            left_out += 1
            continue
        if case.level == "should":  # as in cleartext: a SHOULD case's failures warn
            inner.soften()
        for failure in inner.failures:
            outcome.fail(f"{case.id}: {failure}")
        for warning in inner.warnings:
            outcome.warn(f"{case.id}: {warning}")
    note = f", {left_out} left out (HTTP/1.1 only, or a body past 64 KiB)" if left_out else ""
    outcome.observed.append(f"{len(cases) - left_out} {part} cases over {transport}{note}")


def _carried_id(transport: str, case: Case) -> str:
    """`tls.sse.stream`: event names come from the case id (VerifyContext.event_name), and a
    server's seq numbers never reset, so the carried case must not reuse the cleartext one's."""
    return f"{transport}.{case.id}"


def _over_tls(ctx: VerifyContext, case: Case, outcome: Outcome) -> None:
    ctx.transport, ctx.case_id = "tls", _carried_id("tls", case)
    try:
        if case.steps:
            run_steps(ctx, case.steps, outcome)
        else:
            _OVER_TLS_CHECKS[case.check](ctx, case.params, outcome)
    except (httpclient.HttpError, CaseAborted, OSError) as error:
        outcome.fail(str(error))
    finally:
        ctx.transport = "tcp"


def _over_h2(ctx: VerifyContext, case: Case, transport: str, outcome: Outcome) -> bool:
    """Runs the case over HTTP/2; False if it cannot be said in HTTP/2."""
    ctx.case_id = _carried_id(transport, case)
    steps = [(ctx.substitute(s.request), ctx.substitute(s.expect)) for s in case.steps]
    if any(key in request for request, _ in steps for key in HTTP1_ONLY):
        return False
    if any("chunked" in expect for _, expect in steps):
        return False
    if any(len(request_body(request)) > H2_BODY_LIMIT for request, _ in steps):
        return False
    if any(not _kept_by_httpx(request["target"]) for request, _ in steps):
        return False
    for number, (request, expect) in enumerate(steps, start=1):
        prefix = f"step {number}: " if len(steps) > 1 else ""
        body = request_body(request)
        headers = [tuple(pair) for pair in request.get("headers", [])]
        if "json" in request:
            headers.append(("Content-Type", "application/json"))
        try:
            response = h2_request(
                ctx, transport, request.get("method", "GET"), request["target"], headers, body
            )
        except httpclient.HttpError as error:
            outcome.fail(prefix + str(error))
            return True
        check_response(ctx, response, expect, body, outcome, prefix, http2=True)
        if outcome.failures:
            break
    return True


def _kept_by_httpx(target: str) -> bool:
    return httpx.URL("http://127.0.0.1" + target).raw_path.decode("ascii") == target


def h2_request(ctx, transport, method, target, headers=(), body=b"") -> httpclient.Response:
    """One request over HTTP/2 (`h2`: TLS and ALPN; `h2c`: prior knowledge), as the
    Response serverlab's checks read; HttpError if it fails or is not HTTP/2."""
    if transport == "h2":
        client = httpx.Client(http1=False, http2=True, verify=ctx.tls_context(["h2"]))
        base = f"https://127.0.0.1:{ctx.tls_port}"
    else:
        client = httpx.Client(http1=False, http2=True)
        base = f"http://127.0.0.1:{ctx.h2c_port}"
    # Identity: httpx asks for gzip by default, and the body is compared byte for byte.
    headers = [("Accept-Encoding", "identity"), *headers]
    content = body if body or method in ("POST", "PUT") else None
    try:
        with client:
            answer = client.request(
                method, base + target, headers=headers, content=content, timeout=ctx.timeout_s
            )
    except (httpx.HTTPError, h2.exceptions.ProtocolError) as error:
        # httpcore lets the h2 library's verdict on a broken answer through as it is.
        raise httpclient.HttpError(f"over {transport}: {type(error).__name__}: {error}") from None
    if answer.http_version != "HTTP/2":
        raise httpclient.HttpError(f"over {transport}: answered in {answer.http_version}")
    headers = [(key.lower(), value) for key, value in answer.headers.multi_items()]
    return httpclient.Response(answer.status_code, headers, answer.content)


CHECKS = {"carried": carried}
