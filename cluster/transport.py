"""Samples in, models out: the run's Redis keys, its sample stream, its model registry.

Every key of a run lives under ``tengen:{<run_id>}:`` (``RunKeys``, the one place that
spells them). The braces are literal: they are a Redis Cluster hash tag, so all of a
run's keys hash to one slot and ``promote``'s MULTI/EXEC also works on a cluster.

- ``SampleStream``: one stream entry per finished game (field ``g``: a blob from
  ``cluster.codec.encode_game``), capped with ``MAXLEN ~`` at about the replay window.
  Consumers read through a consumer group and acknowledge what they have stored, so
  a dead consumer's entries can be claimed by another. An entry that does not decode
  is counted, remembered in ``last_errors``, acknowledged and skipped: never fatal.
- ``ModelRegistry``: weights blobs by version (``000042``) with their sha256 and
  metadata; ``promote`` sets the best version, extends the Elo ladder and publishes a
  notification on the run's channel in one MULTI/EXEC.
- ``StatusBoard``: per-component status hashes that expire, so dead workers age out.

``LocalSampleStream``, ``LocalModelRegistry`` and ``LocalStatusBoard`` have the same
methods without Redis, for the single-process mode and unit tests; they keep the same
blobs and run the same checks.
"""

from __future__ import annotations

import collections
import hashlib
import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import redis

from tengen.cluster.redis_client import RedisLike, call_with_retry
from tengen.engine.selfplay import GameRecord

__all__ = [
    "RunKeys",
    "version_id",
    "blob_sha256",
    "SampleStream",
    "LocalSampleStream",
    "ModelRegistry",
    "LocalModelRegistry",
    "RegistryError",
    "StatusBoard",
    "LocalStatusBoard",
    "parse_promotion",
    "memory_by_part",
    "ENTRY_FIELD",
]

#: the stream entry field that holds the game blob
ENTRY_FIELD = b"g"
#: how many decode failures ``last_errors`` keeps
ERROR_RING = 32
_PAGE = 256
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")

Decode = Callable[[bytes], GameRecord]
Entry = tuple[bytes, GameRecord]


def blob_sha256(blob: bytes) -> str:
    """Hex sha256 of a weights blob: the same identity as ``engine.network.blob_sha256``
    (not imported from there, because that module loads TensorFlow, which processes
    that only move samples and blobs should not pay for; a test checks they agree)."""
    return hashlib.sha256(blob).hexdigest()


def version_id(version: int) -> str:
    """A model generation as the zero-padded id used in keys, paths and labels: ``000042``."""
    if isinstance(version, bool) or not isinstance(version, int | np.integer) or version < 0:
        raise ValueError(f"a model version is a non-negative integer, got {version!r}")
    return f"{int(version):06d}"


class RunKeys:
    """The Redis keys of one run."""

    def __init__(self, run_id: str):
        if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"run_id must be 1-128 characters of letters, digits, '_', '.', '-', got {run_id!r}")
        self.run_id = run_id
        self.prefix = f"tengen:{{{run_id}}}"
        self.samples = f"{self.prefix}:samples"  # stream: one entry per game
        self.sample_counts = f"{self.prefix}:samples:counts"  # hash: added, delivered:<group>
        self.models = f"{self.prefix}:models"  # sorted set: published versions
        self.best = f"{self.prefix}:best"  # string: the best version
        self.ladder = f"{self.prefix}:ladder"  # list: JSON promotion records, oldest first
        self.promotions = f"{self.prefix}:promotions"  # pub/sub channel
        self.status_prefix = f"{self.prefix}:status:"
        self.desired_workers = f"{self.prefix}:control:workers"  # string: `tengen scale` asks for N

    def model(self, version: int) -> str:
        """Hash: ``blob``, ``sha256``, ``metadata`` (JSON), ``published`` (unix s)."""
        return f"{self.prefix}:model:{version_id(version)}"

    def status(self, component: str) -> str:
        return self.status_prefix + component


# -- the sample stream ----------------------------------------------------------------------


