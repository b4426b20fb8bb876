"""Waiting for a real process, server or network to get somewhere: a condition polled
until it holds, and a failure that names what never came, instead of a sleep that
guesses how long the machine takes."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_for"]


def wait_for(condition: Callable[[], object], *, timeout_s: float, what: str | Callable[[], str],
             every_s: float = 0.25) -> float:
    """Seconds until ``condition()`` is true; AssertionError naming ``what`` past the
    timeout. A callable ``what`` is asked at the timeout, so that what it shows (a
    run's log, a cluster's layout) is the state that failed, not the state at the call."""
    start = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what() if callable(what) else what}")
        time.sleep(every_s)
