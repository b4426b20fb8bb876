"""The soak's checker (bench/soak.py), independent of the code it checks: it imports
nothing from tengen (tests/test_soak_checker.py parses its imports), only redis-py,
msgpack, zstandard and numpy, and knows the run only from what is documented about it:

- a game entry of the samples stream, as run/codec.py's docstring and
  docs/architecture.md ("Wire formats") define it: ``zstd(msgpack(header))``, the
  header a map with ``format`` = ``"tengen-game"``, ``version`` 1-3, ``game``,
  ``length``, ``outcome`` and, from version 2, ``game_id``; read here by
  ``decode_game_header``, written again from that text, not imported;
- the run's Redis keys (cluster/keys.py, the architecture's "Redis keys"): everything
  under ``tengen:{<run_id>}:``, the stream ``samples`` (field ``g``, one game an
  entry), each version's hash ``model:<000042>`` (``blob``, ``sha256``), and the
  run id in ``run.json``;
- the run directory ("Run directory"): ``run.json``, ``models/<version>.safetensors``,
  ``status.json`` (``window``, ``window_capacity``, ``duplicate_games``);
- tic-tac-toe's rules and the ``tengen bestmove`` command's documented I/O (one
  position a line as the cells 1-9 played from the start, one move a line back).

What it records during the run:

- ``AckProxy``: a TCP proxy in front of the run's Redis that every client of the run
  goes through. It parses RESP both ways per connection (replies come back in the
  order of the commands, pipelined or not; MULTI/EXEC's queued replies come in EXEC's
  array; AUTH, HELLO and the rest pass through untouched) and records every XADD to
  the samples stream whose reply, a stream id, it handed to the client: an
  *acknowledged* game, by the game id decoded from its payload. On command or with a
  probability it drops such a reply instead: it closes the client's connection after
  Redis applied the XADD, as a network that loses a reply does; the client sees a
  connection error and retries, so the stream holds the game twice, which readers
  must count once. "Handed to the client" is the reply written to its socket: a client
  that gave up on its connection just before (its own timeout) may never read it, so
  a game can be acknowledged twice (``acked_again``): stricter for the loss check,
  since each such game was applied by Redis, and said in the report.
- ``VersionLedger``: the sha256 of every model version each time it is sampled
  (``models/<version>.safetensors`` in the run directory; the registry's stored
  ``sha256`` and the sha256 of its ``blob`` while it holds one).

What it checks at the end (``check_stream``, ``VersionLedger.changed``,
``check_perfect_play``):

- acknowledged games lost: acknowledged game ids not in the stream, except those
  acknowledged within ``FSYNC_WINDOW_S`` before a Redis kill (the AOF is fsynced every
  second: Redis documents that this last second may be lost), which are counted apart;
- games counted twice: the stream may hold a game twice (a reply lost after Redis
  applied the write); the learner must train on it once. The run's count of what it
  trains on is its window (``status.json``'s ``window``, positions; the soak's window
  is never full, so nothing leaves it). Every restarted learner rebuilds its window
  from the whole stream and then reads on through its consumer group, so when the
  run has stopped its window must hold exactly the positions (``length``) of the
  distinct game ids among the entries up to the group's last-delivered id. The
  positions beyond that are positions counted twice; fewer are delivered positions
  missing. The entries that repeat a game id, and the learner's own count of the
  duplicates it dropped, are reported beside it;
- versions whose bytes changed: any version seen with two different sha256s, over
  time or between the run directory and the registry;
- perfect play: the final model, asked through ``tengen bestmove`` as a black box,
  for every position reachable with it to move (it playing its own choices, the
  opponent every legal move), as the first and as the second player; a move that
  lowers the minimax value (``TicTacToe``, solved here) is imperfect.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import random
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import redis
import zstandard

__all__ = [
    "FORMAT_TAG", "KNOWN_VERSIONS", "FSYNC_WINDOW_S", "EntryFormatError", "GameHeader", "decode_game_header",
    "RespParser", "AckProxy", "Ack", "stream_id_le", "StreamCheck", "check_stream", "run_keys_prefix", "VersionLedger",
    "sample_versions", "WindowCheck", "check_window", "minimax_value", "move_values", "winner",
    "PlayCheck", "check_perfect_play", "BestMoveProcess",
]

#: the header's ``format`` tag and the versions the documentation describes
FORMAT_TAG = "tengen-game"
KNOWN_VERSIONS = (1, 2, 3)
#: a stream entry's field that holds the game (cluster/keys.py's docstring, sample_stream's ENTRY_FIELD)
ENTRY_FIELD = b"g"
#: Redis's ``appendfsync everysec``: what it may lose when killed
FSYNC_WINDOW_S = 1.0
#: how many repeated acknowledgements the proxy keeps for the report
KEEP_AGAIN = 10_000
#: a tic-tac-toe game entry decompresses to a few kB; bounded so a bad frame cannot eat memory
MAX_DECOMPRESSED = 1 << 20


# -- the game entry, from the documented format -----------------------------------------------


class EntryFormatError(ValueError):
    """A stream entry that is not a documented tengen game entry (the reason says why)."""


@dataclass(frozen=True)
class GameHeader:
    """The header fields of one game entry that the checks use."""

    format: str
    version: int
    game: str
    game_id: str | None  # None in version 1
    length: int  # recorded positions L
    outcome: float  # +1/0/-1 for player 0


def decode_game_header(blob: bytes) -> GameHeader:
    """The header of a game entry: ``zstd(msgpack(map))``, its format and version checked."""
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=MAX_DECOMPRESSED)
    except zstandard.ZstdError as e:
        raise EntryFormatError(f"not a zstd frame: {e}") from None
    try:
        header = msgpack.unpackb(raw, raw=False)
    except Exception as e:  # msgpack raises several types
        raise EntryFormatError(f"not msgpack: {type(e).__name__}: {e}") from None
    if not isinstance(header, dict):
        raise EntryFormatError(f"the payload is a {type(header).__name__}, not a map")
    if header.get("format") != FORMAT_TAG:
        raise EntryFormatError(f"format {header.get('format')!r}, not {FORMAT_TAG!r}")
    version = header.get("version")
    if version not in KNOWN_VERSIONS or isinstance(version, bool):
        raise EntryFormatError(f"version {version!r}, not one of {KNOWN_VERSIONS}")
    game_id = header.get("game_id")
    if version >= 2 and not (isinstance(game_id, str) and game_id):
        raise EntryFormatError(f"version {version} without a game_id")
    length, outcome = header.get("length"), header.get("outcome")
    if not isinstance(length, int) or isinstance(length, bool) or length < 0:
        raise EntryFormatError(f"length {length!r}")
    if not isinstance(outcome, int | float) or isinstance(outcome, bool):
        raise EntryFormatError(f"outcome {outcome!r}")
    return GameHeader(format=FORMAT_TAG, version=int(version), game=str(header.get("game")),
                      game_id=game_id if version >= 2 else None, length=length, outcome=float(outcome))


# -- RESP, both ways ---------------------------------------------------------------------------

#: RESP2 and RESP3 reply types: a line, a length-prefixed string, or a count of items
_LINE_TYPES = frozenset(b"+-:_,#(")
_BULK_TYPES = frozenset(b"$=!")
_AGGREGATE_TYPES = {ord("*"): 1, ord("~"): 1, ord(">"): 1, ord("%"): 2, ord("|"): 2}


@dataclass(frozen=True)
class Reply:
    """One RESP value: its type byte (``+``, ``-``, ``$``, ``*``...) and its value
    (bytes for lines and strings, None for a null, a list of Replies for aggregates)."""

    kind: str
    value: Any


class RespParser:
    """Complete RESP values from a byte stream fed in pieces: ``feed(data)``, then
    ``pop()`` returns ``(value, raw bytes)`` per complete value, or None."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def pop(self) -> tuple[Reply, bytes] | None:
        parsed = _parse(self._buffer, 0)
        if parsed is None:
            return None
        value, end = parsed
        raw = bytes(self._buffer[:end])
        del self._buffer[:end]
        return value, raw


