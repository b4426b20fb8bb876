"""The wire format of a finished self-play game: one stream entry = one game.

Producers (self-play workers) call ``encode_game``; consumers (the learner, tools)
call ``decode_game``. Both import this module, so the format lives in one place.
Nothing here is ever unpickled: an entry is

    zstd( msgpack({header fields..., "arrays": {name: {dtype, shape, encoding, data}}}) )

Header fields (version 1): ``format`` = ``"tengen-game"``, ``version`` = 1, ``game``
(its name, e.g. ``"connect4"``, ``"go19"``), ``worker_id``, ``model_version``,
``outcome`` (+1/0/-1 for player 0), ``resigned``, ``would_resign`` (0, 1 or nil),
``length`` (recorded positions L) and ``created`` (unix seconds). Version 2 adds
``game_id``: the game's identity (its worker incarnation and sequence number), so that
an entry written twice (a write retried after a lost reply) is read once; and its zstd
frame carries a checksum, so that a flipped byte is caught, not decoded into another
game. Version 3 may add three arrays of what the search saw at each move played (all
three or none; a record made without them, as by a test, still encodes). Readers take
versions 1 to 3; the search arrays of a version 1 or 2 entry are None. Arrays, each
with its numpy dtype string, shape and raw little-endian bytes:

- ``planes``  ``|u1`` ``[L, H, W, C]``, encoding ``packbits``: the 0/1 feature planes
  through ``np.packbits`` over the C-order flattening (8x smaller before zstd; the
  unused bits of the last byte must be 0);
- ``policy``  ``<f4`` ``[L, A]``, encoding ``raw``: the search visit distributions.
  float32, not float16: visit distributions are sparse (mostly exact zeros), which
  zstd already squeezes, so float16 would save little on the wire, while its 11-bit
  mantissa (relative error up to 4.9e-4 per entry) would change the training targets
  and use up half of the 1e-3 row-sum tolerance. float32 round-trips exactly.
- ``value``   ``<f4`` ``[L]``, encoding ``raw``: the result from each mover's view,
  times ``mcts.discount`` to the power of the moves left (1 by default);
- ``moves``   ``<i4`` ``[n]``, encoding ``raw``: every move played (n >= L);
- ``search_value``  ``<f4`` ``[n]``, ``raw`` (version 3): the root value Q(root) of the
  search that chose each move, from the mover's view, in [-1, 1];
- ``search_visits`` ``<i4`` ``[n]``, ``raw`` (version 3): the root's visit count N(root)
  then (the subtree kept from the move before included), >= 0;
- ``full_search``   ``|u1`` ``[n]``, ``raw`` (version 3): 1 where the move had a full
  search, 0 where playout-cap randomisation gave it a cheap one; the full searches are
  the recorded positions, in order (as many 1s as L), so the learner can pair each
  position with its search's root value (``train.value_q_weight``);
- ``ownership``     ``|i1`` ``[H * W]``, ``raw`` (version 3, optional on its own): the
  ownership head's target, who owns each point of the final position by Tromp-Taylor
  (+1 player 0, -1 player 1, 0 nobody), row-major; only in games played to the end
  (never with ``resigned``). It joined version 3 before that version was released, so
  no version 3 reader without it exists; its reader returns None where it is absent.

``decode_game`` checks everything before it builds a record and raises
``SampleFormatError`` with the reason; a consumer counts and skips such entries.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import zstandard

from tengen.engine.games.base import Game
from tengen.engine.selfplay import GameRecord, RecordRefused

__all__ = [
    "FORMAT_TAG",
    "FORMAT_VERSION",
    "KNOWN_VERSIONS",
    "MAX_BLOB_BYTES",
    "MAX_POSITIONS",
    "MAX_MOVES",
    "SampleFormatError",
    "GameMeta",
    "encode_game",
    "decode_game",
    "decode_game_meta",
    "entry_identity",
    "game_decoder",
]

FORMAT_TAG = "tengen-game"
#: the version ``encode_game`` writes
FORMAT_VERSION = 3
#: the versions ``decode_game`` reads
KNOWN_VERSIONS = (1, 2, 3)
#: compressed entries larger than this are refused before anything is decompressed
MAX_BLOB_BYTES = 32 * 1024 * 1024
#: recorded positions per game (a 19x19 game is capped well below this)
MAX_POSITIONS = 4096
#: moves per game
MAX_MOVES = 8192
#: zstd level: 1 is the fast end (a worker encodes a game in about a millisecond);
#: higher levels buy a few percent on these already packed arrays
ZSTD_LEVEL = 1
#: with a checksum (XXH64 of the content) that the decompressor verifies
_COMPRESSOR = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
#: how far a policy row may sum from 1
POLICY_SUM_TOLERANCE = 1e-3
#: room for the header fields in the size bound
_HEADER_ALLOWANCE = 64 * 1024
_MAX_WORKER_ID = 256

_HEADER_KEYS_V1 = frozenset({
    "format", "version", "game", "worker_id", "model_version", "outcome", "resigned",
    "would_resign", "length", "created", "arrays",
})
_HEADER_KEYS = {1: _HEADER_KEYS_V1, 2: _HEADER_KEYS_V1 | {"game_id"}, 3: _HEADER_KEYS_V1 | {"game_id"}}
_ARRAY_KEYS = frozenset({"dtype", "shape", "encoding", "data"})
#: name -> (dtype string, encoding) for version 1
_ARRAYS_V1 = {
    "planes": ("|u1", "packbits"),
    "policy": ("<f4", "raw"),
    "value": ("<f4", "raw"),
    "moves": ("<i4", "raw"),
}
#: the per-move search arrays version 3 adds (all three or none)
_SEARCH_ARRAYS = {
    "search_value": ("<f4", "raw"),
    "search_visits": ("<i4", "raw"),
    "full_search": ("|u1", "raw"),
}
#: the ownership target (version 3, optional)
_OWNERSHIP = "ownership"
_ARRAYS = _ARRAYS_V1 | _SEARCH_ARRAYS | {_OWNERSHIP: ("|i1", "raw")}


class SampleFormatError(RecordRefused):
    """A game entry that is not a valid tengen game record; the message says why. A
    producer's game that fails the check is refused (``RecordRefused``): the self-play
    worker drops it and plays on."""


@dataclass(frozen=True)
class GameMeta:
    """What an entry says about itself beyond the record: who made it and when."""

    version: int
    worker_id: str
    created: float  # unix seconds
    game_id: str | None  # None in version 1


# -- encoding ----------------------------------------------------------------------------


def encode_game(record: GameRecord, *, worker_id: str, created: float | None = None) -> bytes:
    """One game as a compressed, versioned blob (see the module docstring); its
    ``game_id`` is ``record.game_id``, or a fresh random one when that is None.

    ``record.planes`` must hold 0/1 values (uint8, bool or float); the record is
    checked with the same rules the reader applies, so a producer fails loudly
    instead of publishing an entry every consumer would drop (SampleFormatError).
    """
    planes = np.asarray(record.planes)
    if planes.ndim != 4:
        raise SampleFormatError(f"planes must be [L, H, W, C], got shape {planes.shape}")
    if planes.dtype == np.uint8:
        if planes.size and planes.max() > 1:
            raise SampleFormatError("planes must hold only 0/1 values")
        bits = planes
    else:
        bits = planes.astype(np.uint8)
        if not np.array_equal(bits, planes):
            raise SampleFormatError("planes must hold only 0/1 values")
        if bits.size and bits.max() > 1:
            raise SampleFormatError("planes must hold only 0/1 values")
    policy = np.ascontiguousarray(record.policy, dtype="<f4")
    value = np.ascontiguousarray(record.value, dtype="<f4")
    moves = np.asarray(record.moves)
    if moves.ndim != 1 or (moves.size and not np.issubdtype(moves.dtype, np.integer)):
        raise SampleFormatError(f"moves must be a 1-D integer array, got {moves.dtype} {moves.shape}")
    moves = np.ascontiguousarray(moves, dtype="<i4")
    if policy.ndim != 2:
        raise SampleFormatError(f"policy must be [L, A], got shape {policy.shape}")
    try:
        outcome = float(record.outcome)
    except (TypeError, ValueError):
        raise SampleFormatError(f"outcome must be a number, got {record.outcome!r}") from None
    _check_record(
        planes_shape=planes.shape, policy=policy, value=value, moves=moves, num_actions=policy.shape[1],
        outcome=outcome, model_version=record.model_version, would_resign=record.would_resign,
    )
    search = _search_arrays(record, len(moves))
    extra = search | _ownership_array(record, planes.shape[1:3])
    if not isinstance(worker_id, str) or len(worker_id) > _MAX_WORKER_ID:
        raise SampleFormatError(f"worker_id must be a string of at most {_MAX_WORKER_ID} characters")
    game_id = record.game_id if record.game_id is not None else secrets.token_hex(8)
    if not isinstance(game_id, str) or not 0 < len(game_id) <= _MAX_WORKER_ID:
        raise SampleFormatError(f"game_id must be a string of 1 to {_MAX_WORKER_ID} characters")
    header = {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "game": str(record.game),
        "worker_id": worker_id,
        "model_version": int(record.model_version),
        "outcome": outcome,
        "resigned": bool(record.resigned),
        "would_resign": None if record.would_resign is None else int(record.would_resign),
        "length": int(planes.shape[0]),
        "created": float(time.time() if created is None else created),
        "game_id": game_id,
        "arrays": {
            "planes": _array_entry("|u1", planes.shape, "packbits", np.packbits(bits, axis=None)),
            "policy": _array_entry("<f4", policy.shape, "raw", policy),
            "value": _array_entry("<f4", value.shape, "raw", value),
            "moves": _array_entry("<i4", moves.shape, "raw", moves),
        } | {name: _array_entry(_ARRAYS[name][0], data.shape, "raw", data) for name, data in extra.items()},
    }
    return _COMPRESSOR.compress(msgpack.packb(header, use_bin_type=True))


def _search_arrays(record: GameRecord, moves: int) -> dict[str, np.ndarray]:
    """The record's search arrays as they go on the wire ({} when it has none)."""
    given = {"search_value": record.search_value, "search_visits": record.search_visits,
             "full_search": record.full_search}
    if all(a is None for a in given.values()):
        return {}
    if any(a is None for a in given.values()):
        raise SampleFormatError("search_value, search_visits and full_search go together: all three or none")
    full = np.asarray(given["full_search"])
    if full.dtype != np.bool_ and full.size and not np.isin(full, (0, 1)).all():
        raise SampleFormatError("full_search must hold only 0/1 values")
    visits = np.asarray(given["search_visits"])
    if visits.size and not np.issubdtype(visits.dtype, np.integer):
        raise SampleFormatError(f"search_visits must be integers, got {visits.dtype}")
    arrays = {"search_value": np.ascontiguousarray(given["search_value"], dtype="<f4"),
              "search_visits": np.ascontiguousarray(visits, dtype="<i4"),
              "full_search": np.ascontiguousarray(full, dtype=np.uint8)}
    _check_search(arrays, moves, len(record.value))
    return arrays


