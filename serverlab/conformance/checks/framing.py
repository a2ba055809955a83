"""Message framing (spec §1.1): where a request's body ends, and what happens after.

Each case sends one request whose framing is bad (or legal but unusual) and, in the same
write, a good request behind it. A server that frames the first one differently from
RFC 9112 reads part of it, or part of the good one, as its next request: the bytes a proxy
in front would call body get answered as a request (request smuggling). So a refusal must
be followed by the server closing the connection, a legal framing by the good request
being answered on the same connection.

Every case is sent to an unknown path, where a server may answer 404 before it reads the
body, and, for a server with part `upload`, to `POST /upload`, which reads all of it.
"""

import hashlib
from dataclasses import dataclass

from serverlab.base import httpclient
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.exchange import check_error_body, check_required_headers
from serverlab.conformance.outcome import Outcome

CLOSE_WITHIN_S = 2.0
PARAM_KEYS = {"head", "body", "version", "decoded", "refuse", "warn_refuse", "serve", "in_body"}
SERVE_THEN = ("close", "keep")


@dataclass(frozen=True)
class Target:
    label: str
    path: str
    served: int  # the status of a server that accepts the message there


UNKNOWN_PATH = Target("unknown path", "/no-such-path-serverlab", 404)
UPLOAD = Target("/upload", "/upload", 200)


def params_problem(params: dict) -> str | None:
    """What is wrong with a framing case's params, or None."""
    unknown = set(params) - PARAM_KEYS
    if unknown:
        return f"unknown param {sorted(unknown)[0]}"
    if not params.get("refuse") and not params.get("serve"):
        return "give refuse (statuses), serve ('close' or 'keep'), or both"
    if params.get("warn_refuse") and not params.get("refuse"):
        return "warn_refuse goes with refuse"
    if params.get("serve") and (params["serve"] not in SERVE_THEN or "decoded" not in params):
        return "serve is 'close' or 'keep', and needs decoded (the body as the server sees it)"
    return None


def framing(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """The message, then a good request, in one write, to each target."""
    problem = params_problem(params)
    if problem:
        outcome.abort(f"bad framing case in spec/cases: {problem}")
    targets = [UNKNOWN_PATH] + ([UPLOAD] if "upload" in ctx.parts else [])
    for target in targets:
        check_target(ctx, params, target, outcome)


def message(params: dict, target: Target) -> str:
    version = params.get("version", "HTTP/1.1")
    return (
        f"POST {target.path} {version}\r\nHost: 127.0.0.1\r\n{params.get('head', '')}\r\n"
        f"{params.get('body', '')}"
    )


def check_target(ctx: VerifyContext, params: dict, target: Target, outcome: Outcome) -> None:
    prefix = f"{target.label}: "
    good = f"GET {ctx.probe_target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with ctx.connect() as connection:
        connection.send_raw((message(params, target) + good).encode("latin-1"))
        try:
            response = connection.read_response()
        except httpclient.HttpError as error:
            outcome.observed.append(f"{target.label} no answer")
            outcome.fail(f"{prefix}{error} (an answer is expected)")
            return
        then = judge(response, params, target, outcome, prefix)
        if then == "keep" and (response.header("connection") or "").lower() == "close":
            then = "close"  # the server declined to reuse the connection, and said so
        if then == "close":
            after = check_closes(connection, response.status, outcome, prefix)
        elif then == "keep":
            after = check_keeps(connection, outcome, prefix)
        else:
            after = "wrong status"
        outcome.observed.append(f"{target.label} {response.status} {after}")


def judge(response, params: dict, target: Target, outcome: Outcome, prefix: str) -> str | None:
    """What must follow this answer ("close" or "keep"), or None if the answer is wrong."""
    check_required_headers(response, outcome, prefix)
    if response.status >= 400:
        check_error_body(response, outcome, prefix)
    refusals = list(params.get("refuse", []))
    if params.get("in_body") and target is UNKNOWN_PATH:
        refusals.append(UNKNOWN_PATH.served)  # answered before the body was read
    if response.status in refusals:
        return "close"
    if response.status in params.get("warn_refuse", []):
        outcome.warn(f"{prefix}status {response.status}, {params['refuse'][0]} expected")
        return "close"
    serve = params.get("serve")
    if serve and response.status == target.served:
        if target is UPLOAD:
            check_digest(response, params["decoded"], outcome, prefix)
        return serve
    wanted = refusals + ([target.served] if serve else [])
    outcome.fail(
        f"{prefix}status {response.status}, expected {' or '.join(map(str, wanted))}"
        f": {response.body[:120]!r}"
    )
    return None


def check_digest(response, decoded: str, outcome: Outcome, prefix: str) -> None:
    body = decoded.encode("latin-1")
    wanted = {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    try:
        document = response.json()
    except httpclient.HttpError as error:
        outcome.fail(f"{prefix}{error}")
        return
    if document != wanted:
        outcome.fail(
            f"{prefix}the body was framed as {document!r}, "
            f"not as the {len(body)} bytes {decoded[:40]!r}"
        )


def check_closes(connection, status: int, outcome: Outcome, prefix: str) -> str:
    rest, closed = connection.read_until_closed(CLOSE_WITHIN_S)
    if rest:
        first_line = rest.split(b"\r\n", 1)[0][:80]
        outcome.fail(f"{prefix}after {status}, sent another answer ({first_line!r}), not a close")
        return "answered again"
    if not closed:
        outcome.fail(f"{prefix}after {status}, the connection stayed open {CLOSE_WITHIN_S:g} s")
        return "kept open"
    return "closed"


def check_keeps(connection, outcome: Outcome, prefix: str) -> str:
    try:
        response = connection.read_pipelined()
    except httpclient.HttpError as error:
        outcome.fail(f"{prefix}the request after a legal message was not answered: {error}")
        return "did not answer the next request"
    if response.status != 200:
        outcome.fail(f"{prefix}the request after it was answered {response.status}, not 200")
    return f"answered the next request ({response.status})"


CHECKS = {"framing": framing}