def _parse(buf: bytearray, pos: int) -> tuple[Reply, int] | None:
    """The RESP value at ``pos`` and where it ends, or None if it is not all there."""
    if pos >= len(buf):
        return None
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        return None
    kind, line = buf[pos], bytes(buf[pos + 1:nl])
    if kind in _LINE_TYPES:
        return Reply(chr(kind), line), nl + 2
    if kind in _BULK_TYPES:
        size = int(line)
        if size < 0:
            return Reply(chr(kind), None), nl + 2
        end = nl + 2 + size
        if len(buf) < end + 2:
            return None
        return Reply(chr(kind), bytes(buf[nl + 2:end])), end + 2
    if kind in _AGGREGATE_TYPES:
        count = int(line)
        if count < 0:
            return Reply(chr(kind), None), nl + 2
        items, pos = [], nl + 2
        for _ in range(count * _AGGREGATE_TYPES[kind]):
            parsed = _parse(buf, pos)
            if parsed is None:
                return None
            item, pos = parsed
            items.append(item)
        if kind == ord("|"):  # an attribute map comes before the reply it describes
            following = _parse(buf, pos)
            return following
        return Reply(chr(kind), items), pos
    # an inline command (a person typing into telnet): the words of one line
    return Reply("inline", [Reply("$", word) for word in bytes(buf[pos:nl]).split()]), nl + 2