def _ownership_array(record: GameRecord, board: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The record's ownership target as it goes on the wire ({} when it has none)."""
    if record.ownership is None:
        return {}
    ownership = np.asarray(record.ownership)
    if ownership.size and not np.issubdtype(ownership.dtype, np.integer):
        raise SampleFormatError(f"ownership must be integers -1, 0, 1, got {ownership.dtype}")
    data = np.ascontiguousarray(ownership, dtype=np.int8)
    _check_ownership(data, math.prod(board), resigned=bool(record.resigned))
    return {_OWNERSHIP: data}


def _check_ownership(ownership: np.ndarray, points: int, *, resigned: bool) -> None:
    """The ownership target's rules, the writer's and the reader's."""
    if ownership.shape != (points,):
        raise SampleFormatError(f"ownership is {list(ownership.shape)}, the board has {points} points")
    if ownership.size and not np.isin(ownership, (-1, 0, 1)).all():
        raise SampleFormatError("ownership holds values other than -1, 0 and 1")
    if resigned:
        # a resigned game stops before its final position: there is nothing to own
        raise SampleFormatError("a resigned game has no final ownership")


def _check_search(arrays: dict[str, np.ndarray], moves: int, positions: int) -> None:
    """The search arrays' rules, the writer's and the reader's."""
    for name, data in arrays.items():
        if data.shape != (moves,):
            raise SampleFormatError(f"lengths disagree: {name} is {list(data.shape)}, the game has {moves} moves")
    value = arrays["search_value"]
    if value.size and not (np.isfinite(value).all() and np.abs(value).max() <= 1.0):
        raise SampleFormatError("search_value holds numbers outside [-1, 1]")
    if arrays["search_visits"].size and arrays["search_visits"].min() < 0:
        raise SampleFormatError("search_visits holds negative counts")
    if arrays["full_search"].size and arrays["full_search"].max() > 1:
        raise SampleFormatError("full_search must hold only 0/1 values")
    if int(arrays["full_search"].sum()) != positions:
        # the learner pairs each recorded position with its full search's root value
        raise SampleFormatError(f"full_search marks {int(arrays['full_search'].sum())} moves "
                                f"for {positions} recorded positions")


def _array_entry(dtype: str, shape: tuple[int, ...], encoding: str, data: np.ndarray) -> dict:
    return {"dtype": dtype, "shape": [int(n) for n in shape], "encoding": encoding, "data": data.tobytes()}


# -- decoding ----------------------------------------------------------------------------


def decode_game(
    blob: bytes,
    *,
    planes_shape: tuple[int, ...] | list[int],
    num_actions: int,
    game_name: str,
    max_positions: int = MAX_POSITIONS,
) -> GameRecord:
    """The game in ``blob``, checked against the game this run plays.

    Returns a ``GameRecord`` with planes ``uint8[L, H, W, C]`` (0/1), policy
    ``float32[L, A]``, value ``float32[L]`` and moves ``int32[n]``; raises
    ``SampleFormatError`` naming the first problem found.
    """
    record, _ = decode_game_meta(blob, planes_shape=planes_shape, num_actions=num_actions,
                                 game_name=game_name, max_positions=max_positions)
    return record


def game_decoder(game: Game, *, max_positions: int = MAX_POSITIONS) -> Callable[[bytes], GameRecord]:
    """``decode_game`` bound to ``game``: the ``decode`` callable the streams take."""
    planes_shape, num_actions, name = tuple(game.planes_shape), int(game.num_actions), game.name

    def decode(blob: bytes) -> GameRecord:
        return decode_game(blob, planes_shape=planes_shape, num_actions=num_actions, game_name=name,
                           max_positions=max_positions)

    return decode


def decode_game_meta(
    blob: bytes,
    *,
    planes_shape: tuple[int, ...] | list[int],
    num_actions: int,
    game_name: str,
    max_positions: int = MAX_POSITIONS,
) -> tuple[GameRecord, GameMeta]:
    """``decode_game`` that also returns the entry's ``GameMeta`` (worker, time)."""
    shape = tuple(int(n) for n in planes_shape)
    if len(shape) != 3:
        raise ValueError(f"planes_shape must be (H, W, C), got {shape}")
    header = _unpack(blob, _max_decompressed(shape, num_actions, max_positions))
    version = _check_header(header, game_name)
    arrays = header["arrays"]
    length = header["length"]
    if not isinstance(length, int) or isinstance(length, bool) or not 0 <= length <= max_positions:
        raise SampleFormatError(f"length must be an integer in 0..{max_positions}, got {length!r}")
    planes = _read_array(arrays, "planes", (length, *shape))
    policy = _read_array(arrays, "policy", (length, num_actions))
    value = _read_array(arrays, "value", (length,))
    moves = _read_array(arrays, "moves", None)
    if moves.shape[0] > MAX_MOVES:
        raise SampleFormatError(f"moves: {moves.shape[0]} moves, more than {MAX_MOVES}")
    _check_record(
        planes_shape=planes.shape, policy=policy, value=value, moves=moves, num_actions=num_actions,
        outcome=header["outcome"], model_version=header["model_version"], would_resign=header["would_resign"],
    )
    search = {name: _read_array(arrays, name, (len(moves),)) for name in _SEARCH_ARRAYS if name in arrays}
    if search:
        _check_search(search, len(moves), length)
    ownership = None
    if _OWNERSHIP in arrays:
        ownership = _read_array(arrays, _OWNERSHIP, (shape[0] * shape[1],))
        _check_ownership(ownership, shape[0] * shape[1], resigned=header["resigned"])
    record = GameRecord(
        game=header["game"],
        planes=planes,
        policy=policy,
        value=value,
        moves=moves,
        outcome=float(header["outcome"]),
        model_version=int(header["model_version"]),
        resigned=header["resigned"],
        would_resign=header["would_resign"],
        game_id=header.get("game_id"),
        search_value=search.get("search_value"),
        search_visits=search.get("search_visits"),
        full_search=search["full_search"].astype(np.bool_) if search else None,
        ownership=ownership,
    )
    meta = GameMeta(version=version, worker_id=header["worker_id"], created=float(header["created"]),
                    game_id=header.get("game_id"))
    return record, meta


def entry_identity(
    blob: bytes,
    *,
    planes_shape: tuple[int, ...] | list[int],
    num_actions: int,
    max_positions: int = MAX_POSITIONS,
) -> tuple[str | None, float]:
    """``(game_id, created)`` of an entry (the id None in version 1), without building
    its arrays: for readers that pick games before they decode them. Raises
    ``SampleFormatError`` for what is not an entry at all."""
    header = _unpack(blob, _max_decompressed(tuple(int(n) for n in planes_shape), num_actions, max_positions))
    game_id: Any = header.get("game_id")
    created: Any = header.get("created")
    return (game_id if isinstance(game_id, str) else None,
            float(created) if _is_number(created) and math.isfinite(created) else 0.0)


def _max_decompressed(planes_shape: tuple[int, ...], num_actions: int, max_positions: int) -> int:
    """An upper bound on an honest entry's decompressed size for this game."""
    cells = math.prod(planes_shape)
    per_position = (cells + 7) // 8 + 4 * num_actions + 4 + 64  # + msgpack framing slack
    per_move = 4 + 4 + 4 + 1  # moves, search_value, search_visits, full_search
    ownership = planes_shape[0] * planes_shape[1]  # int8 per point
    return _HEADER_ALLOWANCE + max_positions * per_position + per_move * MAX_MOVES + ownership


def _unpack(blob: Any, max_output: int) -> dict:
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise SampleFormatError(f"an entry must be bytes, got {type(blob).__name__}")
    if len(blob) > MAX_BLOB_BYTES:
        raise SampleFormatError(f"entry of {len(blob)} bytes is larger than the {MAX_BLOB_BYTES}-byte limit")
    try:
        content_size = zstandard.frame_content_size(blob)
    except zstandard.ZstdError as e:
        raise SampleFormatError(f"not a zstd frame ({e})") from None
    if content_size > max_output:
        raise SampleFormatError(
            f"entry declares {content_size} bytes decompressed, more than the {max_output}-byte limit for this game")
    try:
        # Without a declared size (content_size == -1), max_output_size caps the output.
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=max_output, allow_extra_data=False)
    except zstandard.ZstdError as e:
        raise SampleFormatError(f"not a valid zstd frame or larger than {max_output} bytes ({e})") from None
    try:
        header = msgpack.unpackb(raw, raw=False, strict_map_key=True, use_list=True)
    except Exception as e:  # msgpack raises several types (ExtraData, FormatError, ValueError...)
        raise SampleFormatError(f"not msgpack ({type(e).__name__}: {e})") from None
    if not isinstance(header, dict):
        raise SampleFormatError(f"the payload must be a map, got {type(header).__name__}")
    return header


