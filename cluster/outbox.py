"""Finished games on their way to the sample stream, held while Redis is away.

A self-play worker must keep playing through a Redis outage: its search needs only
the inference server. ``GameOutbox`` keeps the games it could not send, in order, and
sends them (oldest first, in one round trip per batch) as soon as Redis answers again.
While Redis is down it tries again after a growing pause, not after every game, so
that a connect timeout does not stall self-play. Once ``capacity`` games wait, the
worker waits too (through the client's own retries), and past ``redis.outage_s`` the
``RedisUnavailable`` that says so stops the worker, and with it the run.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from tengen.cluster.redis_client import RedisUnavailable

__all__ = ["GameOutbox"]

#: games per XADD round trip when a backlog is flushed
_BATCH = 256
_RETRY_BASE_S = 0.25
_RETRY_CAP_S = 5.0


class GameOutbox:
    """``put(blob)`` a finished game; it reaches ``send(blobs, wait=...)`` in order.

    ``send`` is ``SampleStream.add_many``: with ``wait=False`` it tries once and raises
    ``RedisUnavailable`` (not ``expired``) while Redis is away.
    """

    def __init__(self, send: Callable[..., object], *, capacity: int,
                 log: Callable[[str], None] | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._send = send
        self.capacity = capacity
        self._log = log
        self._waiting: collections.deque[bytes] = collections.deque()
        self._next_try = 0.0
        self._failures = 0
        #: games sent so far, and the most that ever waited at once
        self.sent = 0
        self.most_waiting = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def put(self, blob: bytes) -> None:
        self._waiting.append(blob)
        self.most_waiting = max(self.most_waiting, len(self._waiting))
        if len(self._waiting) >= self.capacity:
            if self._log is not None and self._failures:
                self._log(f"{len(self._waiting)} games wait for Redis: waiting for it before playing on")
            self.flush(wait=True)
        else:
            self.flush()

    def flush(self, *, wait: bool = False) -> int:
        """Send what waits (``wait``: ride the outage out); returns games still waiting."""
        if not wait and time.monotonic() < self._next_try:
            return len(self._waiting)
        while self._waiting:
            batch = [self._waiting[i] for i in range(min(_BATCH, len(self._waiting)))]
            try:
                self._send(batch, wait=wait)
            except RedisUnavailable as e:
                if e.expired or wait:
                    raise
                self._failures += 1
                pause = min(_RETRY_CAP_S, _RETRY_BASE_S * 2 ** min(self._failures - 1, 10))
                self._next_try = time.monotonic() + pause
                return len(self._waiting)
            for _ in batch:
                self._waiting.popleft()
            self.sent += len(batch)
        if self._failures and self._log is not None:
            self._log("Redis is back: the games kept meanwhile are in the stream")
        self._failures = 0
        return 0
