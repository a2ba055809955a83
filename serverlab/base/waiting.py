"""Polling with a deadline: every wait in verify is bounded."""

import time


def wait_for(predicate, timeout_s: float, interval_s: float = 0.05) -> bool:
    """Calls `predicate` until it returns true or the time is up; its last answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())