def _check_header(header: dict, game_name: str) -> int:
    if header.get("format") != FORMAT_TAG:
        raise SampleFormatError(f"format tag is {header.get('format')!r}, not {FORMAT_TAG!r}")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in KNOWN_VERSIONS:
        known = ", ".join(map(str, KNOWN_VERSIONS))
        raise SampleFormatError(f"unknown format version {version!r}; this reader knows version(s) {known}")
    keys, expected = set(header), _HEADER_KEYS[version]
    if keys != expected:
        missing, extra = sorted(expected - keys), sorted(map(str, keys - expected))
        raise SampleFormatError(f"header fields wrong: missing {missing}, unexpected {extra}")
    if version >= 2:
        game_id = header["game_id"]
        if not isinstance(game_id, str) or not 0 < len(game_id) <= _MAX_WORKER_ID:
            raise SampleFormatError(f"game_id must be a string of 1 to {_MAX_WORKER_ID} characters")
    if header["game"] != game_name:
        raise SampleFormatError(f"entry is a {header['game']!r} game, this run plays {game_name!r}")
    if not isinstance(header["worker_id"], str) or len(header["worker_id"]) > _MAX_WORKER_ID:
        raise SampleFormatError("worker_id must be a short string")
    if not isinstance(header["resigned"], bool):
        raise SampleFormatError(f"resigned must be a boolean, got {header['resigned']!r}")
    created = header["created"]
    if not _is_number(created) or not math.isfinite(created) or created < 0:
        raise SampleFormatError(f"created must be a unix time, got {created!r}")
    allowed = [set(_ARRAYS_V1)] + ([set(_ARRAYS_V1) | set(_SEARCH_ARRAYS)] if version >= 3 else [])
    names = set(header["arrays"]) if isinstance(header["arrays"], dict) else None
    if names is not None and version >= 3:
        names.discard(_OWNERSHIP)  # optional in version 3, with or without the search arrays
    if names not in allowed:
        optional = f" (and {_OWNERSHIP!r} optionally)" if version >= 3 else ""
        raise SampleFormatError(" or ".join(f"arrays must be exactly {sorted(a)}" for a in allowed) + optional)
    return int(version)