def command_words(value: Reply) -> list[bytes]:
    """A client's command as its words (an array of bulk strings, or an inline line)."""
    if value.kind == "inline":
        return [item.value for item in value.value]
    if value.kind != "*" or value.value is None:
        return []
    return [item.value if isinstance(item.value, bytes) else b"" for item in value.value]


def xadd_payload(words: Sequence[bytes]) -> tuple[bytes, bytes | None]:
    """``(key, the game field's value)`` of ``XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~]
    n [LIMIT c]] id field value ...`` (the value None when no ``g`` field is there)."""
    key, i = words[1], 2
    while i < len(words):
        word = words[i].upper()
        if word == b"NOMKSTREAM":
            i += 1
        elif word in (b"MAXLEN", b"MINID"):
            i += 2 if words[i + 1] in (b"=", b"~") else 1
            i += 1
        elif word == b"LIMIT":
            i += 2
        else:
            break
    pairs = words[i + 1:]  # past the id
    for name, value in zip(pairs[0::2], pairs[1::2], strict=False):
        if name == ENTRY_FIELD:
            return key, value
    return key, None


# -- the proxy ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    """An XADD of a game whose reply (its stream id) was handed to the client."""

    game_id: str
    entry_id: str
    at: float  # time.time() when the reply went to the client


@dataclass
class _Pending:
    """What a command's reply will mean."""

    kind: str  # "plain", "xadd", "multi", "queued", "exec"
    game_id: str | None = None
    queued: list[_Pending] = field(default_factory=list)  # EXEC's commands