class _DecodeCounter:
    """What both streams do with entries: decode, count and remember the failures."""

    def __init__(self) -> None:
        #: entries that failed to decode (acknowledged and skipped)
        self.bad_entries = 0
        #: the reasons of the latest failures, ``"<id>: <reason>"``
        self.last_errors: collections.deque[str] = collections.deque(maxlen=ERROR_RING)

    def _decode(self, entry_id: bytes, fields: dict | None, decode: Decode) -> GameRecord | None:
        blob = fields.get(ENTRY_FIELD) if fields else None
        if blob is None:
            self._bad(entry_id, f"no {ENTRY_FIELD.decode()!r} field")
            return None
        try:
            return decode(blob)
        except Exception as e:  # a forged or broken entry must never stop a consumer
            self._bad(entry_id, f"{type(e).__name__}: {e}")
            return None

    def ack(self, group: str, ids: Iterable[bytes]) -> int:
        raise NotImplementedError

    def _decode_all(self, group: str, raw: list[tuple[bytes, dict]], decode: Decode) -> list[Entry]:
        """Decode delivered entries; the bad ones are acknowledged here (skipped for
        good), the good ones are the caller's to acknowledge once stored."""
        good, bad = [], []
        for entry_id, fields in raw:
            record = self._decode(entry_id, fields, decode)
            if record is None:
                bad.append(entry_id)
            else:
                good.append((entry_id, record))
        if bad:
            self.ack(group, bad)
        return good

    def _bad(self, entry_id: bytes, reason: str) -> None:
        self.bad_entries += 1
        self.last_errors.append(f"{entry_id.decode(errors='replace')}: {reason}")