def _read_array(arrays: dict, name: str, shape: tuple[int, ...] | None) -> np.ndarray:
    """The array ``name`` as a fresh writable numpy array; ``shape`` is what it must
    be (None: any 1-D shape)."""
    entry = arrays[name]
    if not isinstance(entry, dict) or set(entry) != _ARRAY_KEYS:
        raise SampleFormatError(f"{name}: must be a map with {sorted(_ARRAY_KEYS)}")
    dtype, encoding = _ARRAYS[name]
    if entry["dtype"] != dtype:
        raise SampleFormatError(f"{name}: dtype {entry['dtype']!r}, expected {dtype!r}")
    if entry["encoding"] != encoding:
        raise SampleFormatError(f"{name}: encoding {entry['encoding']!r}, expected {encoding!r}")
    got = entry["shape"]
    if not isinstance(got, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in got):
        raise SampleFormatError(f"{name}: shape must be a list of non-negative integers, got {got!r}")
    if shape is None:
        if len(got) != 1:
            raise SampleFormatError(f"{name}: must be 1-D, got shape {got}")
    elif tuple(got) != shape:
        raise SampleFormatError(f"{name}: shape {got} does not match the expected {list(shape)}")
    data = entry["data"]
    if not isinstance(data, bytes):
        raise SampleFormatError(f"{name}: data must be bytes, got {type(data).__name__}")
    count = math.prod(got)
    if encoding == "packbits":
        if len(data) != (count + 7) // 8:
            raise SampleFormatError(f"{name}: {len(data)} packed bytes for {count} bits")
        packed = np.frombuffer(data, dtype=np.uint8)
        if count % 8 and packed[-1] & (0xFF >> (count % 8)):
            raise SampleFormatError(f"{name}: the padding bits of the last byte are not 0")
        return np.unpackbits(packed, count=count).reshape(got)
    itemsize = np.dtype(dtype).itemsize
    if len(data) != count * itemsize:
        raise SampleFormatError(f"{name}: {len(data)} bytes for {count} values of {dtype}")
    # astype to the native dtype copies, so the record owns writable memory
    return np.frombuffer(data, dtype=dtype).astype(np.dtype(dtype).newbyteorder("=")).reshape(got)


