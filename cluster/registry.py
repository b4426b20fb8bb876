"""The run's model registry: weights blobs by version (``000042``) with their sha256
and metadata, the best version, the Elo ladder and promotion notifications.

- ``ModelRegistry``: in Redis; ``promote`` sets the best version, extends the ladder
  and publishes a notification on the run's channel in one MULTI/EXEC.
- ``LocalModelRegistry``: the same in this process (single-process mode, unit tests),
  with ``LocalSubscription`` for the notifications.

Both are ``engine.interfaces.ModelRegistryLike``. Their rules are written once, below,
and each twin only stores: versions are immutable (``_already_published``), a blob
is checked against its sha256 on every fetch (``_read_model``), pruning spares the
best, the newest candidates and what is in use (``_spared``), a promotion is
recorded once (``_promoted_already``), and the ladder entries and notifications are
the same JSON (``_ladder_entry``, ``_notification``).
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import redis

from tengen.cluster.json_values import dumps
from tengen.cluster.keys import RunKeys, version_id
from tengen.cluster.redis_client import RedisLike, call_with_retry
from tengen.engine.interfaces import LadderEntry, ModelMetadata, ModelRegistryLike, PromotionResult, Subscription

__all__ = [
    "ModelRegistry",
    "LocalModelRegistry",
    "LocalSubscription",
    "RegistryError",
    "blob_sha256",
    "parse_promotion",
]


class RegistryError(ValueError):
    """A model the registry does not hold, or one whose bytes do not match its sha256."""


def blob_sha256(blob: bytes) -> str:
    """Hex sha256 of a weights blob: the same identity as ``engine.network.blob_sha256``
    (not imported from there, because that module loads TensorFlow, which processes
    that only move samples and blobs should not pay for; a test checks they agree)."""
    return hashlib.sha256(blob).hexdigest()


# -- the rules both registries follow --------------------------------------------------------
def _not_held(version: int) -> RegistryError:
    return RegistryError(f"model {version_id(version)} is not in the registry")


def _already_published(version: int, existing: bytes | str | None, sha256: str) -> bool:
    """Whether ``version`` is published already with these bytes; other bytes raise."""
    if existing is None:
        return False
    if (existing.decode() if isinstance(existing, bytes) else existing) != sha256:
        raise RegistryError(f"model {version_id(version)} is already published with other bytes")
    return True


def _read_model(version: int, blob: bytes | None, sha256: bytes | str | None,
                metadata: bytes | str | None) -> tuple[bytes, ModelMetadata]:
    """``(blob, metadata)`` as stored, the blob checked against its sha256."""
    if blob is None and sha256 is not None:
        raise RegistryError(f"model {version_id(version)} was pruned from the registry "
                            "(promoted models stay in the run directory's models/)")
    if blob is None or sha256 is None or metadata is None:
        raise _not_held(version)
    expected = sha256.decode() if isinstance(sha256, bytes) else sha256
    actual = blob_sha256(blob)
    if actual != expected:
        raise RegistryError(
            f"model {version_id(version)}: the stored blob's sha256 {actual[:12]}... does not match "
            f"the published {expected[:12]}... (corrupted or tampered with)")
    return blob, json.loads(metadata)


def _spared(versions: list[int], *, keep_candidates: int, keep: Iterable[int], best: int | None) -> set[int]:
    """The versions whose weights a prune keeps: the best, ``keep``, the newest
    ``keep_candidates`` of ``versions`` (in order)."""
    spared = set(versions[-keep_candidates:]) | {int(v) for v in keep}
    if best is not None:
        spared.add(best)
    return spared


def _promoted_already(version: int, best: int | None, last_entry: bytes | str | None) -> bool:
    """A promotion repeated (a retry after a lost reply) must not extend the ladder twice."""
    return best == int(version) and last_entry is not None and json.loads(last_entry)["version"] == int(version)


def _ladder_entry(version: int, sha256: str, elo: float | None, result: PromotionResult,
                 at: float | None) -> LadderEntry:
    return {"version": int(version), "id": version_id(version), "sha256": sha256,
            "elo": None if elo is None else float(elo), "result": result,
            "time": time.time() if at is None else float(at)}


def _notification(version: int, sha256: str) -> str:
    return dumps({"version": int(version), "id": version_id(version), "sha256": sha256})


def parse_promotion(message: dict | None) -> dict | None:
    """``{"version", "id", "sha256"}`` from a pub/sub message of ``subscribe()`` (None
    for anything that is not a promotion)."""
    if not message or message.get("type") != "message":
        return None
    data = message["data"]
    try:
        parsed = json.loads(data.decode() if isinstance(data, bytes) else data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("version"), int):
        return None
    return parsed


# -- Redis ---------------------------------------------------------------------------------
class ModelRegistry(ModelRegistryLike):
    """Weights blobs by version in Redis, the best version, the Elo ladder, promotions."""

    def __init__(self, client: RedisLike, run_id: str):
        # Any: redis-py's stubs type every reply as a sync/async union
        self.client: Any = client
        self.keys = RunKeys(run_id)

    def publish(self, version: int, blob: bytes, metadata: ModelMetadata) -> str:
        """Store ``blob`` as ``version`` with its sha256 and ``metadata``; returns the
        sha256. Versions are immutable: publishing other bytes under a published
        version raises RegistryError (the same bytes again is a no-op)."""
        key = self.keys.model(version)
        sha256 = blob_sha256(blob)
        if _already_published(version, self.client.hget(key, "sha256"), sha256):
            return sha256
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"blob": blob, "sha256": sha256, "metadata": dumps(metadata),
                                "published": repr(time.time())})
        pipe.zadd(self.keys.models, {version_id(version): int(version)})
        pipe.execute()
        return sha256

    def fetch(self, version: int) -> tuple[bytes, ModelMetadata]:
        """``(blob, metadata)`` of ``version``, the blob checked against its sha256."""
        return _read_model(version, *self.client.hmget(self.keys.model(version), ["blob", "sha256", "metadata"]))

    def discard(self, version: int) -> bool:
        """Delete ``version``'s weights (its sha256 and metadata stay, so the ladder and
        the version counter keep their history); the best version is never discarded.
        Returns whether a blob was deleted."""
        if self.best_version() == int(version):
            return False
        return bool(self.client.hdel(self.keys.model(version), "blob"))

    def prune(self, *, keep_candidates: int, keep: Iterable[int] = ()) -> list[int]:
        """Delete the weights of every version but the best, ``keep`` (e.g. the one in
        a match), and the newest ``keep_candidates``; returns the versions pruned."""
        versions = self.candidates()
        spared = _spared(versions, keep_candidates=keep_candidates, keep=keep, best=self.best_version())
        pruned = []
        for version in versions:
            if version not in spared and self.client.hdel(self.keys.model(version), "blob"):
                pruned.append(version)
        return pruned

    def sha256(self, version: int) -> str:
        sha256 = self.client.hget(self.keys.model(version), "sha256")
        if sha256 is None:
            raise _not_held(version)
        return sha256.decode()

    def promote(self, version: int, *, elo: float | None, result: PromotionResult, at: float | None = None) -> None:
        """Make ``version`` the best, append it to the Elo ladder and notify the
        subscribers, all in one MULTI/EXEC."""
        sha256 = self.sha256(version)
        entry = dumps(_ladder_entry(version, sha256, elo, result, at))

        def promote_once(client: redis.Redis) -> None:
            best: Any = client.get(self.keys.best)
            if _promoted_already(version, None if best is None else int(best), client.lindex(self.keys.ladder, -1)):
                return
            pipe = client.pipeline(transaction=True)
            pipe.set(self.keys.best, int(version))
            pipe.rpush(self.keys.ladder, entry)
            pipe.publish(self.keys.promotions, _notification(version, sha256))
            pipe.execute()

        call_with_retry(self.client, promote_once)

    def best_version(self) -> int | None:
        best = self.client.get(self.keys.best)
        return None if best is None else int(best)

    def ladder(self) -> list[LadderEntry]:
        return [json.loads(entry) for entry in self.client.lrange(self.keys.ladder, 0, -1)]

    def candidates(self) -> list[int]:
        """Every published version, in order."""
        return [int(score) for _, score in self.client.zrange(self.keys.models, 0, -1, withscores=True)]

    def latest_candidate(self) -> int | None:
        top = self.client.zrange(self.keys.models, -1, -1, withscores=True)
        return int(top[0][1]) if top else None

    def subscribe(self) -> redis.client.PubSub:
        """A PubSub subscribed to the run's promotions (read with ``get_message`` and
        ``parse_promotion``); close it when done."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(self.keys.promotions)
        return pubsub