class SampleStream(_DecodeCounter):
    """The run's sample stream in Redis: ``tengen:{run}:samples``, one game per entry."""

    def __init__(self, client: RedisLike, run_id: str, *, maxlen: int):
        super().__init__()
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        # Any: redis-py's stubs type every reply as a sync/async union
        self.client: Any = client
        self.keys = RunKeys(run_id)
        self.maxlen = int(maxlen)
        #: entries that had been trimmed away before they could be claimed
        self.trimmed_entries = 0

    # -- producers -----------------------------------------------------------------------
    def add(self, blob: bytes, *, wait: bool = True) -> bytes:
        """XADD one game blob (MAXLEN ~ maxlen); returns the entry id."""
        return self.add_many([blob], wait=wait)[0]

    def add_many(self, blobs: Iterable[bytes], *, wait: bool = True) -> list[bytes]:
        """XADD several blobs in one round trip, in order; returns their ids.
        ``wait=False``: try once (RedisUnavailable during an outage), for a producer
        that keeps its games until Redis is back."""
        blobs = list(blobs)
        if not blobs:
            return []

        def write(client: redis.Redis) -> list:
            pipe = client.pipeline(transaction=False)
            for blob in blobs:
                pipe.xadd(self.keys.samples, {ENTRY_FIELD: blob}, maxlen=self.maxlen, approximate=True)
            pipe.hincrby(self.keys.sample_counts, "added", len(blobs))
            return pipe.execute()

        return [_as_bytes(i) for i in call_with_retry(self.client, write, wait=wait)[:-1]]

    # -- consumers -----------------------------------------------------------------------
    def ensure_group(self, group: str) -> None:
        """Create the consumer group at the stream's start (and the stream if needed)."""
        try:
            self.client.xgroup_create(self.keys.samples, group, id="0", mkstream=True)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise

    def read(self, group: str, consumer: str, *, count: int, block_ms: int, decode: Decode) -> list[Entry]:
        """Up to ``count`` entries never delivered to ``group``, decoded, oldest first.

        Waits up to ``block_ms`` when there are none (0: do not wait). Entries that
        fail to decode are acknowledged and skipped; acknowledge the returned ones
        with ``ack`` once they are stored.
        """
        reply = self.client.xreadgroup(group, consumer, {self.keys.samples: ">"}, count=count,
                                       block=block_ms if block_ms > 0 else None)
        raw = _stream_entries(reply)
        if raw:
            self.client.hincrby(self.keys.sample_counts, f"delivered:{group}", len(raw))
        return self._decode_all(group, raw, decode)

    def ack(self, group: str, ids: Iterable[bytes]) -> int:
        ids = list(ids)
        return int(self.client.xack(self.keys.samples, group, *ids)) if ids else 0

    def claim_stale(self, group: str, consumer: str, *, min_idle_ms: int, decode: Decode,
                    count: int = 100) -> list[Entry]:
        """Take over up to ``count`` entries that another consumer of ``group`` was
        given but has not acknowledged for ``min_idle_ms`` (it died), decoded."""
        # One XAUTOCLAIM from the start of the PEL (redis-py drops the cursor of a JUSTID
        # reply; what is left is claimed by the next call). JUSTID, then XRANGE per id:
        # Redis 6.2 answers a claimed entry that was trimmed away with a nil in place of
        # its id, and the id is needed to acknowledge it.
        ids = self.client.xautoclaim(self.keys.samples, group, consumer, min_idle_ms, "0-0",
                                     count=count, justid=True)
        claimed = [_as_bytes(i) for i in ids]
        if not claimed:
            return []
        pipe = self.client.pipeline(transaction=False)
        for entry_id in claimed:
            pipe.xrange(self.keys.samples, entry_id, entry_id)
        raw, gone = [], []
        for entry_id, found in zip(claimed, pipe.execute(), strict=True):
            if found:
                raw.append((entry_id, found[0][1]))
            else:
                gone.append(entry_id)  # trimmed while pending (Redis 6.2 keeps it in the PEL)
        if gone:
            self.trimmed_entries += len(gone)
            self.ack(group, gone)
        return self._decode_all(group, raw, decode)


    def move_group_to_end(self, group: str) -> bytes:
        """Point ``group`` past the last entry and acknowledge everything pending up to
        it; returns that entry's id. A restarted learner rebuilds its window with
        ``replay(end=id)`` and then reads only what arrives after it."""
        self.ensure_group(group)
        last = _as_bytes(self.client.xinfo_stream(self.keys.samples)["last-generated-id"])
        self.client.xgroup_setid(self.keys.samples, group, last)
        while True:
            pending = self.client.xpending_range(self.keys.samples, group, "-", last, 1000)
            if not pending:
                break
            self.ack(group, [p["message_id"] for p in pending])
        added = int(self.client.hget(self.keys.sample_counts, "added") or 0)
        self.client.hset(self.keys.sample_counts, f"delivered:{group}", added)
        return last

    # -- state ---------------------------------------------------------------------------
    def length(self) -> int:
        return int(self.client.xlen(self.keys.samples))

    def lag(self, group: str) -> int:
        """Entries not yet delivered to ``group``.

        Redis 7 reports it (XINFO GROUPS ``lag``); Redis 6.2 (the embedded server) does
        not, and counting entries after the group's last-delivered id would copy every
        blob, so there it is what this class's counters say: games added minus games
        delivered to the group, at most the stream's length.
        """
        for info in self.client.xinfo_groups(self.keys.samples):
            if _as_bytes(info["name"]) == group.encode():
                if info.get("lag") is not None:
                    return int(info["lag"])
                if _as_bytes(info["last-delivered-id"]) == b"0-0":
                    return self.length()
                counts = self.client.hmget(self.keys.sample_counts, ["added", f"delivered:{group}"])
                added, delivered = (int(c or 0) for c in counts)
                return max(0, min(added - delivered, self.length()))
        raise KeyError(f"no consumer group {group!r} on {self.keys.samples}")

    def pending(self, group: str) -> int:
        """Entries delivered to ``group`` and not yet acknowledged."""
        return int(self.client.xpending(self.keys.samples, group)["pending"])

    # -- the durable replay window -----------------------------------------------------------
    def replay(self, decode: Decode, *, count: int | None = None, end: bytes | str | None = None,
               max_positions: int | None = None) -> list[GameRecord]:
        """The games in the stream, oldest first, skipping (and counting) bad entries:
        all of them, or the newest ``count`` games, or the newest games that hold at
        least ``max_positions`` positions; only entries up to ``end`` (an id) if given."""
        return list(self.iter_replay(decode, count=count, end=end, max_positions=max_positions))

    def iter_replay(self, decode: Decode, *, count: int | None = None, end: bytes | str | None = None,
                    max_positions: int | None = None) -> Iterator[GameRecord]:
        """``replay`` one game at a time (a whole stream need not sit in memory twice)."""
        stop = _as_bytes(end) if end is not None else b"+"
        if count is None and max_positions is None:
            start: bytes = b"-"
            while True:
                page = self.client.xrange(self.keys.samples, start, stop, count=_PAGE)
                for entry_id, fields in page:
                    record = self._decode(_as_bytes(entry_id), fields, decode)
                    if record is not None:
                        yield record
                if len(page) < _PAGE:
                    return
                start = b"(" + _as_bytes(page[-1][0])
        newest: list[GameRecord] = []
        positions, top = 0, stop
        while (count is None or len(newest) < count) and (max_positions is None or positions < max_positions):
            want = _PAGE if count is None else min(_PAGE, count - len(newest))
            page = self.client.xrevrange(self.keys.samples, top, b"-", count=want)
            for entry_id, fields in page:
                record = self._decode(_as_bytes(entry_id), fields, decode)
                if record is None:
                    continue
                newest.append(record)
                positions += len(record.value)
                if (count is not None and len(newest) >= count) or (
                        max_positions is not None and positions >= max_positions):
                    break
            if len(page) < want:
                break
            top = b"(" + _as_bytes(page[-1][0])
        yield from reversed(newest)


