"""Runs the data-only cases: a request built from the case, the response checked against it."""

import hashlib
import json

from serverlab.base import httpclient
from serverlab.conformance.cases import Step
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.jsonshape import check_subset, check_types
from serverlab.conformance.outcome import Outcome

ERROR_REASON_LIMIT = 200


def run_steps(ctx: VerifyContext, steps, outcome: Outcome) -> None:
    for number, step in enumerate(steps, start=1):
        where = f"step {number}" if len(steps) > 1 else ""
        run_step(ctx, step, outcome, where)
        if outcome.failures:
            return


def run_step(ctx: VerifyContext, step: Step, outcome: Outcome, where: str = "") -> None:
    request = ctx.substitute(step.request)
    expect = ctx.substitute(step.expect)
    body = request_body(request)
    prefix = f"{where}: " if where else ""
    with ctx.connect() as connection:
        try:
            send(connection, request, body)
            response = connection.read_response()
        except httpclient.HttpError as error:
            outcome.observed.append("no answer")
            if expect.get("close_warns") and "closed" in str(error):
                outcome.warn(f"{prefix}{error} (an answer is expected)")
            else:
                outcome.fail(f"{prefix}{error}")
            return
    check_response(ctx, response, expect, body, outcome, prefix)


def request_body(request: dict) -> bytes:
    if "chunks" in request:
        return "".join(request["chunks"]).encode()
    if "json" in request:
        document = dict(request["json"])
        if "body_size" in request:
            # Padding inside a valid document: the size, not the syntax, must be refused.
            bare = len(json.dumps({**document, "pad": ""}).encode())
            document["pad"] = "x" * max(0, request["body_size"] - bare)
        return json.dumps(document).encode()
    if "body_size" in request:
        return b"x" * request["body_size"]
    return request.get("body", "").encode()


def send(connection: httpclient.HttpConnection, request: dict, body: bytes) -> None:
    if "raw" in request:
        connection.send_raw(request["raw"].encode("latin-1"))
        return
    headers = [tuple(pair) for pair in request.get("headers", [])]
    if "json" in request:
        headers.append(("Content-Type", "application/json"))
    if "header_filler" in request:
        headers.append(("X-Filler", "f" * request["header_filler"]))
    if request.get("close"):
        headers.append(("Connection", "close"))
    chunks = [c.encode() for c in request["chunks"]] if "chunks" in request else None
    connection.send_request(
        request.get("method", "GET"), request["target"], headers, body=body, chunks=chunks
    )


def check_response(
    ctx, response, expect: dict, request_body: bytes, outcome, prefix="", http2=False
) -> None:
    """`http2`: the answer came over HTTP/2, whose framing is its own (spec §13)."""
    outcome.observed.append(str(response.status))
    if not check_status(response, expect, outcome, prefix):
        return
    if http2:
        check_http2_headers(response, outcome, prefix)
    else:
        check_required_headers(response, outcome, prefix)
    if response.status >= 400:
        check_error_body(response, outcome, prefix)
    checkers = {
        "media_type": _media_type,
        "content_length": _content_length,
        "chunked": _chunked,
        "headers": _headers_present,
        "body": lambda r, want: (
            None
            if r.body == want.encode()
            else f"body is {r.body[:100]!r}, expected {want[:100]!r}"
        ),
        "body_file": lambda r, want: _file_body(ctx, r, want),
        "secret_absent": lambda r, want: _secret_absent(ctx, r) if want else None,
    }
    for key, checker in checkers.items():
        if key in expect:
            problem = checker(response, expect[key])
            if problem:
                outcome.fail(prefix + problem)
    _check_json(response, expect, request_body, outcome, prefix)


def check_status(response, expect: dict, outcome: Outcome, prefix="") -> bool:
    """FAIL if the status is neither expected nor warned; False if the rest is moot."""
    wanted = expect.get("status", 200)
    wanted = wanted if isinstance(wanted, list) else [wanted]
    if response.status in wanted:
        return True
    if response.status in expect.get("warn_status", []):
        outcome.warn(f"{prefix}status {response.status}, {wanted[0]} expected")
        return True
    detail = f": {response.body[:120]!r}" if response.body else ""
    outcome.fail(
        f"{prefix}status {response.status}, expected {' or '.join(map(str, wanted))}{detail}"
    )
    return False


