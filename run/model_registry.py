"""The model registry's rules, and the registry in this process.

A registry holds weights blobs by version (``000042``) with their sha256 and
metadata, the best version, the Elo ladder and promotion notifications. Its rules are
written once, here, for both twins (``LocalModelRegistry`` below, the single-process
run's and the unit tests'; cluster/registry.py's ``ModelRegistry`` in Redis), and each
twin only stores: versions are immutable (``already_published``), a blob is checked
against its sha256 on every fetch (``read_model``), pruning spares the best, the
newest candidates and what is in use (``spared_versions``), a promotion is recorded once
(``promoted_already``), and the ladder entries and notifications are the same JSON
(``ladder_entry`` and ``ladder_entry_from_json``, run/records.py's, since the ladder
is also ladder.json's; ``notification``). Both are ``engine.interfaces.ModelRegistryLike``.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from tengen.engine.gating import GatingSummary
from tengen.engine.interfaces import LadderEntry, ModelMetadata, ModelRegistryLike, PromotionResult, Subscription
from tengen.run.json_values import dumps
from tengen.run.records import ladder_entry, ladder_entry_from_json
from tengen.run.run_dir import check_run_id, version_id

__all__ = [
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
def not_held(version: int) -> RegistryError:
    return RegistryError(f"model {version_id(version)} is not in the registry")


def already_published(version: int, existing: bytes | str | None, sha256: str) -> bool:
    """Whether ``version`` is published already with these bytes; other bytes raise."""
    if existing is None:
        return False
    if (existing.decode() if isinstance(existing, bytes) else existing) != sha256:
        raise RegistryError(f"model {version_id(version)} is already published with other bytes")
    return True


def read_model(version: int, blob: bytes | None, sha256: bytes | str | None,
                metadata: bytes | str | None) -> tuple[bytes, ModelMetadata]:
    """``(blob, metadata)`` as stored, the blob checked against its sha256."""
    if blob is None and sha256 is not None:
        raise RegistryError(f"model {version_id(version)} was pruned from the registry "
                            "(promoted models stay in the run directory's models/)")
    if blob is None or sha256 is None or metadata is None:
        raise not_held(version)
    expected = sha256.decode() if isinstance(sha256, bytes) else sha256
    actual = blob_sha256(blob)
    if actual != expected:
        raise RegistryError(
            f"model {version_id(version)}: the stored blob's sha256 {actual[:12]}... does not match "
            f"the published {expected[:12]}... (corrupted or tampered with)")
    return blob, json.loads(metadata)


def spared_versions(versions: list[int], *, keep_candidates: int, keep: Iterable[int], best: int | None) -> set[int]:
    """The versions whose weights a prune keeps: the best, ``keep``, the newest
    ``keep_candidates`` of ``versions`` (in order)."""
    spared = set(versions[-keep_candidates:]) | {int(v) for v in keep}
    if best is not None:
        spared.add(best)
    return spared


def promoted_already(version: int, best: int | None, last_entry: bytes | str | None) -> bool:
    """A promotion repeated (a retry after a lost reply) must not extend the ladder twice."""
    return best == int(version) and last_entry is not None and json.loads(last_entry)["version"] == int(version)


def read_ladder_entry(entry: bytes | str, where: str) -> LadderEntry:
    """A ladder entry as a registry stored it, checked."""
    return ladder_entry_from_json(json.loads(entry), where)


def notification(version: int, sha256: str) -> str:
    return dumps({"version": int(version), "id": version_id(version), "sha256": sha256})


def check_best_unchanged(summary: GatingSummary, best: int | None) -> None:
    """A promotion stands only against the best its match played: another one may have
    come in between (a second driver, which the lease refuses, or a replayed match)."""
    if best != int(summary["best"]):
        raise RegistryError(f"candidate {version_id(summary['candidate'])} played {version_id(summary['best'])}, "
                            f"but the best is {'none' if best is None else version_id(best)} now: not promoted")


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
        self.run_id = check_run_id(run_id)
        self._models: dict[int, dict] = {}  # version -> {"blob", "sha256", "metadata" (JSON)}
        self._best: int | None = None
        self._ladder: list[str] = []
        self._decisions: dict[str, str] = {}  # match id -> verdict (JSON)
        self._subscribers: list[LocalSubscription] = []
        self._lock = threading.Lock()

    def publish(self, version: int, blob: bytes, metadata: ModelMetadata) -> str:
        version_id(version)
        sha256 = blob_sha256(blob)
        with self._lock:
            existing = self._models.get(int(version))
            if already_published(version, None if existing is None else existing["sha256"], sha256):
                return sha256
            self._models[int(version)] = {"blob": bytes(blob), "sha256": sha256, "metadata": dumps(metadata)}
        return sha256

    def fetch(self, version: int) -> tuple[bytes, ModelMetadata]:
        with self._lock:
            model = self._models.get(int(version), {})
        return read_model(version, model.get("blob"), model.get("sha256"), model.get("metadata"))

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
            spared = spared_versions(versions, keep_candidates=keep_candidates, keep=keep, best=self._best)
            pruned = [v for v in versions if v not in spared and self._models[v].get("blob") is not None]
            for version in pruned:
                self._models[version]["blob"] = None
        return pruned

    def sha256(self, version: int) -> str:
        with self._lock:
            model = self._models.get(int(version))
        if model is None:
            raise not_held(version)
        return str(model["sha256"])

    def promote(self, version: int, *, elo: float | None, result: PromotionResult, at: float | None = None) -> None:
        sha256 = self.sha256(version)
        entry = dumps(ladder_entry(version, sha256, elo, result, at))
        note = notification(version, sha256)
        with self._lock:
            if promoted_already(version, self._best, self._ladder[-1] if self._ladder else None):
                return  # as idempotent as the Redis registry
            self._best = int(version)
            self._ladder.append(entry)
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub._deliver(note)

    def decision(self, match: str) -> GatingSummary | None:
        with self._lock:
            recorded = self._decisions.get(match)
        return None if recorded is None else json.loads(recorded)

    def decide(self, match: str, summary: GatingSummary, *, elo: float | None) -> GatingSummary:
        promote = summary["decision"] == "promote"
        version = int(summary["candidate"])
        sha256 = self.sha256(version) if promote else ""
        with self._lock:
            if match in self._decisions:
                return json.loads(self._decisions[match])
            if promote:
                check_best_unchanged(summary, self._best)
                self._best = version
                self._ladder.append(dumps(ladder_entry(version, sha256, elo, summary, None)))
                subscribers = list(self._subscribers)
            self._decisions[match] = dumps(summary)
        if promote:
            for sub in subscribers:
                sub._deliver(notification(version, sha256))
        return summary

    def best_version(self) -> int | None:
        return self._best

    def ladder(self) -> list[LadderEntry]:
        with self._lock:
            return [read_ladder_entry(entry, f"the ladder of {self.run_id}, entry {i}")
                    for i, entry in enumerate(self._ladder)]

    def candidates(self) -> list[int]:
        with self._lock:
            return sorted(self._models)

    def latest_candidate(self) -> int | None:
        with self._lock:
            return max(self._models) if self._models else None

    def subscribe(self) -> LocalSubscription:
        sub = LocalSubscription(f"{self.run_id}:promotions", self._unsubscribe)
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
