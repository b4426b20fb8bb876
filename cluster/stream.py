"""The run's sample stream in Redis: ``SampleStream``, the stream
``tengen:{<run>}:samples``, one entry per game, capped with ``MAXLEN ~`` at about the
replay window. Consumers read through a consumer group and acknowledge what they have
stored, so a dead consumer's entries can be claimed by another. What it shares with
the in-process twin is run/sample_stream.py's ``SampleStreamBase``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import redis

from tengen.cluster.keys import RunKeys
from tengen.cluster.redis_client import RedisLike, call_with_retry
from tengen.engine.interfaces import Decode, Entry
from tengen.run.sample_stream import ENTRY_FIELD, Raw, SampleStreamBase, as_bytes, entry_order

__all__ = ["SampleStream"]

_PAGE = 256


class SampleStream(SampleStreamBase):
    """The run's sample stream in Redis: ``tengen:{run}:samples``, one game per entry."""

    def __init__(self, client: RedisLike, run_id: str, *, maxlen: int):
        super().__init__(run_id, maxlen=maxlen)
        self.keys = RunKeys(run_id)
        # Any: redis-py's stubs type every reply as a sync/async union
        self.client: Any = client

    # -- producers -----------------------------------------------------------------------
    def add_many(self, blobs: Iterable[bytes], *, wait: bool = True) -> list[bytes]:
        """XADD several blobs (MAXLEN ~ maxlen) in one round trip, in order; returns
        their ids. ``wait=False``: try once (RedisUnavailable during an outage), for a
        producer that keeps its games until Redis is back."""
        blobs = list(blobs)
        if not blobs:
            return []

        def write(client: redis.Redis) -> list:
            pipe = client.pipeline(transaction=False)
            for blob in blobs:
                pipe.xadd(self.keys.samples, {ENTRY_FIELD: blob}, maxlen=self.maxlen, approximate=True)
            pipe.hincrby(self.keys.sample_counts, "added", len(blobs))
            return pipe.execute()

        return [as_bytes(i) for i in call_with_retry(self.client, write, wait=wait)[:-1]]

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
        self._count_trimmed(group)
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
        claimed = [as_bytes(i) for i in ids]
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
        self._count_trimmed(group)
        last = as_bytes(self.client.xinfo_stream(self.keys.samples)["last-generated-id"])
        self.client.xgroup_setid(self.keys.samples, group, last)
        while True:
            pending = self.client.xpending_range(self.keys.samples, group, "-", last, 1000)
            if not pending:
                break
            self.ack(group, [p["message_id"] for p in pending])
        added = int(self.client.hget(self.keys.sample_counts, "added") or 0)
        self.client.hset(self.keys.sample_counts, f"delivered:{group}", added)
        return last

    def _count_trimmed(self, group: str) -> None:
        """Count the entries ``MAXLEN`` trimmed before ``group`` read them, once.

        Entries are delivered in order and trimmed oldest first, so when the stream's
        first entry comes after the group's last delivered one, everything in between
        was never delivered: the entries ever added past the group's position
        (``added`` minus ``delivered``) less those still there, all of the stream.
        They are counted (``trimmed_unread:<group>``) and marked delivered, as
        XREADGROUP then skips them, so that they are counted once."""
        first = self.client.xinfo_stream(self.keys.samples).get("first-entry")
        if not first:
            return
        last_delivered = next((as_bytes(g["last-delivered-id"]) for g in self.client.xinfo_groups(self.keys.samples)
                               if as_bytes(g["name"]) == group.encode()), None)
        if last_delivered is None or entry_order(as_bytes(first[0])) <= entry_order(last_delivered):
            return
        added, delivered = (int(c or 0) for c in self.client.hmget(self.keys.sample_counts,
                                                                   ["added", f"delivered:{group}"]))
        gone = added - delivered - self.length()
        if gone > 0:
            pipe = self.client.pipeline(transaction=True)
            pipe.hincrby(self.keys.sample_counts, f"trimmed_unread:{group}", gone)
            pipe.hincrby(self.keys.sample_counts, f"delivered:{group}", gone)
            pipe.execute()

    def trimmed_unread(self, group: str) -> int:
        return int(self.client.hget(self.keys.sample_counts, f"trimmed_unread:{group}") or 0)

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
            if as_bytes(info["name"]) == group.encode():
                if info.get("lag") is not None:
                    return int(info["lag"])
                if as_bytes(info["last-delivered-id"]) == b"0-0":
                    return self.length()
                counts = self.client.hmget(self.keys.sample_counts, ["added", f"delivered:{group}"])
                added, delivered = (int(c or 0) for c in counts)
                return max(0, min(added - delivered, self.length()))
        raise KeyError(f"no consumer group {group!r} on {self.keys.samples}")

    def pending(self, group: str) -> int:
        """Entries delivered to ``group`` and not yet acknowledged."""
        return int(self.client.xpending(self.keys.samples, group)["pending"])

    # -- replay, in pages --------------------------------------------------------------------
    def _oldest_first(self, end: bytes | str | None) -> Iterator[Raw]:
        stop = as_bytes(end) if end is not None else b"+"
        start: bytes = b"-"
        while True:
            page = self.client.xrange(self.keys.samples, start, stop, count=_PAGE)
            for entry_id, fields in page:
                yield as_bytes(entry_id), fields
            if len(page) < _PAGE:
                return
            start = b"(" + as_bytes(page[-1][0])

    def _newest_first(self, end: bytes | str | None, count: int | None) -> Iterator[Raw]:
        top = as_bytes(end) if end is not None else b"+"
        want = _PAGE if count is None else max(1, min(_PAGE, count))
        while True:
            page = self.client.xrevrange(self.keys.samples, top, b"-", count=want)
            for entry_id, fields in page:
                yield as_bytes(entry_id), fields
            if len(page) < want:
                return
            top = b"(" + as_bytes(page[-1][0])


def _stream_entries(reply: Any) -> list[Raw]:
    """``[(id, fields)]`` from an XREADGROUP reply of one stream (RESP2 list or RESP3 map)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        entries = next(iter(reply.values()))
        if entries and isinstance(entries[0], list):
            entries = entries[0]
    else:
        entries = reply[0][1]
    return [(as_bytes(entry_id), fields) for entry_id, fields in entries]


