"""What a run reports about itself, in Redis: per-component status that ages out, the
worker count ``tengen scale`` asks for, and the Redis memory the run's parts hold.

- ``StatusBoard``: per-component hashes ``tengen:{<run>}:status:<component>`` that
  expire ``ttl_s`` after their last update, so a dead worker drops off the board (the
  in-process twin and the status's stored form are run/status_board.py's);
- ``memory_by_part``: bytes by part of the run (samples, models, ladder, status).
"""

from __future__ import annotations

from typing import Any

from tengen.cluster.keys import RunKeys
from tengen.cluster.redis_client import RedisLike, call_with_retry
from tengen.run.sample_stream import as_bytes
from tengen.run.status_board import StatusBoardLike, status_fields, status_from_fields

__all__ = ["StatusBoard", "memory_by_part"]


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
        mapping = status_fields(status)

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
                board[as_bytes(key).decode()[prefix:]] = status_from_fields(fields)
        return board


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