def check_required_headers(response, outcome: Outcome, prefix="") -> None:
    for name in ("Date", "Content-Type"):
        if not response.has_header(name):
            outcome.fail(f"{prefix}{response.status} response without a {name} header")
    if not response.has_header("Content-Length") and not response.chunked:
        outcome.fail(f"{prefix}{response.status} response without Content-Length or chunked")
    elif response.has_header("Content-Length") and response.has_header("Transfer-Encoding"):
        outcome.fail(f"{prefix}{response.status} response with both Content-Length and chunked")


def check_http2_headers(response, outcome: Outcome, prefix="") -> None:
    for name in ("Date", "Content-Type"):
        if not response.has_header(name):
            outcome.fail(f"{prefix}{response.status} response without a {name} header")
    for name in ("Connection", "Transfer-Encoding", "Keep-Alive"):
        if response.has_header(name):
            outcome.fail(f"{prefix}{response.status} HTTP/2 response with a {name} header")


def check_error_body(response, outcome: Outcome, prefix="") -> None:
    try:
        document = response.json()
    except httpclient.HttpError as error:
        outcome.fail(f"{prefix}error response: {error}")
        return
    reason = document.get("error") if isinstance(document, dict) else None
    if not isinstance(reason, str) or not reason:
        outcome.fail(f'{prefix}error body {response.body[:80]!r} lacks {{"error": "<reason>"}}')
    elif len(reason.encode()) >= ERROR_REASON_LIMIT:
        outcome.fail(f"{prefix}error reason is {len(reason.encode())} bytes, limit 200")
    elif reason[0].isupper():
        # Only the phrase's start: a reason may quote a pattern such as [A-Za-z0-9_.-].
        outcome.warn(f"{prefix}error reason {reason!r} is not a lower-case phrase")


def _media_type(response, wanted) -> str | None:
    options = wanted if isinstance(wanted, list) else [wanted]
    if response.media_type not in options:
        return f"Content-Type {response.header('content-type')!r}, expected {' or '.join(options)}"
    return None


def _content_length(response, wanted: int) -> str | None:
    actual = response.header("content-length")
    return None if actual == str(wanted) else f"Content-Length {actual}, expected {wanted}"


def _chunked(response, wanted: bool) -> str | None:
    return None if response.chunked == wanted else f"chunked is {response.chunked}"


def _headers_present(response, wanted: list) -> str | None:
    """Each entry is a header name, or a [name, value] pair that must match exactly."""
    for entry in wanted:
        name, value = (entry, None) if isinstance(entry, str) else entry
        actual = response.header(name)
        if actual is None:
            return f"missing header {name}"
        if value is not None and actual.strip() != value:
            return f"header {name}: {actual!r}, expected {value!r}"
    return None


def _file_body(ctx: VerifyContext, response, relative: str) -> str | None:
    wanted = ctx.docroot.file_bytes(relative)
    if response.body == wanted:
        return None
    return f"body of {len(response.body)} bytes differs from {relative} ({len(wanted)} bytes)"


def _secret_absent(ctx: VerifyContext, response) -> str | None:
    secret = ctx.docroot.secret.strip()
    if secret in response.body or secret[:24] in response.body:
        return "the body contains the secret file from outside the document root"
    if b"root:x:0:0" in response.body:
        return "the body contains /etc/passwd"
    return None


def _check_json(response, expect: dict, request_body: bytes, outcome, prefix) -> None:
    json_keys = ("json", "json_subset", "json_types", "upload_digest", "error")
    if not any(key in expect for key in json_keys):
        return
    try:
        document = response.json()
    except httpclient.HttpError as error:
        outcome.fail(prefix + str(error))
        return
    if "json" in expect and document != expect["json"]:
        outcome.fail(f"{prefix}JSON {document!r}, expected {expect['json']!r}"[:300])
    if expect.get("upload_digest"):
        digest = {"bytes": len(request_body), "sha256": hashlib.sha256(request_body).hexdigest()}
        check_subset(document, digest, outcome, prefix.rstrip(": "))
    if "error" in expect:
        check_subset(document, {"error": expect["error"]}, outcome, prefix.rstrip(": "))
    check_subset(document, expect.get("json_subset", {}), outcome, prefix.rstrip(": "))
    check_types(document, expect.get("json_types", {}), outcome, prefix.rstrip(": "))