# -- the rules both sides apply ------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _check_record(
    *,
    planes_shape: tuple[int, ...],
    policy: np.ndarray,
    value: np.ndarray,
    moves: np.ndarray,
    num_actions: int,
    outcome: Any,
    model_version: Any,
    would_resign: Any,
) -> None:
    """The checks the writer and the reader share (planes are 0/1 by construction)."""
    length = planes_shape[0]
    if policy.shape != (length, num_actions):
        raise SampleFormatError(f"lengths disagree: policy is {list(policy.shape)}, planes have {length} positions")
    if value.shape != (length,):
        raise SampleFormatError(f"lengths disagree: value is {list(value.shape)}, planes have {length} positions")
    if length > len(moves):
        raise SampleFormatError(f"lengths disagree: {length} positions recorded in a game of {len(moves)} moves")
    if length > MAX_POSITIONS:
        raise SampleFormatError(f"{length} positions, more than {MAX_POSITIONS}")
    if policy.size:
        if not np.isfinite(policy).all():
            raise SampleFormatError("policy holds non-finite values")
        if policy.min() < 0:
            raise SampleFormatError("policy holds negative values")
        sums = policy.sum(axis=1, dtype=np.float64)
        worst = int(np.argmax(np.abs(sums - 1.0)))
        if abs(sums[worst] - 1.0) > POLICY_SUM_TOLERANCE:
            raise SampleFormatError(f"policy row {worst} sums to {sums[worst]:.6f}, not 1")
    if value.size and not (np.isfinite(value).all() and np.abs(value).max() <= 1.0):
        raise SampleFormatError("value holds numbers outside [-1, 1]")
    if moves.size and (moves.min() < 0 or moves.max() >= num_actions):
        raise SampleFormatError(f"moves outside 0..{num_actions - 1}")
    if not _is_number(outcome) or not -1.0 <= outcome <= 1.0:
        raise SampleFormatError(f"outcome must be a number in [-1, 1], got {outcome!r}")
    if not isinstance(model_version, int | np.integer) or isinstance(model_version, bool) or model_version < 0:
        raise SampleFormatError(f"model_version must be a non-negative integer, got {model_version!r}")
    if would_resign is not None and (isinstance(would_resign, bool) or would_resign not in (0, 1)):
        raise SampleFormatError(f"would_resign must be 0, 1 or nil, got {would_resign!r}")