class AckProxy:
    """A TCP proxy in front of Redis that records acknowledged XADDs to the samples
    stream (any key ending in ``:samples``) and can drop their replies.

    ``AckProxy("10.0.0.2", 6380, listen_host="10.0.0.1").start()``; its ``url`` is
    what the run's clients are given. ``drop_probability`` (seeded by ``seed``) or
    ``drop_next(n)``: the next acknowledgements are not forwarded; the client's
    connection is closed instead, after Redis applied the write (``dropped``).
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, listen_host: str = "127.0.0.1",
                 listen_port: int = 0, drop_probability: float = 0.0, seed: int = 0,
                 samples_suffix: bytes = b":samples"):
        self.upstream = (upstream_host, upstream_port)
        self.listen_host, self.listen_port = listen_host, listen_port
        self.drop_probability = drop_probability
        self.samples_suffix = samples_suffix
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._drop_budget = 0
        #: game id -> when it was first acknowledged
        self.acked: dict[str, float] = {}
        #: acknowledgements in all (a game acknowledged twice counts twice)
        self.ack_count = 0
        #: games acknowledged again: (game id, first, this time), the first ``KEEP_AGAIN``
        self.acked_again: list[tuple[str, float, float]] = []
        #: XADDs that Redis applied and whose reply was dropped here
        self.dropped: list[Ack] = []
        #: XADD payloads to the samples stream that did not decode (should stay 0)
        self.undecodable: list[str] = []
        self.connections = 0
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._open: set[_Connection] = set()
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"redis://{self.listen_host}:{self.listen_port}/0"

    def start(self) -> AckProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.listen_host, self.listen_port))
        listener.listen(128)
        listener.settimeout(0.5)  # so that stop() is seen
        self.listen_port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept, name="ack-proxy", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            connections = list(self._open)
        for connection in connections:
            connection.close()

    def drop_next(self, count: int = 1) -> None:
        """The next ``count`` acknowledgements of games are dropped."""
        with self._lock:
            self._drop_budget += count

    def _should_drop(self) -> bool:
        with self._lock:
            if self._drop_budget > 0:
                self._drop_budget -= 1
                return True
            return self.drop_probability > 0 and self._rng.random() < self.drop_probability

    def _record(self, acks: Iterable[Ack]) -> None:
        with self._lock:
            for ack in acks:
                self.ack_count += 1
                first = self.acked.setdefault(ack.game_id, ack.at)
                if first != ack.at and len(self.acked_again) < KEEP_AGAIN:
                    self.acked_again.append((ack.game_id, first, ack.at))

    def _retract(self, acks: Iterable[Ack]) -> None:
        """Undo ``_record(acks)``: their reply never reached the client."""
        with self._lock:
            for ack in acks:
                self.ack_count -= 1
                if self.acked.get(ack.game_id) == ack.at:
                    del self.acked[ack.game_id]
                elif (again := (ack.game_id, self.acked.get(ack.game_id), ack.at)) in self.acked_again:
                    self.acked_again.remove(again)

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5.0)
            except OSError:  # Redis is down: the client sees its connection closed
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = _Connection(self, client, upstream)
            with self._lock:
                self.connections += 1
                self._open.add(connection)
            connection.start()

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._open.discard(connection)


class _Connection:
    """One client's connection and its own to Redis: commands parsed on the way in
    (their meaning queued), replies parsed on the way out and matched to them in order."""

    def __init__(self, proxy: AckProxy, client: socket.socket, upstream: socket.socket):
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.pending: list[_Pending] = []
        self.lock = threading.Lock()
        self.in_multi: list[_Pending] | None = None
        self.passthrough = False  # pub/sub or MONITOR: replies no longer answer commands one by one
        self.closed = False

    def start(self) -> None:
        for target, name in ((self._commands, "in"), (self._replies, "out")):
            threading.Thread(target=target, name=f"ack-proxy-{name}", daemon=True).start()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for s in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self.proxy._forget(self)

    def _commands(self) -> None:
        parser = RespParser()
        try:
            while True:
                data = self.client.recv(1 << 16)
                if not data:
                    break
                parser.feed(data)
                out = bytearray()
                while (item := parser.pop()) is not None:
                    value, raw = item
                    self._expect(command_words(value))
                    out += raw
                if out:
                    self.upstream.sendall(out)
        except (OSError, ValueError):
            pass
        self.close()

    def _expect(self, words: list[bytes]) -> None:
        """Queue what the reply to ``words`` will mean (before the command is sent on,
        so that its reply always finds it)."""
        name = words[0].upper() if words else b""
        if name in (b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE", b"MONITOR"):
            self.passthrough = True
        pending = _Pending("plain")
        if name == b"XADD" and len(words) > 3 and words[1].endswith(self.proxy.samples_suffix):
            _, payload = xadd_payload(words)
            if payload is not None:
                try:
                    pending = _Pending("xadd", game_id=decode_game_header(payload).game_id)
                except EntryFormatError as e:
                    with self.proxy._lock:
                        self.proxy.undecodable.append(str(e))
        if name == b"MULTI":
            self.in_multi = []
            pending = _Pending("multi")
        elif name == b"EXEC" and self.in_multi is not None:
            pending, self.in_multi = _Pending("exec", queued=self.in_multi), None
        elif name == b"DISCARD" and self.in_multi is not None:
            self.in_multi = None
        elif self.in_multi is not None:
            self.in_multi.append(pending)
            pending = _Pending("queued")
        with self.lock:
            self.pending.append(pending)

    def _replies(self) -> None:
        parser = RespParser()
        try:
            while True:
                data = self.upstream.recv(1 << 16)
                if not data:
                    break
                if self.passthrough:
                    self.client.sendall(data)
                    continue
                parser.feed(data)
                out, acks = bytearray(), list[Ack]()
                while (item := parser.pop()) is not None:
                    value, raw = item
                    if value.kind == ">":  # a RESP3 push answers no command
                        out += raw
                        continue
                    with self.lock:
                        pending = self.pending.pop(0) if self.pending else _Pending("plain")
                    these = _acks_in(pending, value)
                    if these and self.proxy._should_drop():
                        # Redis applied the write; the client never hears so.
                        self._forward(out, acks)
                        now = time.time()
                        with self.proxy._lock:
                            self.proxy.dropped.extend(Ack(a.game_id, a.entry_id, now) for a in these)
                        self.close()
                        return
                    acks += these
                    out += raw
                self._forward(out, acks)
        except (OSError, ValueError):
            pass
        self.close()

    def _forward(self, replies: bytes | bytearray, acks: list[Ack]) -> None:
        """Hand ``replies`` to the client, ``acks`` acknowledged with them. They are
        recorded first: a client that read the reply must find them recorded; a send
        that fails takes them back (that client never heard of them)."""
        if replies:
            now = time.time()
            sent = [Ack(a.game_id, a.entry_id, now) for a in acks]
            self.proxy._record(sent)
            try:
                self.client.sendall(replies)
            except OSError:
                self.proxy._retract(sent)
                raise


def _acks_in(pending: _Pending, reply: Reply) -> list[Ack]:
    """The games a reply acknowledges: an XADD's stream id, or EXEC's array of them."""
    if pending.kind == "xadd" and reply.kind == "$" and reply.value and pending.game_id:
        return [Ack(pending.game_id, reply.value.decode(), 0.0)]
    if pending.kind == "exec" and reply.kind == "*" and reply.value is not None:
        return [ack for queued, item in zip(pending.queued, reply.value, strict=False)
                for ack in _acks_in(queued, item)]
    return []


# -- the stream at the end ---------------------------------------------------------------------


def run_keys_prefix(run_dir: Path) -> str:
    """``tengen:{<run_id>}``: every key of the run (the id from run.json)."""
    return "tengen:{" + json.loads((Path(run_dir) / "run.json").read_text())["run_id"] + "}"


def read_stream(client: redis.Redis, key: str, *, end: str = "+",
                page: int = 1000) -> Iterable[tuple[str, GameHeader | EntryFormatError]]:
    """Every entry of the stream ``key`` up to ``end``, oldest first: its id and header
    (or why it does not decode)."""
    start = "-"
    while True:
        entries: Any = client.xrange(key, start, end, count=page)
        for entry_id, fields in entries:
            try:
                yield entry_id.decode(), decode_game_header(fields[ENTRY_FIELD])
            except (EntryFormatError, KeyError) as e:
                yield entry_id.decode(), EntryFormatError(str(e))
        if len(entries) < page:
            return
        start = "(" + entries[-1][0].decode()


def stream_id_le(a: str, b: str) -> bool:
    """Whether stream id ``a`` (``<ms>-<seq>``) is at or before ``b``."""
    def key(entry_id: str) -> tuple[int, int]:
        ms, _, seq = entry_id.partition("-")
        return int(ms), int(seq or 0)
    return key(a) <= key(b)


@dataclass(frozen=True)
class StreamCheck:
    """Acknowledged games against the stream."""

    acknowledged: int  # distinct game ids acknowledged
    entries: int  # entries in the stream
    distinct_games: int  # distinct game ids in it
    repeated_entries: int  # entries whose game id an earlier entry has (dropped replies retried)
    undecodable: int
    lost: list[str]  # acknowledged, not in the stream, not excused
    lost_in_fsync_window: list[str]  # acknowledged within FSYNC_WINDOW_S before a Redis kill, not there


def check_stream(acked: dict[str, float], stream_ids: Iterable[str | None], *, redis_kills: Sequence[float],
                 undecodable: int = 0, fsync_window_s: float = FSYNC_WINDOW_S) -> StreamCheck:
    """Which acknowledged games (``acked``: id -> when) the stream (its entries' game
    ids, in order) lacks, apart from those Redis may lose by its documented fsync."""
    seen: set[str] = set()
    entries = repeated = 0
    for game_id in stream_ids:
        entries += 1
        if game_id is None:
            continue
        if game_id in seen:
            repeated += 1
        seen.add(game_id)
    lost, excused = [], []
    for game_id, at in acked.items():
        if game_id in seen:
            continue
        if any(0 <= kill - at <= fsync_window_s for kill in redis_kills):
            excused.append(game_id)
        else:
            lost.append(game_id)
    return StreamCheck(acknowledged=len(acked), entries=entries, distinct_games=len(seen), repeated_entries=repeated,
                       undecodable=undecodable, lost=sorted(lost), lost_in_fsync_window=sorted(excused))


@dataclass(frozen=True)
class WindowCheck:
    """The learner's window against the distinct games it was delivered."""

    window: int  # positions in the window, as the run's last status says
    window_capacity: int
    expected: int  # positions of the distinct games up to the group's last-delivered id
    learner_duplicates: int  # games the learner says it got twice and dropped

    @property
    def counted_twice(self) -> int:
        """Positions in the window beyond the distinct games delivered."""
        return max(0, self.window - self.expected)

    @property
    def missing(self) -> int:
        """Delivered positions not in the window."""
        return max(0, self.expected - self.window)

    @property
    def valid(self) -> bool:
        """Whether the check says anything: a full window has let positions go."""
        return self.window < self.window_capacity