# -- in this process -------------------------------------------------------------------------
class LocalSubscription(Subscription):
    """What ``LocalModelRegistry.subscribe`` returns: ``get_message`` like redis-py's."""

    def __init__(self, channel: str, on_close: Callable[[LocalSubscription], None]):
        self.channel = channel
        self._queue: queue.Queue[dict] = queue.Queue()
        self._on_close = on_close

    def _deliver(self, data: str) -> None:
        self._queue.put({"type": "message", "pattern": None, "channel": self.channel.encode(),
                         "data": data.encode()})

    def get_message(self, ignore_subscribe_messages: bool = True, timeout: float = 0.0) -> dict | None:
        try:
            return self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None

    def close(self) -> None:
        self._on_close(self)


class LocalModelRegistry(ModelRegistryLike):
    """``ModelRegistry`` in this process (same checks, same ladder and notifications)."""

    def __init__(self, run_id: str = "local"):
        self.keys = RunKeys(run_id)
        self._models: dict[int, dict] = {}  # version -> {"blob", "sha256", "metadata" (JSON)}
        self._best: int | None = None
        self._ladder: list[str] = []
        self._subscribers: list[LocalSubscription] = []
        self._lock = threading.Lock()

    def publish(self, version: int, blob: bytes, metadata: ModelMetadata) -> str:
        version_id(version)
        sha256 = blob_sha256(blob)
        with self._lock:
            existing = self._models.get(int(version))
            if _already_published(version, None if existing is None else existing["sha256"], sha256):
                return sha256
            self._models[int(version)] = {"blob": bytes(blob), "sha256": sha256, "metadata": dumps(metadata)}
        return sha256

    def fetch(self, version: int) -> tuple[bytes, ModelMetadata]:
        with self._lock:
            model = self._models.get(int(version), {})
        return _read_model(version, model.get("blob"), model.get("sha256"), model.get("metadata"))

    def discard(self, version: int) -> bool:
        with self._lock:
            model = self._models.get(int(version))
            if model is None or self._best == int(version) or model.get("blob") is None:
                return False
            model["blob"] = None
            return True

    def prune(self, *, keep_candidates: int, keep: Iterable[int] = ()) -> list[int]:
        with self._lock:
            versions = sorted(self._models)
            spared = _spared(versions, keep_candidates=keep_candidates, keep=keep, best=self._best)
            pruned = [v for v in versions if v not in spared and self._models[v].get("blob") is not None]
            for version in pruned:
                self._models[version]["blob"] = None
        return pruned

    def sha256(self, version: int) -> str:
        with self._lock:
            model = self._models.get(int(version))
        if model is None:
            raise _not_held(version)
        return str(model["sha256"])

    def promote(self, version: int, *, elo: float | None, result: PromotionResult, at: float | None = None) -> None:
        sha256 = self.sha256(version)
        entry, note = dumps(_ladder_entry(version, sha256, elo, result, at)), _notification(version, sha256)
        with self._lock:
            if _promoted_already(version, self._best, self._ladder[-1] if self._ladder else None):
                return  # as idempotent as the Redis registry
            self._best = int(version)
            self._ladder.append(entry)
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub._deliver(note)

    def best_version(self) -> int | None:
        return self._best

    def ladder(self) -> list[LadderEntry]:
        with self._lock:
            return [json.loads(entry) for entry in self._ladder]

    def candidates(self) -> list[int]:
        with self._lock:
            return sorted(self._models)

    def latest_candidate(self) -> int | None:
        with self._lock:
            return max(self._models) if self._models else None

    def subscribe(self) -> LocalSubscription:
        sub = LocalSubscription(self.keys.promotions, self._unsubscribe)
        with self._lock:
            self._subscribers.append(sub)
        return sub

    def _unsubscribe(self, sub: LocalSubscription) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)


if TYPE_CHECKING:
    # Nothing the type checker reads makes the in-process twin (tests do), so this
    # does: a twin that lacks a method of the interface is abstract and cannot be made.
    _LOCAL_TWIN: ModelRegistryLike = LocalModelRegistry()
