"""The run's model registry in Redis: ``ModelRegistry``, whose ``promote`` sets the
best version, extends the ladder and publishes a notification on the run's channel in
one MULTI/EXEC. Its rules, shared with the in-process twin, are run/model_registry.py's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import redis

from tengen.cluster.keys import RunKeys
from tengen.cluster.redis_client import RedisLike, call_with_retry
from tengen.engine.gating import GatingSummary
from tengen.engine.interfaces import LadderEntry, ModelMetadata, ModelRegistryLike, PromotionResult
from tengen.run.json_values import dumps
from tengen.run.model_registry import (
    already_published,
    blob_sha256,
    check_best_unchanged,
    not_held,
    notification,
    promoted_already,
    read_ladder_entry,
    read_model,
    spared_versions,
)
from tengen.run.records import ladder_entry
from tengen.run.run_dir import version_id

__all__ = ["ModelRegistry"]


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
        if already_published(version, self.client.hget(key, "sha256"), sha256):
            return sha256
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"blob": blob, "sha256": sha256, "metadata": dumps(metadata),
                                "published": repr(time.time())})
        pipe.zadd(self.keys.models, {version_id(version): int(version)})
        pipe.sadd(self.keys.held_models, int(version))
        pipe.execute()
        return sha256

    def fetch(self, version: int) -> tuple[bytes, ModelMetadata]:
        """``(blob, metadata)`` of ``version``, the blob checked against its sha256."""
        return read_model(version, *self.client.hmget(self.keys.model(version), ["blob", "sha256", "metadata"]))

    def discard(self, version: int) -> bool:
        """Delete ``version``'s weights (its sha256 and metadata stay, so the ladder and
        the version counter keep their history); the best version is never discarded.
        Returns whether a blob was deleted."""
        if self.best_version() == int(version):
            return False
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(self.keys.model(version), "blob")
        pipe.srem(self.keys.held_models, int(version))
        return bool(pipe.execute()[0])

    def prune(self, *, keep_candidates: int, keep: Iterable[int] = ()) -> list[int]:
        """Delete the weights of every version but the best, ``keep`` (e.g. the one in
        a match), and the newest ``keep_candidates``; returns the versions pruned.

        It looks only at the versions that still hold weights (``held_models``), a
        few at any time, in two round trips: a run of days has published thousands,
        and one round trip for each, on the driver's loop, grew with the run."""
        held = self._held()
        spared = spared_versions(held, keep_candidates=keep_candidates, keep=keep, best=self.best_version())
        pruned = [version for version in held if version not in spared]
        if pruned:
            pipe = self.client.pipeline(transaction=True)
            for version in pruned:
                pipe.hdel(self.keys.model(version), "blob")
            pipe.srem(self.keys.held_models, *pruned)
            pipe.execute()
        return pruned

    def _held(self) -> list[int]:
        """The versions whose weights are stored, in order. A run from before the set
        (``held_models``) was kept has it made once, from every version's hash."""
        held = self.client.smembers(self.keys.held_models)
        if not held and self.client.zcard(self.keys.models):
            versions = self.candidates()
            pipe = self.client.pipeline(transaction=False)
            for version in versions:
                pipe.hexists(self.keys.model(version), "blob")
            held = [v for v, has_blob in zip(versions, pipe.execute(), strict=True) if has_blob]
            if held:
                self.client.sadd(self.keys.held_models, *held)
        return sorted(int(v) for v in held)

    def sha256(self, version: int) -> str:
        sha256 = self.client.hget(self.keys.model(version), "sha256")
        if sha256 is None:
            raise not_held(version)
        return sha256.decode()

    def promote(self, version: int, *, elo: float | None, result: PromotionResult, at: float | None = None) -> None:
        """Make ``version`` the best, append it to the Elo ladder and notify the
        subscribers, all in one MULTI/EXEC."""
        sha256 = self.sha256(version)
        entry = dumps(ladder_entry(version, sha256, elo, result, at))

        def promote_once(client: redis.Redis) -> None:
            best: Any = client.get(self.keys.best)
            if promoted_already(version, None if best is None else int(best), client.lindex(self.keys.ladder, -1)):
                return
            pipe = client.pipeline(transaction=True)
            pipe.set(self.keys.best, int(version))
            pipe.rpush(self.keys.ladder, entry)
            pipe.publish(self.keys.promotions, notification(version, sha256))
            pipe.execute()

        call_with_retry(self.client, promote_once)

    def decision(self, match: str) -> GatingSummary | None:
        recorded = self.client.hget(self.keys.decisions, match)
        return None if recorded is None else json.loads(recorded)

    def decide(self, match: str, summary: GatingSummary, *, elo: float | None) -> GatingSummary:
        """Record ``match``'s verdict once and, on a "promote", make its candidate the
        best in the same MULTI/EXEC, WATCHing the best and the verdicts: a concurrent
        promotion or verdict makes the transaction fail and be tried again against it."""
        promote = summary["decision"] == "promote"
        version = int(summary["candidate"])
        sha256 = self.sha256(version) if promote else ""
        record = dumps(summary)

        def decide_once(client: redis.Redis) -> GatingSummary:
            while True:
                with client.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(self.keys.best, self.keys.decisions)
                        earlier: Any = pipe.hget(self.keys.decisions, match)
                        if earlier is not None:
                            return json.loads(earlier)
                        if promote:
                            best: Any = pipe.get(self.keys.best)
                            check_best_unchanged(summary, None if best is None else int(best))
                        pipe.multi()
                        pipe.hset(self.keys.decisions, match, record)
                        if promote:
                            pipe.set(self.keys.best, version)
                            pipe.rpush(self.keys.ladder, dumps(ladder_entry(version, sha256, elo, summary, None)))
                            pipe.publish(self.keys.promotions, notification(version, sha256))
                        pipe.execute()
                        return summary
                    except redis.WatchError:
                        continue  # another client changed the best or the verdicts: read them again

        return call_with_retry(self.client, decide_once)

    def best_version(self) -> int | None:
        best = self.client.get(self.keys.best)
        return None if best is None else int(best)

    def ladder(self) -> list[LadderEntry]:
        return [read_ladder_entry(entry, f"Redis's {self.keys.ladder}, entry {i}")
                for i, entry in enumerate(self.client.lrange(self.keys.ladder, 0, -1))]

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


