"""How far a generator's clock is from the server's, measured NTP-style through the spec's
`GET /timestamp?client=<ms>` (seed 004's Time Stamper): the client's send and receive
times bracket the server's stamp. The sample with the shortest round trip wins; its
uncertainty is half that round trip plus half a millisecond, since the server stamps in
whole milliseconds."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from serverlab.base import httpclient

SAMPLES = 8
# The server's stamp is a whole millisecond: the true time is up to 1 ms past it.
STAMP_RESOLUTION_MS = 1.0


@dataclass(frozen=True)
class ClockOffset:
    """The server's clock minus this host's, in milliseconds, and how sure that is."""

    offset_ms: float
    uncertainty_ms: float
    round_trip_ms: float


class ClockError(RuntimeError):
    pass


def measure(host: str, port: int, samples: int = SAMPLES) -> ClockOffset:
    best = None
    for _ in range(samples):
        sent = time.time() * 1000
        answer = httpclient.get(port, f"/timestamp?client={int(sent)}", host=host)
        received = time.time() * 1000
        if answer.status != 200:
            raise ClockError(f"GET /timestamp on {host}:{port} answered {answer.status}")
        try:
            stamp = float(json.loads(answer.body)["server"])
        except (ValueError, KeyError, TypeError) as error:
            raise ClockError(f"GET /timestamp on {host}:{port}: {error}") from None
        round_trip = received - sent
        if best is None or round_trip < best[0]:
            best = (round_trip, stamp + STAMP_RESOLUTION_MS / 2 - (sent + received) / 2)
    round_trip, offset = best
    return ClockOffset(
        round(offset, 3),
        round(round_trip / 2 + STAMP_RESOLUTION_MS / 2, 3),
        round(round_trip, 3),
    )


def unknown() -> ClockOffset:
    """No measure (a target without /timestamp): taken as zero, uncertain without bound."""
    return ClockOffset(0.0, float("inf"), float("nan"))
