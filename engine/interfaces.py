"""The narrow interfaces between the loops and the plumbing: what the learner, the
gatekeeper and the self-play side need of a sample stream and of a model registry,
and what a match needs of a player, as ``typing.Protocol`` classes, so that a loop is
written against what it uses and never against Redis or Ray (the contracts are listed
in docs/architecture.md).

They live here, with the Game and Evaluator contracts, because every layer may import
the engine and only the engine: the learner (learner/) and the gatekeeper (workers/)
are typed with them, and cluster/ implements each twice, on Redis and in-process
(``cluster.stream``, ``cluster.registry``), its classes subclassing these so that the
type checker holds both to the same signatures. Nothing here knows about Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypedDict

from tengen.engine.gating import GatingSummary
from tengen.engine.selfplay import GameRecord

__all__ = [
    "Decode",
    "Entry",
    "SampleSink",
    "SampleSource",
    "WeightSource",
    "CandidateSink",
    "Subscription",
    "ModelMetadata",
    "InitialPromotion",
    "PromotionResult",
    "LadderEntry",
    "match_id",
    "ModelRegistryLike",
]

#: a stream entry's blob to its game (``run.codec.game_decoder``), raising on a bad one
Decode = Callable[[bytes], GameRecord]
#: a delivered entry: its id (to acknowledge) and its game
Entry = tuple[bytes, GameRecord]


class SampleSink(Protocol):
    """Where finished games go: one encoded game (``run.codec.encode_game``) per entry."""

    def add(self, blob: bytes, *, wait: bool = True) -> bytes:
        """Append one game; returns its entry id."""
        ...

    def add_many(self, blobs: Iterable[bytes], *, wait: bool = True) -> list[bytes]:
        """Append several games in order (one round trip); returns their ids. With
        ``wait=False`` a store that is away raises at once instead of riding it out."""
        ...


class SampleSource(Protocol):
    """Where the learner reads games: through a consumer group, acknowledging what it
    has stored, and replaying the stream to rebuild its window after a restart."""

    def ensure_group(self, group: str) -> None: ...

    def read(self, group: str, consumer: str, *, count: int, block_ms: int, decode: Decode) -> list[Entry]:
        """Up to ``count`` entries never delivered to ``group``, oldest first, waiting up
        to ``block_ms`` for some; entries that fail to decode are counted and skipped."""
        ...

    def ack(self, group: str, ids: Iterable[bytes]) -> int: ...

    def trimmed_unread(self, group: str) -> int:
        """Entries trimmed from the stream before ``group`` read them, for the run's life."""
        ...

    def move_group_to_end(self, group: str) -> bytes:
        """Point ``group`` past the last entry; returns that entry's id."""
        ...

    def replay(self, decode: Decode, *, count: int | None = None, end: bytes | str | None = None,
               max_positions: int | None = None) -> list[GameRecord]:
        """The games in the stream, oldest first (all, the newest ``count``, or the newest
        holding ``max_positions`` positions), up to the entry ``end`` if given."""
        ...


class ModelMetadata(TypedDict):
    """What a published version carries besides its weights: the learner's candidates,
    the run's initial network and models put back from a run directory all give both."""

    step: int  # the learner step the weights are from (0: the initial network)
    game: str  # the game's name (``Game.name``)


class InitialPromotion(TypedDict):
    """The result on the ladder's first entry: the initial network, best without a match."""

    initial: bool


#: what a promotion records on the ladder: its gating match's verdict (without the
#: games), or the initial network's mark
PromotionResult = GatingSummary | InitialPromotion


class LadderEntry(TypedDict):
    """One promotion on the ladder, as the registries store it (``cluster.registry``)
    and the run directory's ladder.json holds it; run/records.py makes it
    (``ladder_entry``) and checks it when it is read back, from Redis or the file."""

    version: int
    id: str  # the version's spelling, ``000042``
    sha256: str  # of the promoted weights blob
    elo: float | None
    result: PromotionResult
    time: float  # when it was promoted, seconds since the epoch


class WeightSource(Protocol):
    """Where weights come from: blobs by version, checked against their sha256."""

    def fetch(self, version: int) -> tuple[bytes, ModelMetadata]:
        """``(blob, metadata)`` of ``version``."""
        ...

    def best_version(self) -> int | None: ...


class CandidateSink(Protocol):
    """Where the learner publishes candidates; versions are immutable."""

    def publish(self, version: int, blob: bytes, metadata: ModelMetadata) -> str:
        """Store ``blob`` as ``version``; returns its sha256."""
        ...

    def latest_candidate(self) -> int | None: ...


class Subscription(Protocol):
    """Promotion notifications, read like redis-py's ``PubSub``."""

    def get_message(self, ignore_subscribe_messages: bool = ..., timeout: float = ...) -> dict | None: ...

    def close(self) -> None: ...


def match_id(candidate: int, best: int) -> str:
    """A gating match's id: the pair it plays (``000012-000010``). A candidate is gated
    against one best once (the newest candidate is gated, a rejected one discarded), so
    the pair names the match, and a match played again has the same id."""
    return f"{int(candidate):06d}-{int(best):06d}"


class ModelRegistryLike(WeightSource, CandidateSink, Protocol):
    """The run's model registry: candidates, the best version, the Elo ladder, and
    promotions with a notification to subscribers."""

    def promote(self, version: int, *, elo: float | None, result: PromotionResult, at: float | None = None) -> None:
        """Make ``version`` the best and append it to the ladder, once (a repeat is a no-op);
        ``at`` is the promotion's time when a ladder is rebuilt (default now)."""
        ...

    def decision(self, match: str) -> GatingSummary | None:
        """The verdict recorded for ``match`` (``match_id``), or None."""
        ...

    def decide(self, match: str, summary: GatingSummary, *, elo: float | None) -> GatingSummary:
        """Record ``summary`` as ``match``'s verdict, once, and on a "promote" make its
        candidate the best with ``elo`` in the same step, if the best is still the one
        it played (``RegistryError`` if not). Returns the verdict recorded: this one, or
        the one an earlier call recorded (a gatekeeper replaying a match whose reply was
        lost, which then must not record another)."""
        ...

    def ladder(self) -> list[LadderEntry]: ...

    def candidates(self) -> list[int]: ...

    def sha256(self, version: int) -> str: ...

    def discard(self, version: int) -> bool: ...

    def prune(self, *, keep_candidates: int, keep: Iterable[int] = ()) -> list[int]: ...

    def subscribe(self) -> Subscription: ...