def check_window(status: dict, delivered: Iterable[GameHeader]) -> WindowCheck:
    """The run's last status (``window``, ``window_capacity``, ``duplicate_games``)
    against the headers of the entries delivered to the learner (in stream order)."""
    seen: set[str] = set()
    expected = 0
    for header in delivered:
        if header.game_id is not None:
            if header.game_id in seen:
                continue
            seen.add(header.game_id)
        expected += header.length
    return WindowCheck(window=int(status["window"]), window_capacity=int(status["window_capacity"]),
                       expected=expected, learner_duplicates=int(status.get("duplicate_games", 0)))


def last_delivered(client: redis.Redis, key: str, group: str = "learner") -> str | None:
    """The consumer group's last-delivered id (None: no such group)."""
    groups: Any = client.xinfo_groups(key)
    for info in groups:
        name = info["name"].decode() if isinstance(info["name"], bytes) else info["name"]
        if name == group:
            last = info["last-delivered-id"]
            return last.decode() if isinstance(last, bytes) else str(last)
    return None


# -- model versions ----------------------------------------------------------------------------


class VersionLedger:
    """Every sha256 seen for each model version, by where it was seen."""

    def __init__(self) -> None:
        #: version -> {sha256: the first (where, when) it was seen}
        self.seen: dict[int, dict[str, tuple[str, float]]] = {}

    def observe(self, version: int, sha256: str, where: str, at: float | None = None) -> None:
        self.seen.setdefault(version, {}).setdefault(sha256, (where, time.time() if at is None else at))

    def changed(self) -> dict[int, dict[str, tuple[str, float]]]:
        """The versions seen with more than one sha256, with each and where it was seen first."""
        return {version: hashes for version, hashes in sorted(self.seen.items()) if len(hashes) > 1}


