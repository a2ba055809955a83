"""Connection handling: keep-alive and `Connection: close` (spec §1)."""

from serverlab.base import httpclient
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.exchange import check_required_headers
from serverlab.conformance.outcome import Outcome


def keepalive(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Several requests answered one after another on one connection."""
    with ctx.connect() as connection:
        for number in range(1, params.get("requests", 2) + 1):
            try:
                response = connection.request("GET", ctx.probe_target)
            except httpclient.HttpError as error:
                outcome.abort(f"request {number} on the kept-alive connection: {error}")
            check_required_headers(response, outcome, f"request {number}: ")
            if (response.header("connection") or "").lower() == "close":
                outcome.abort(f"request {number} answered with Connection: close")


def connection_close(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A request with `Connection: close` is answered, then the server closes."""
    with ctx.connect() as connection:
        response = connection.request("GET", ctx.probe_target, [("Connection", "close")])
        check_required_headers(response, outcome)
        if not connection.wait_closed(params.get("close_within_s", 2.0)):
            outcome.fail("the server kept the connection open after Connection: close")


CHECKS = {"keepalive": keepalive, "connection_close": connection_close}
