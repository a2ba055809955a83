"""Numbered live events: a bounded in-memory log that a reconnecting page resumes from its
Last-Event-ID, and a side file that `serverlab watch` tails from another process.

Each event is one JSON object with a `kind`; ids start at 1 and rise by one, so that a page
can tell a lost or repeated event from its ids alone. The side file holds every event of
the run (a few a second: about 1 MB an hour, and the cells table after each test); the log
keeps the newest `KEEP` of them."""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from pathlib import Path

# Hours of a run at ~2 events a second (some MB): a page that reconnects after longer is told
# that points are missing.
KEEP = 50_000


def _plain(value):
    """JSON the browser's JSON.parse takes: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class EventLog:
    def __init__(self, keep: int = KEEP, sink: Path | None = None):
        self._events: deque[tuple[int, str]] = deque(maxlen=keep)
        self._last = 0
        self._closed = False
        self._changed = threading.Condition()
        self._sink = sink.open("a", encoding="utf-8") if sink else None

    def add(self, kind: str, **data) -> int:
        """Appends one event; returns its id."""
        text = json.dumps(_plain({"kind": kind, **data}), separators=(",", ":"))
        with self._changed:
            return self._append(self._last + 1, text)

    def add_numbered(self, event_id: int, text: str) -> None:
        """Appends an event another process numbered (watch, from the side file)."""
        with self._changed:
            if event_id > self._last:
                self._append(event_id, text)

    def _append(self, event_id: int, text: str) -> int:
        self._events.append((event_id, text))
        self._last = event_id
        if self._sink:
            try:
                self._sink.write(json.dumps({"id": event_id, "event": text}) + "\n")
                self._sink.flush()  # watch reads it line by line as it comes
            except OSError:
                # A full disk: the page goes on; watch follows until the run's folder goes.
                self._sink = None
        self._changed.notify_all()
        return event_id

    @property
    def last_id(self) -> int:
        return self._last

    def after(self, last_id: int, wait_s: float) -> tuple[list[tuple[int, str]], bool]:
        """The events after `last_id`, waiting up to `wait_s` for one, and whether some of
        them are gone (older than the log keeps)."""
        with self._changed:
            if self._last <= last_id and not self._closed:
                self._changed.wait(wait_s)
            events = [(i, t) for i, t in self._events if i > last_id]
            gone = bool(events) and events[0][0] > last_id + 1
            return events, gone

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_closed(self) -> None:
        with self._changed:
            while not self._closed:
                self._changed.wait(1.0)  # short waits: Ctrl-C gets through

    def close(self) -> None:
        with self._changed:
            self._closed = True
            if self._sink:
                self._sink.close()
                self._sink = None
            self._changed.notify_all()
