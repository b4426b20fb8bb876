"""The run's sample stream: what every stream does with its entries, and the stream in
this process.

One entry per finished game (field ``g``: a blob from ``run.codec.encode_game``).
``SampleStreamBase`` holds what both twins share: an entry that does not decode is
counted, remembered in ``last_errors``, acknowledged and skipped, never fatal;
``replay`` picks the newest games the same way; each twin only says how it stores
entries. ``LocalSampleStream`` keeps them in this process, with the same groups and
acknowledgements as Redis's (the single-process run, unit tests); cluster/stream.py's
``SampleStream`` keeps them in a Redis stream. Both are ``engine.interfaces.SampleSink``
and ``SampleSource``.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tengen.engine.interfaces import Decode, Entry, SampleSink, SampleSource
from tengen.engine.selfplay import GameRecord
from tengen.run.run_dir import check_run_id

__all__ = ["SampleStreamBase", "LocalSampleStream", "ENTRY_FIELD", "ERROR_RING", "as_bytes", "entry_order"]

#: the stream entry field that holds the game blob
ENTRY_FIELD = b"g"
#: how many decode failures ``last_errors`` keeps
ERROR_RING = 32

#: an entry as stored: its id and its fields (``{ENTRY_FIELD: blob}``)
Raw = tuple[bytes, dict]


def as_bytes(value: Any) -> bytes:
    """An id or a key name as Redis gives it back (bytes, or str with decoding on)."""
    return value if isinstance(value, bytes) else str(value).encode()


class SampleStreamBase(SampleSink, SampleSource):
    """What both streams do with entries: decode, count and remember the failures,
    and pick the games a replay returns."""

    def __init__(self, run_id: str, *, maxlen: int):
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self.run_id = check_run_id(run_id)
        self.maxlen = int(maxlen)
        #: entries that failed to decode (acknowledged and skipped)
        self.bad_entries = 0
        #: the reasons of the latest failures, ``"<id>: <reason>"``
        self.last_errors: collections.deque[str] = collections.deque(maxlen=ERROR_RING)
        #: entries that had been trimmed away before they could be claimed
        self.trimmed_entries = 0

    def trimmed_unread(self, group: str) -> int:
        """Entries that ``MAXLEN`` trimmed away before ``group`` read them (its
        consumer was down, or slower than the writers, for longer than the stream
        holds): games acknowledged to their workers and never trained on. Counted when
        the group reads past the gap they left, for the run's life."""
        raise NotImplementedError

    def add(self, blob: bytes, *, wait: bool = True) -> bytes:
        """Append one game blob; returns the entry id."""
        return self.add_many([blob], wait=wait)[0]

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
        if count is None and max_positions is None:
            for entry_id, fields in self._oldest_first(end):
                record = self._decode(entry_id, fields, decode)
                if record is not None:
                    yield record
            return
        newest: list[GameRecord] = []
        positions = 0

        def enough() -> bool:
            return (count is not None and len(newest) >= count) or (
                max_positions is not None and positions >= max_positions)

        if not enough():
            for entry_id, fields in self._newest_first(end, count):
                record = self._decode(entry_id, fields, decode)
                if record is not None:
                    newest.append(record)
                    positions += len(record.value)
                    if enough():
                        break
        yield from reversed(newest)

    def _oldest_first(self, end: bytes | str | None) -> Iterator[Raw]:
        """The stored entries up to ``end`` (all: None), oldest first."""
        raise NotImplementedError

    def _newest_first(self, end: bytes | str | None, count: int | None) -> Iterator[Raw]:
        """The stored entries up to ``end``, newest first; ``count``: about how many the
        caller wants (a page size)."""
        raise NotImplementedError

    def newest_entries(self, *, count: int, after: bytes | None = None) -> list[tuple[bytes, bytes]]:
        """Up to ``count`` entries as stored, ``(id, blob)``, newest first, only those
        after the entry ``after`` (an id); nothing is decoded. For readers that keep
        some games (the run directory's sample, ``tengen games``)."""
        out: list[tuple[bytes, bytes]] = []
        if count < 1:
            return out
        floor = entry_order(after) if after is not None else None
        for entry_id, fields in self._newest_first(None, count):
            if floor is not None and entry_order(entry_id) <= floor:
                break
            blob = fields.get(ENTRY_FIELD) if fields else None
            if blob is not None:
                out.append((entry_id, bytes(blob)))
            if len(out) >= count:
                break
        return out

    # -- decoding ------------------------------------------------------------------------
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

    def _decode_all(self, group: str, raw: list[Raw], decode: Decode) -> list[Entry]:
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


def entry_order(entry_id: bytes | str) -> tuple[int, int]:
    """A stream entry id (``1714566000000-3``) as what orders it."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


class LocalSampleStream(SampleStreamBase):
    """``SampleStream`` in this process: the same blobs, groups, acks and checks.

    The cap is exact where Redis's ``MAXLEN ~`` is approximate. Thread-safe, so that
    a producer thread and a consumer thread can share one.
    """

    def __init__(self, run_id: str = "local", *, maxlen: int):
        super().__init__(run_id, maxlen=maxlen)
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
            self._groups.setdefault(group, {"last": 0, "pending": {}, "trimmed_unread": 0})

    def _group(self, group: str) -> dict:
        if group not in self._groups:
            raise KeyError(f"no consumer group {group!r}")
        return self._groups[group]

    def _skip_trimmed(self, state: dict) -> None:
        """Count the entries trimmed away past the group's last one, and skip them."""
        first = next(iter(self._entries), self._next)
        if first - 1 > state["last"]:
            state["trimmed_unread"] += first - 1 - state["last"]
            state["last"] = first - 1

    def trimmed_unread(self, group: str) -> int:
        with self._cond:
            return int(self._group(group)["trimmed_unread"])

    def read(self, group: str, consumer: str, *, count: int, block_ms: int, decode: Decode) -> list[Entry]:
        deadline = time.monotonic() + max(block_ms, 0) / 1000
        with self._cond:
            state = self._group(group)
            self._skip_trimmed(state)
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
            self._skip_trimmed(state)
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

    def _stored(self, end: bytes | str | None) -> list[Raw]:
        stop = self._seq(end) if end is not None and as_bytes(end) != b"+" else None
        with self._cond:
            return [(self._id(seq), {ENTRY_FIELD: blob}) for seq, blob in self._entries.items()
                    if stop is None or seq <= stop]

    def _oldest_first(self, end: bytes | str | None) -> Iterator[Raw]:
        return iter(self._stored(end))

    def _newest_first(self, end: bytes | str | None, count: int | None) -> Iterator[Raw]:
        return reversed(self._stored(end))


if TYPE_CHECKING:
    # Nothing the type checker reads makes the in-process twin (tests do), so this
    # does: a twin that lacks a method of the interface is abstract and cannot be made.
    _LOCAL_TWIN: SampleStreamBase = LocalSampleStream(maxlen=1)
