"""Talking to `GET /sse` (spec §10) with httpx and httpx-sse, not with serverlab's own code.

httpx-sse parses the stream as the HTML standard says (the last event id outlives the event
that set it, one leading space is stripped, CR, LF and CRLF end lines). Like every SSE
client it drops comment lines, so heartbeats are seen here, on their way into the library.
"""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import httpx_sse

# The library's own line splitter: heartbeats are comment lines, which its parser drops.
from httpx_sse._decoders import SSELineDecoder

from serverlab.base import httpclient
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True)
class SseMessage:
    at: float  # time.monotonic() when it was parsed
    event: str
    data: str
    id: str

    @property
    def opening(self) -> bool:
        """A message without data: the opening message's id (or, in httpx-sse, a heartbeat's
        empty line after it, which repeats the last id). Neither dispatches an event."""
        return self.data == ""


class ObservedResponse:
    """The response as EventSource sees it, noting when comment lines pass by."""

    def __init__(self, response: httpx.Response):
        self.response = response
        self.headers = response.headers
        self.comments: list[float] = []

    def iter_text(self) -> Iterator[str]:
        lines = SSELineDecoder()
        for text in self.response.iter_text():
            now = time.monotonic()
            self.comments += [now for line in lines.decode(text) if line.startswith(":")]
            yield text


class SseStream:
    def __init__(self, response: httpx.Response):
        self.response = response
        self.observed = ObservedResponse(response)
        self._events = httpx_sse.EventSource(self.observed).iter_sse()
        self.messages: list[SseMessage] = []
        self.ended = False

    def read(self, until: Callable[[SseMessage], bool] = lambda message: False) -> None:
        """Reads messages until `until` holds for one or the stream ends; HttpError on a
        timeout or broken framing."""
        try:
            for sse in self._events:
                message = SseMessage(time.monotonic(), sse.event, sse.data, sse.id)
                self.messages.append(message)
                if until(message):
                    return
        except (httpx.HTTPError, httpx_sse.SSEError) as error:
            raise httpclient.HttpError(
                f"SSE stream after {len(self.messages)} messages: {type(error).__name__} {error}"
            ) from None
        self.ended = True

    def data_messages(self) -> list[SseMessage]:
        return [message for message in self.messages if not message.opening]


def sse_target(events: list[str], **params) -> str:
    query = "&".join([f"events={','.join(events)}"] + [f"{k}={v}" for k, v in params.items()])
    return f"/sse?{query}"


def sse_request(events: list[str], **params) -> dict:
    """The `request` every delivery of this stream echoes (spec §10)."""
    return {"type": "sse", "events": events, **params}


@contextmanager
def open_sse(
    ctx: VerifyContext, events: list[str], last_event_id: str = "", quiet_s: float = 0, **params
):
    """An SSE stream; `quiet_s` is the longest silence expected between two messages."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    timeout = httpx.Timeout(ctx.timeout_s, read=quiet_s + ctx.give_up_s)
    # Over TLS when a case of part `tls` carries this one (spec §12).
    tls = ctx.transport == "tls"
    url = f"{ctx.origin('http')}{sse_target(events, **params)}"
    verify = ctx.tls_context(["http/1.1"]) if tls else True
    try:
        with (
            httpx.Client(timeout=timeout, verify=verify) as client,
            httpx_sse.connect_sse(client, "GET", url, headers=headers) as source,
        ):
            yield SseStream(source.response)
    except httpx.HTTPError as error:
        raise httpclient.HttpError(f"GET /sse: {type(error).__name__} {error}") from None


def check_sse_head(stream: SseStream, outcome: Outcome) -> bool:
    """Status and headers of §10's answer; False if the stream cannot be read as one."""
    response = stream.response
    headers = response.headers
    if not outcome.require(response.status_code == 200, f"/sse answered {response.status_code}"):
        return False
    media_type = headers.get("content-type", "").split(";")[0].strip().lower()
    outcome.require(
        media_type == EVENT_STREAM,
        f"Content-Type {headers.get('content-type')!r}, expected {EVENT_STREAM}",
    )
    outcome.require("date" in headers, "the /sse head has no Date header")
    outcome.require(
        "chunked" in headers.get("transfer-encoding", "").lower(),
        "the event stream is not Transfer-Encoding: chunked",
    )
    outcome.require(
        "no-cache" in headers.get("cache-control", "").lower(),
        f"Cache-Control {headers.get('cache-control')!r}, expected no-cache",
    )
    return not outcome.failures


def position(events: list[str], seqs: dict[str, int]) -> str:
    """The §10 id form: `name:seq` for every event of the stream, in order."""
    return ",".join(f"{name}:{seqs.get(name, 0)}" for name in events)


def parse_position(text: str, names: list[str]) -> dict[str, int] | None:
    """The `name:seq` pairs of an id that names each of `names` once; None if it does not."""
    pairs = [pair.partition(":") for pair in text.split(",")]
    if [name for name, _, _ in pairs] != names or not all(s.isdigit() for _, _, s in pairs):
        return None
    return {name: int(seq) for name, _, seq in pairs}