def _as_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _stream_entries(reply: Any) -> list[tuple[bytes, dict]]:
    """``[(id, fields)]`` from an XREADGROUP reply of one stream (RESP2 list or RESP3 map)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        entries = next(iter(reply.values()))
        if entries and isinstance(entries[0], list):
            entries = entries[0]
    else:
        entries = reply[0][1]
    return [(_as_bytes(entry_id), fields) for entry_id, fields in entries]


class LocalSampleStream(_DecodeCounter):
    """``SampleStream`` in this process: the same blobs, groups, acks and checks.

    The cap is exact where Redis's ``MAXLEN ~`` is approximate. Thread-safe, so that
    a producer thread and a consumer thread can share one.
    """

    def __init__(self, run_id: str = "local", *, maxlen: int):
        super().__init__()
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self.keys = RunKeys(run_id)
        self.maxlen = int(maxlen)
        self.trimmed_entries = 0
        self._entries: collections.OrderedDict[int, bytes] = collections.OrderedDict()  # seq -> blob
        self._next = 1
        self._groups: dict[str, dict] = {}  # name -> {"last": seq, "pending": {seq: [consumer, t]}}
        self._cond = threading.Condition()

    @staticmethod
    def _id(seq: int) -> bytes:
        return f"{seq}-0".encode()

    @staticmethod
    def _seq(entry_id: bytes | str) -> int:
        text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        return int(text.split("-")[0])

    def add(self, blob: bytes, *, wait: bool = True) -> bytes:
        return self.add_many([blob])[0]

    def add_many(self, blobs: Iterable[bytes], *, wait: bool = True) -> list[bytes]:
        ids = []
        with self._cond:
            for blob in blobs:
                if not isinstance(blob, bytes | bytearray | memoryview):
                    raise TypeError(f"a stream entry is bytes, got {type(blob).__name__}")
                seq, self._next = self._next, self._next + 1
                self._entries[seq] = bytes(blob)
                ids.append(self._id(seq))
            while len(self._entries) > self.maxlen:
                self._entries.popitem(last=False)
            self._cond.notify_all()
        return ids

    def ensure_group(self, group: str) -> None:
        with self._cond:
            self._groups.setdefault(group, {"last": 0, "pending": {}})

    def _group(self, group: str) -> dict:
        if group not in self._groups:
            raise KeyError(f"no consumer group {group!r}")
        return self._groups[group]

    def read(self, group: str, consumer: str, *, count: int, block_ms: int, decode: Decode) -> list[Entry]:
        deadline = time.monotonic() + max(block_ms, 0) / 1000
        with self._cond:
            state = self._group(group)
            while True:
                fresh = [seq for seq in self._entries if seq > state["last"]][:count]
                remaining = deadline - time.monotonic()
                if fresh or remaining <= 0:
                    break
                self._cond.wait(remaining)
            now = time.monotonic()
            raw = []
            for seq in fresh:
                state["pending"][seq] = [consumer, now]
                raw.append((self._id(seq), {ENTRY_FIELD: self._entries[seq]}))
            if fresh:
                state["last"] = fresh[-1]
        return self._decode_all(group, raw, decode)


    def ack(self, group: str, ids: Iterable[bytes]) -> int:
        with self._cond:
            pending = self._group(group)["pending"]
            return sum(pending.pop(self._seq(i), None) is not None for i in ids)

    def claim_stale(self, group: str, consumer: str, *, min_idle_ms: int, decode: Decode,
                    count: int = 100) -> list[Entry]:
        with self._cond:
            pending = self._group(group)["pending"]
            now = time.monotonic()
            stale = [seq for seq, (_, t) in sorted(pending.items()) if (now - t) * 1000 >= min_idle_ms][:count]
            raw = []
            for seq in stale:
                if seq not in self._entries:
                    del pending[seq]
                    self.trimmed_entries += 1
                    continue
                pending[seq] = [consumer, now]
                raw.append((self._id(seq), {ENTRY_FIELD: self._entries[seq]}))
        return self._decode_all(group, raw, decode)

    def move_group_to_end(self, group: str) -> bytes:
        with self._cond:
            self.ensure_group(group)
            last = self._next - 1
            state = self._groups[group]
            state["last"] = last
            state["pending"] = {seq: v for seq, v in state["pending"].items() if seq > last}
            return self._id(last) if last else b"0-0"

    def length(self) -> int:
        with self._cond:
            return len(self._entries)

    def lag(self, group: str) -> int:
        with self._cond:
            last = self._group(group)["last"]
            return sum(seq > last for seq in self._entries)

    def pending(self, group: str) -> int:
        with self._cond:
            return len(self._group(group)["pending"])

    def replay(self, decode: Decode, *, count: int | None = None, end: bytes | str | None = None,
               max_positions: int | None = None) -> list[GameRecord]:
        return list(self.iter_replay(decode, count=count, end=end, max_positions=max_positions))

    def iter_replay(self, decode: Decode, *, count: int | None = None, end: bytes | str | None = None,
                    max_positions: int | None = None) -> Iterator[GameRecord]:
        stop = self._seq(end) if end is not None and _as_bytes(end) != b"+" else None
        with self._cond:
            entries = [(seq, blob) for seq, blob in self._entries.items() if stop is None or seq <= stop]
        if count is None and max_positions is None:
            for seq, blob in entries:
                record = self._decode(self._id(seq), {ENTRY_FIELD: blob}, decode)
                if record is not None:
                    yield record
            return
        newest: list[GameRecord] = []
        positions = 0
        for seq, blob in reversed(entries):
            if (count is not None and len(newest) >= count) or (
                    max_positions is not None and positions >= max_positions):
                break
            record = self._decode(self._id(seq), {ENTRY_FIELD: blob}, decode)
            if record is not None:
                newest.append(record)
                positions += len(record.value)
        yield from reversed(newest)


# -- the model registry ---------------------------------------------------------------------


class RegistryError(ValueError):
    """A model the registry does not hold, or one whose bytes do not match its sha256."""


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True, allow_nan=False)


def _verified(version: int, blob: bytes | None, sha256: bytes | str | None) -> bytes:
    if blob is None or sha256 is None:
        raise RegistryError(f"model {version_id(version)} is not in the registry")
    expected = sha256.decode() if isinstance(sha256, bytes) else sha256
    actual = blob_sha256(blob)
    if actual != expected:
        raise RegistryError(
            f"model {version_id(version)}: the stored blob's sha256 {actual[:12]}... does not match "
            f"the published {expected[:12]}... (corrupted or tampered with)")
    return blob


def _ladder_entry(version: int, sha256: str, elo: float | None, result: dict, at: float | None) -> dict:
    return {"version": int(version), "id": version_id(version), "sha256": sha256,
            "elo": None if elo is None else float(elo), "result": result, "time": time.time() if at is None else at}


def _notification(version: int, sha256: str) -> str:
    return _dumps({"version": int(version), "id": version_id(version), "sha256": sha256})


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


class ModelRegistry:
    """Weights blobs by version in Redis, the best version, the Elo ladder, promotions."""

    def __init__(self, client: RedisLike, run_id: str):
        # Any: redis-py's stubs type every reply as a sync/async union
        self.client: Any = client
        self.keys = RunKeys(run_id)

    def publish(self, version: int, blob: bytes, metadata: dict) -> str:
        """Store ``blob`` as ``version`` with its sha256 and ``metadata``; returns the
        sha256. Versions are immutable: publishing other bytes under a published
        version raises RegistryError (the same bytes again is a no-op)."""
        key = self.keys.model(version)
        sha256 = blob_sha256(blob)
        existing = self.client.hget(key, "sha256")
        if existing is not None:
            if existing.decode() != sha256:
                raise RegistryError(f"model {version_id(version)} is already published with other bytes")
            return sha256
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"blob": blob, "sha256": sha256, "metadata": _dumps(metadata),
                                "published": repr(time.time())})
        pipe.zadd(self.keys.models, {version_id(version): int(version)})
        pipe.execute()
        return sha256

    def fetch(self, version: int) -> tuple[bytes, dict]:
        """``(blob, metadata)`` of ``version``, the blob checked against its sha256."""
        blob, sha256, metadata = self.client.hmget(self.keys.model(version), ["blob", "sha256", "metadata"])
        if blob is None and sha256 is not None:
            raise RegistryError(f"model {version_id(version)} was pruned from the registry "
                                "(promoted models stay in the run directory's models/)")
        return _verified(version, blob, sha256), json.loads(metadata)

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
        spared = set(versions[-keep_candidates:]) | {int(v) for v in keep}
        best = self.best_version()
        if best is not None:
            spared.add(best)
        pruned = []
        for version in versions:
            if version not in spared and self.client.hdel(self.keys.model(version), "blob"):
                pruned.append(version)
        return pruned

    def sha256(self, version: int) -> str:
        sha256 = self.client.hget(self.keys.model(version), "sha256")
        if sha256 is None:
            raise RegistryError(f"model {version_id(version)} is not in the registry")
        return sha256.decode()

    def promote(self, version: int, *, elo: float | None, result: dict, at: float | None = None) -> None:
        """Make ``version`` the best, append it to the Elo ladder and notify the
        subscribers, all in one MULTI/EXEC (``at``: the entry's time, when a ladder is
        rebuilt from a run directory; default now)."""
        sha256 = self.sha256(version)
        entry = _dumps(_ladder_entry(version, sha256, elo, result, at))

        def promote_once(client: redis.Redis) -> None:
            # A retry after a lost reply must not push the ladder entry twice.
            last = client.lindex(self.keys.ladder, -1)
            if last is not None and json.loads(last)["version"] == int(version) and \
                    client.get(self.keys.best) == str(int(version)).encode():
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

    def ladder(self) -> list[dict]:
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


class LocalSubscription:
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


class LocalModelRegistry:
    """``ModelRegistry`` in this process (same checks, same ladder and notifications)."""

    def __init__(self, run_id: str = "local"):
        self.keys = RunKeys(run_id)
        self._models: dict[int, dict] = {}  # version -> {"blob", "sha256", "metadata" (JSON)}
        self._best: int | None = None
        self._ladder: list[str] = []
        self._subscribers: list[LocalSubscription] = []
        self._lock = threading.Lock()

    def publish(self, version: int, blob: bytes, metadata: dict) -> str:
        version_id(version)
        sha256 = blob_sha256(blob)
        with self._lock:
            existing = self._models.get(int(version))
            if existing is not None:
                if existing["sha256"] != sha256:
                    raise RegistryError(f"model {version_id(version)} is already published with other bytes")
                return sha256
            self._models[int(version)] = {"blob": bytes(blob), "sha256": sha256, "metadata": _dumps(metadata)}
        return sha256

    def fetch(self, version: int) -> tuple[bytes, dict]:
        with self._lock:
            model = self._models.get(int(version), {})
        if model and model.get("blob") is None:
            raise RegistryError(f"model {version_id(version)} was pruned from the registry "
                                "(promoted models stay in the run directory's models/)")
        return _verified(version, model.get("blob"), model.get("sha256")), json.loads(model["metadata"])

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
            spared = set(versions[-keep_candidates:]) | {int(v) for v in keep}
            if self._best is not None:
                spared.add(self._best)
            pruned = [v for v in versions if v not in spared and self._models[v].get("blob") is not None]
            for version in pruned:
                self._models[version]["blob"] = None
        return pruned

    def sha256(self, version: int) -> str:
        with self._lock:
            model = self._models.get(int(version))
        if model is None:
            raise RegistryError(f"model {version_id(version)} is not in the registry")
        return str(model["sha256"])

    def promote(self, version: int, *, elo: float | None, result: dict, at: float | None = None) -> None:
        sha256 = self.sha256(version)
        entry, note = _dumps(_ladder_entry(version, sha256, elo, result, at)), _notification(version, sha256)
        with self._lock:
            if self._best == int(version) and self._ladder and json.loads(self._ladder[-1])["version"] == int(version):
                return  # promoted already: as idempotent as the Redis registry
            self._best = int(version)
            self._ladder.append(entry)
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub._deliver(note)

    def best_version(self) -> int | None:
        return self._best

    def ladder(self) -> list[dict]:
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


# -- status ----------------------------------------------------------------------------------


class StatusBoard:
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
        mapping = {str(k): _dumps(v) for k, v in status.items()} | {"_updated": _dumps(time.time())}

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
        keys = sorted(self.client.scan_iter(match=_glob_escape(self.keys.status_prefix) + "*", count=500))
        if not keys:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        board = {}
        prefix = len(self.keys.status_prefix)
        for key, fields in zip(keys, pipe.execute(), strict=True):
            if fields:
                board[_as_bytes(key).decode()[prefix:]] = {
                    k.decode(): json.loads(v) for k, v in fields.items()}
        return board


def memory_by_part(client: RedisLike, run_id: str) -> dict[str, int]:
    """Bytes the run holds in Redis, by part (``MEMORY USAGE``, which samples a big
    stream), and the server's ``used_memory`` and ``maxmemory`` (0: no limit)."""
    keys = RunKeys(run_id)
    redis_any: Any = client  # redis-py's stubs type every reply as a sync/async union
    versions = [int(score) for _, score in redis_any.zrange(keys.models, 0, -1, withscores=True)]
    status = list(redis_any.scan_iter(match=_glob_escape(keys.status_prefix) + "*", count=500))
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


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


class LocalStatusBoard:
    """``StatusBoard`` in this process (entries expire the same way)."""

    def __init__(self, run_id: str = "local", *, ttl_s: float = 60.0):
        self.keys = RunKeys(run_id)
        self.ttl_s = ttl_s
        self._board: dict[str, tuple[float, dict]] = {}
        self._lock = threading.Lock()

    def set_status(self, component: str, status: dict, *, wait: bool = True) -> None:
        now = time.time()
        entry = json.loads(_dumps(status)) | {"_updated": now}  # same JSON round trip as Redis
        with self._lock:
            self._board[component] = (time.monotonic() + self.ttl_s, entry)

    def get_status(self) -> dict[str, dict]:
        now = time.monotonic()
        with self._lock:
            self._board = {c: v for c, v in self._board.items() if v[0] > now}
            return {c: dict(v[1]) for c, v in sorted(self._board.items())}