def sample_versions(ledger: VersionLedger, run_dir: Path, client: redis.Redis | None, prefix: str) -> int:
    """Note the sha256 of every version in ``models/`` and in the registry (its stored
    sha256, and its blob's while it holds one). Returns how many were read."""
    count = 0
    for path in sorted((Path(run_dir) / "models").glob("*.safetensors")):
        with contextlib.suppress(OSError, ValueError):  # being written, or thinned out meanwhile
            data = path.read_bytes()
            ledger.observe(int(path.stem), hashlib.sha256(data).hexdigest(), "run_dir")
            count += 1
    if client is None:
        return count
    glob_prefix = prefix.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*").replace("?", "\\?")
    keys = list(client.scan_iter(match=f"{glob_prefix}:model:*", count=1000))
    for i in range(0, len(keys), 500):  # a run of hours publishes thousands of versions
        pipe = client.pipeline(transaction=False)
        for key in keys[i:i + 500]:
            pipe.hmget(key, ["sha256", "blob"])
        replies: Any = pipe.execute()
        for key, (sha256, blob) in zip(keys[i:i + 500], replies, strict=True):
            version = int(key.decode().rsplit(":", 1)[1])
            if sha256:
                ledger.observe(version, sha256.decode(), "registry sha256")
                count += 1
            if blob:
                ledger.observe(version, hashlib.sha256(blob).hexdigest(), "registry blob")
    return count


