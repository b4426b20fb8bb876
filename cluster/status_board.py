"""What a run reports about itself: per-component status that ages out, the worker
count ``tengen scale`` asks for, and the Redis memory the run's parts hold.

- ``StatusBoard``: per-component hashes ``tengen:{<run>}:status:<component>`` that
  expire ``ttl_s`` after their last update, so a dead worker drops off the board;
- ``LocalStatusBoard``: the same in this process;
- ``memory_by_part``: bytes by part of the run (samples, models, ladder, status).

Both boards are ``StatusBoardLike``. A status is stored as one JSON value per field
(``_fields``) and read back through the same decoding (``_from_fields``), on Redis and
in this process alike.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from tengen.cluster.json_values import dumps
from tengen.cluster.keys import RunKeys, as_bytes
from tengen.cluster.redis_client import RedisLike, call_with_retry

__all__ = ["StatusBoardLike", "StatusBoard", "LocalStatusBoard", "memory_by_part"]


class StatusBoardLike(Protocol):
    """Where components report their status and the driver and ``tengen status`` read it.
    (Only cluster/ reports and reads status, so this lives beside its two boards.)"""

    def set_status(self, component: str, status: dict, *, wait: bool = True) -> None:
        """Replace ``component``'s status (``wait=False``: try once, for a reporter that
        must not stall during an outage)."""
        ...

    def get_status(self) -> dict[str, dict]:
        """``{component: status}`` of every component that reported within the TTL."""
        ...


def _fields(status: dict) -> dict[str, str]:
    """A status as stored: each field JSON, and the time of the update in ``_updated``."""
    return {str(k): dumps(v) for k, v in status.items()} | {"_updated": dumps(time.time())}


def _from_fields(fields: dict) -> dict:
    return {(k.decode() if isinstance(k, bytes) else k): json.loads(v) for k, v in fields.items()}


class StatusBoard(StatusBoardLike):
    """Per-component status hashes (``tengen:{run}:status:<component>``) that expire
    ``ttl_s`` after their last update, so a dead worker drops off the board."""

    def __init__(self, client: RedisLike, run_id: str, *, ttl_s: float = 60.0):
        # Any: redis-py's stubs type every reply as a sync/async union
        self.client: Any = client
        self.keys = RunKeys(run_id)
        self.ttl_ms = max(1, int(ttl_s * 1000))

    def set_status(self, component: str, status: dict, *, wait: bool = True) -> None:
        """Replace ``component``'s status (``wait=False``: try once, for a reporter that
        must not stall during an outage; it raises RedisUnavailable then)."""
        key = self.keys.status(component)
        mapping = _fields(status)

        def write(client: Any) -> None:  # Any: redis-py's stubs want a Mapping of unions
            pipe = client.pipeline(transaction=True)
            pipe.delete(key)
            pipe.hset(key, mapping=mapping)
            pipe.pexpire(key, self.ttl_ms)
            pipe.execute()

        call_with_retry(self.client, write, wait=wait)

    def request_workers(self, count: int) -> None:
        """Ask the run's driver for ``count`` self-play workers (``tengen scale``)."""
        if count < 1:
            raise ValueError(f"a run needs at least 1 worker, not {count}")
        self.client.set(self.keys.desired_workers, str(int(count)))

    def desired_workers(self) -> int | None:
        value = self.client.get(self.keys.desired_workers)
        return int(value) if value is not None else None

    def get_status(self) -> dict[str, dict]:
        """``{component: status}`` of every component that reported within the TTL."""
        keys = sorted(self.client.scan_iter(match=self.keys.status_pattern(), count=500))
        if not keys:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        board = {}
        prefix = len(self.keys.status_prefix)
        for key, fields in zip(keys, pipe.execute(), strict=True):
            if fields:
                board[as_bytes(key).decode()[prefix:]] = _from_fields(fields)
        return board


class LocalStatusBoard(StatusBoardLike):
    """``StatusBoard`` in this process (entries expire the same way)."""

    def __init__(self, run_id: str = "local", *, ttl_s: float = 60.0):
        self.keys = RunKeys(run_id)
        self.ttl_s = ttl_s
        self._board: dict[str, tuple[float, dict[str, str]]] = {}  # component -> (expiry, fields)
        self._lock = threading.Lock()

    def set_status(self, component: str, status: dict, *, wait: bool = True) -> None:
        fields = _fields(status)
        with self._lock:
            self._board[component] = (time.monotonic() + self.ttl_s, fields)

    def get_status(self) -> dict[str, dict]:
        now = time.monotonic()
        with self._lock:
            self._board = {c: v for c, v in self._board.items() if v[0] > now}
            return {c: _from_fields(v[1]) for c, v in sorted(self._board.items())}


def memory_by_part(client: RedisLike, run_id: str) -> dict[str, int]:
    """Bytes the run holds in Redis, by part (``MEMORY USAGE``, which samples a big
    stream), and the server's ``used_memory`` and ``maxmemory`` (0: no limit)."""
    keys = RunKeys(run_id)
    redis_any: Any = client  # redis-py's stubs type every reply as a sync/async union
    versions = [int(score) for _, score in redis_any.zrange(keys.models, 0, -1, withscores=True)]
    status = list(redis_any.scan_iter(match=keys.status_pattern(), count=500))
    parts = {"samples": [keys.samples, keys.sample_counts], "models": [keys.models, keys.best]
             + [keys.model(v) for v in versions], "ladder": [keys.ladder], "status": status}
    pipe = redis_any.pipeline(transaction=False)
    for names in parts.values():
        for key in names:
            pipe.memory_usage(key)
    pipe.info("memory")
    replies = pipe.execute()
    info = replies.pop()
    out: dict[str, int] = {}
    at = 0
    for part, names in parts.items():
        out[part] = sum(int(r or 0) for r in replies[at:at + len(names)])
        at += len(names)
    out["used_memory"] = int(info["used_memory"])
    out["maxmemory"] = int(info.get("maxmemory", 0))
    return out


if TYPE_CHECKING:
    # Nothing the type checker reads makes the in-process twin (tests do), so this
    # does: a twin that lacks a method of the interface is abstract and cannot be made.
    _LOCAL_TWIN: StatusBoardLike = LocalStatusBoard()
