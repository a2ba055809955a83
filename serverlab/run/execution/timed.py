"""Control calls during the measured load (execution stage), on a thread of their own.

A server whose request threads are all held (1,000 long polls on Tomcat's 1,000 threads)
answers a control call late. Made inline, such a call would also stop the executor from
watching the engine, the server's crash and the deadline while it blocks; here it blocks
only its own thread. Every call is stamped (due, sent, answered, status, on this host's
clock in Unix ms) so that the report can say how late the server served it, and a call
answered more than `LATE_MS` after it was due flags the test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from serverlab.base import httpclient
from serverlab.run.execution.testplan import ControlCall, TimedCall

# A call answered later than this after it was due is late: the test is flagged control-late.
LATE_MS = 100.0
# How long one timed call may wait for its answer; a later answer is recorded as none.
CALL_TIMEOUT_S = 10.0

Send = Callable[[ControlCall, float], httpclient.Response]


def stamp(send: Send, call: ControlCall, due_s: float) -> dict[str, Any]:
    """Makes one call and says when it was due, sent and answered, and how it was answered."""
    record: dict[str, Any] = {"method": call.method, "path": call.path, "due_ms": _ms(due_s)}
    record["sent_ms"] = _ms(time.time())
    try:
        record["status"] = send(call, CALL_TIMEOUT_S).status
    except (httpclient.HttpError, OSError, ValueError) as err:
        record["error"] = str(err)[:200]
    answered = time.time()
    record["answered_ms"] = _ms(answered)
    record["late_ms"] = round((answered - due_s) * 1000, 1)
    return record


class TimedCalls:
    """The plan's `during` calls, each made when its time comes after `origin` (the load's
    start, time.monotonic()), on a thread that stops making calls once `finish` is called."""

    def __init__(self, during: Sequence[TimedCall], send: Send, origin: float):
        self.pending = sorted(during, key=lambda timed: timed.at_s)
        self.send, self.origin = send, origin
        # The wall clock at `origin`: calls are stamped in Unix time, like emit cycles.
        self.origin_wall = time.time() - (time.monotonic() - origin)
        self.records: list[dict[str, Any]] = []
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timed-calls", daemon=True)

    def start(self) -> TimedCalls:
        if self.pending:
            self._thread.start()
        return self

    def due_wall(self, timed: TimedCall) -> float:
        return self.origin_wall + timed.at_s

    def _run(self) -> None:
        for timed in self.pending:
            if self._ended.wait(max(0.0, self.origin + timed.at_s - time.monotonic())):
                # The load ended (or the server died) before the call was due.
                skipped = {"method": timed.call.method, "path": timed.call.path}
                self.records.append({**skipped, "due_ms": _ms(self.due_wall(timed)), "made": 0})
                continue
            self.records.append(stamp(self.send, timed.call, self.due_wall(timed)))

    def abandon(self) -> None:
        """No further call, and no wait for the one under way (the run is interrupted)."""
        self._ended.set()

    def finish(self) -> list[dict[str, Any]]:
        """No further call; waits for the one under way, at most its timeout."""
        self._ended.set()
        if self._thread.is_alive():
            self._thread.join(CALL_TIMEOUT_S + 1.0)
        return list(self.records)


def failures(records: list[dict[str, Any]]) -> list[str]:
    """The calls that were made and not answered 200, one phrase each."""
    failed = [r for r in records if r.get("made", 1) and r.get("status") != 200]
    return [f"{r['method']} {r['path']}: {r.get('error') or _answered(r)}" for r in failed]


def _answered(record: dict[str, Any]) -> str:
    return f"answered {record.get('status')}"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