# -- tic-tac-toe, solved -----------------------------------------------------------------------

#: the eight lines of cells 0-8 (row-major from the top-left; cell k is move text k+1)
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
Board = tuple[int, ...]  # 9 cells: 0 empty, 1 the first player, 2 the second


def board_of(moves: Sequence[int]) -> Board:
    cells = [0] * 9
    for i, move in enumerate(moves):
        cells[move] = 1 + i % 2
    return tuple(cells)


def winner(board: Board) -> int:
    """1 or 2 when that player has three in a line, else 0."""
    for a, b, c in LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return 0


def _to_move(board: Board) -> int:
    return 1 if board.count(1) == board.count(2) else 2


@functools.cache
def minimax_value(board: Board) -> int:
    """The value of ``board`` for the player to move with perfect play: +1 a win, 0 a
    draw, -1 a loss (a finished board: -1 if the last mover won, else 0)."""
    if winner(board):
        return -1
    empty = [i for i, cell in enumerate(board) if cell == 0]
    if not empty:
        return 0
    return max(move_values(board).values())


def move_values(board: Board) -> dict[int, int]:
    """Each legal move's value for the player to move."""
    me = _to_move(board)
    return {i: -minimax_value(board[:i] + (me,) + board[i + 1:]) for i, cell in enumerate(board) if cell == 0}


def finished(board: Board) -> bool:
    return bool(winner(board)) or 0 not in board


@dataclass(frozen=True)
class PlayCheck:
    """The model's moves in every position reachable with it to move."""

    positions: int
    imperfect: list[tuple[str, str, int, int]]  # (position, its move, its value, the best value)

    @property
    def perfect(self) -> bool:
        return self.positions > 0 and not self.imperfect


def check_perfect_play(best_moves: Callable[[list[str]], list[str]]) -> PlayCheck:
    """Ask ``best_moves`` (positions as move texts, e.g. ``"159"``, ``""`` the empty
    board; one move text back each) for every position reachable with the model to
    move, as the first and as the second player; every move that lowers the minimax
    value is imperfect (an illegal or unreadable answer too, as value -2)."""
    asked = 0
    imperfect: list[tuple[str, str, int, int]] = []
    for frontier in ([()], [(m,) for m in range(9)]):  # the model moves first; second
        positions: list[tuple[int, ...]] = list(frontier)
        while positions:
            answers = best_moves(["".join(str(m + 1) for m in moves) for moves in positions])
            asked += len(positions)
            following: list[tuple[int, ...]] = []
            for moves, answer in zip(positions, answers, strict=True):
                board = board_of(moves)
                values = move_values(board)
                best = max(values.values())
                text = "".join(str(m + 1) for m in moves)
                move = int(answer) - 1 if answer.strip().isdigit() else -1
                if move not in values:
                    imperfect.append((text, answer.strip(), -2, best))
                    continue
                if values[move] < best:
                    imperfect.append((text, answer.strip(), values[move], best))
                after = (*moves, move)
                if finished(board_of(after)):
                    continue
                for reply in move_values(board_of(after)):
                    if not finished(board_of((*after, reply))):
                        following.append((*after, reply))
            positions = following
    return PlayCheck(positions=asked, imperfect=imperfect)


class BestMoveProcess:
    """``tengen bestmove`` as a black box: a long-lived process, positions written to
    its stdin a line each, its moves read back a line each."""

    def __init__(self, argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
                 chunk: int = 200):
        self.process = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
        self.chunk = chunk  # lines in flight: well within the pipes' buffers

    def __call__(self, positions: list[str]) -> list[str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        answers: list[str] = []
        for i in range(0, len(positions), self.chunk):
            part = positions[i:i + self.chunk]
            self.process.stdin.write("".join(f"{p}\n" for p in part))
            self.process.stdin.flush()
            for _ in part:
                line = self.process.stdout.readline()
                if not line:
                    raise RuntimeError(f"bestmove exited: {self.stderr_tail()}")
                answers.append(line.strip())
        return answers

    def stderr_tail(self) -> str:
        self.close()
        assert self.process.stderr is not None
        return self.process.stderr.read()[-2000:]

    def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=60)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
