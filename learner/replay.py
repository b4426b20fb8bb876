"""The replay window: the last ``capacity`` self-play positions, sampled uniformly.

AlphaZero trains on minibatches drawn uniformly from the most recent positions (the
last 500K games in AlphaGo Zero); here the window counts positions. Planes are 0/1,
so they are stored as uint8 (4x less memory than float32) and turned into float32
only for the sampled batch.

A window made with ``ownership_points`` also keeps the ownership head's target per
position (KataGo's auxiliary ownership target): the final Tromp-Taylor owner of each
point from that position's mover's view (int8: +1 the mover's, -1 the opponent's, 0
nobody's), with a mask of which positions have one (games that resigned have none).
``mover_ownership`` turns a record's final ownership (player 0's view) into those rows.

A window made with ``opponent_policy`` also serves the opponent-policy head's target
(KataGo's auxiliary target): the policy target of the position after each one, the
opponent's reply. It stores no second policy: a game's positions go into consecutive
slots, so the next slot holds that position, and a mask per position says whether it
does. It does not after a game's last position, nor where the reply's search was a
cheap one (playout-cap randomisation records full searches only), which
``reply_follows`` reads from a record. The ring overwrites slots in the order it
writes them, so a position's next slot is overwritten right after its own, never
while it is still there: the mask stays true only within a game.

A window made with ``score`` also keeps the score head's target per position: the
game's final score difference from that position's mover's view (float32, points,
komi counted), with a mask of which positions have one (as for ownership, games played
to the end). ``mover_score`` derives it from a record's final ownership and the komi:
Tromp-Taylor area scoring counts exactly the points that ownership gives each side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tengen.engine.games.base import Game

__all__ = ["Batch", "ReplayWindow", "mover_ownership", "mover_score", "reply_follows"]


@dataclass(frozen=True)
class Batch:
    """A sampled minibatch; ``ownership`` and ``has_ownership`` only from a window that
    keeps ownership (None otherwise)."""

    planes: np.ndarray  # float32 [B, H, W, C]
    policy: np.ndarray  # float32 [B, A]
    value: np.ndarray  # float32 [B]
    #: float32 [B, H*W]: the final owner of each point from the mover's view (0 where no target)
    ownership: np.ndarray | None = None
    #: float32 [B]: 1 where the position has an ownership target, 0 where not
    has_ownership: np.ndarray | None = None
    #: float32 [B, A]: the next position's policy target, the opponent's reply (0 where none)
    opponent_policy: np.ndarray | None = None
    #: float32 [B]: 1 where the position has that target, 0 where not
    has_opponent_policy: np.ndarray | None = None
    #: float32 [B]: the final score difference from the mover's view, in points (0 where no target)
    score: np.ndarray | None = None
    #: float32 [B]: 1 where the position has a score target, 0 where not
    has_score: np.ndarray | None = None


def mover_ownership(planes: np.ndarray, final_ownership: np.ndarray) -> np.ndarray:
    """``int8[L, H*W]``: a game's final ownership (``int8[H*W]``, +1 player 0) seen by
    the mover of each of its positions ``planes[L, H, W, C]`` (the sign flips where
    player 1 is to move)."""
    final = np.asarray(final_ownership, dtype=np.int8).reshape(-1)
    sign = np.where(Game.movers(planes) == 0, 1, -1).astype(np.int8)
    return sign[:, None] * final[None, :]


def mover_score(planes: np.ndarray, final_ownership: np.ndarray, komi: float) -> np.ndarray:
    """``float32[L]``: a game's final score (``final_ownership int8[H*W]``, +1 player
    0's point, and ``komi``, which player 1 gets) seen by the mover of each of its
    positions ``planes[L, H, W, C]``: the mover's points less the opponent's, komi
    taken from player 0's side or added to player 1's. > 0 where the mover won."""
    black_lead = float(np.asarray(final_ownership, dtype=np.int64).sum()) - float(komi)
    sign = np.where(Game.movers(planes) == 0, 1.0, -1.0)
    return (sign * black_lead).astype(np.float32)


def reply_follows(full_search: np.ndarray | None, positions: int) -> np.ndarray:
    """``bool[L]``: whether a game's recorded position i + 1 is the position right
    after position i's move, for its ``positions`` (L) recorded positions, from its
    record's ``full_search`` (``bool[n]`` per move: only full searches are recorded).
    The last position has no reply; a record without ``full_search`` (before format
    3, when every move's search was recorded) has one everywhere else."""
    if full_search is None:
        return np.arange(positions) < positions - 1
    plies = np.flatnonzero(np.asarray(full_search, dtype=np.bool_))
    if len(plies) != positions:
        raise ValueError(f"{len(plies)} full searches for {positions} recorded positions")
    return np.append(np.diff(plies) == 1, False)[:positions]


class ReplayWindow:
    """A ring buffer of positions: ``planes uint8[N, H, W, C]``, ``policy float32[N, A]``
    (search visit distributions), ``value float32[N]`` (the game's result for the mover, as self-play recorded it), and
    with ``ownership_points`` P > 0, ``ownership int8[N, P]`` (final owners for the
    mover) and ``has_ownership bool[N]``; with ``opponent_policy``, ``has_reply bool[N]``:
    whether the next slot holds the position after this one's move; with ``score``,
    ``score float32[N]`` (final scores for the mover) and ``has_score bool[N]``.

    ``positions_added`` counts every position ever added and ``samples_drawn`` every
    position ever sampled, so ``reuse`` is how many times, on average, the learner has
    seen each position (the ratio the learner holds below ``max_reuse``).
    """

    def __init__(self, *, capacity: int, planes_shape: Sequence[int], num_actions: int, ownership_points: int = 0,
                 opponent_policy: bool = False, score: bool = False):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self.planes_shape = tuple(int(n) for n in planes_shape)
        self.num_actions = int(num_actions)
        self.ownership_points = int(ownership_points)
        if self.ownership_points and self.ownership_points != self.planes_shape[0] * self.planes_shape[1]:
            raise ValueError(f"ownership_points must be the board's {self.planes_shape[0] * self.planes_shape[1]} "
                             f"points (or 0: none kept), got {ownership_points}")
        self.planes = np.zeros((self.capacity, *self.planes_shape), np.uint8)  # [N, H, W, C]
        self.policy = np.zeros((self.capacity, self.num_actions), np.float32)  # [N, A]
        self.value = np.zeros((self.capacity,), np.float32)  # [N]
        self.ownership = np.zeros((self.capacity if self.ownership_points else 0, self.ownership_points),
                                  np.int8)  # [N, P]
        self.has_ownership = np.zeros((self.capacity if self.ownership_points else 0,), np.bool_)  # [N]
        self.keeps_replies = bool(opponent_policy)
        self.has_reply = np.zeros((self.capacity if self.keeps_replies else 0,), np.bool_)  # [N]
        self.keeps_score = bool(score)
        self.score = np.zeros((self.capacity if self.keeps_score else 0,), np.float32)  # [N]
        self.has_score = np.zeros((self.capacity if self.keeps_score else 0,), np.bool_)  # [N]
        #: the slot the next position goes to
        self._head = 0
        self._size = 0
        self.positions_added = 0
        self.samples_drawn = 0

    def __len__(self) -> int:
        return self._size

    @property
    def keeps_ownership(self) -> bool:
        return self.ownership_points > 0

    @property
    def reuse(self) -> float:
        """Samples drawn per position added (0 before anything is added)."""
        return self.samples_drawn / self.positions_added if self.positions_added else 0.0

    def add(self, planes: np.ndarray, policy: np.ndarray, value: np.ndarray,
            ownership: np.ndarray | None = None, *, follows: np.ndarray | None = None,
            score: np.ndarray | None = None) -> None:
        """Append one game: ``planes[L, H, W, C]`` (0/1 values), ``policy[L, A]``, ``value[L]``
        and, for a window that keeps ownership, ``ownership[L, P]`` from each mover's view
        (``mover_ownership``; None: the game has no target, as a resigned one).
        ``follows bool[L]`` (``reply_follows``; None: every position but the last) says
        where the next position is the reply to this one's move, for a window made
        with ``opponent_policy``. ``score[L]`` (``mover_score``; None: no target, as
        for a resigned game) is each mover's final score, for a window made with ``score``.

        The oldest positions are overwritten once the window is full; a game longer
        than the whole window keeps only its last ``capacity`` positions.
        """
        planes, policy, value = np.asarray(planes), np.asarray(policy), np.asarray(value)
        if planes.ndim != 1 + len(self.planes_shape) or planes.shape[1:] != self.planes_shape:
            raise ValueError(f"planes must be [L, {', '.join(map(str, self.planes_shape))}], got {planes.shape}")
        length = planes.shape[0]
        if policy.shape != (length, self.num_actions):
            raise ValueError(f"policy must be [{length}, {self.num_actions}], got {policy.shape}")
        if value.shape != (length,):
            raise ValueError(f"value must be [{length}], got {value.shape}")
        owners = None
        if ownership is not None:
            if not self.keeps_ownership:
                raise ValueError("this window keeps no ownership (made with ownership_points=0)")
            owners = np.asarray(ownership)
            if owners.shape != (length, self.ownership_points):
                raise ValueError(f"ownership must be [{length}, {self.ownership_points}], got {owners.shape}")
            if owners.size and not np.isin(owners, (-1, 0, 1)).all():
                raise ValueError("ownership must hold only -1, 0 and 1")
            owners = owners.astype(np.int8)
        scores = None
        if score is not None:
            if not self.keeps_score:
                raise ValueError("this window keeps no score (made with score=False)")
            scores = np.asarray(score, dtype=np.float32)
            if scores.shape != (length,):
                raise ValueError(f"score must be [{length}], got {scores.shape}")
        if follows is None:
            follows = np.arange(length) < length - 1
        follows = np.asarray(follows, dtype=np.bool_)
        if follows.shape != (length,):
            raise ValueError(f"follows must be [{length}], got {follows.shape}")
        if length and follows[-1]:
            raise ValueError("a game's last position has no reply to follow it")
        planes_u8 = planes.astype(np.uint8)
        # the uint8 store is only lossless for 0/1 (or small integer) planes
        if not np.array_equal(planes_u8, planes):
            raise ValueError("planes must hold integers in 0..255 (0/1 feature planes)")
        self.positions_added += length
        if length > self.capacity:
            planes_u8, policy, value = planes_u8[-self.capacity :], policy[-self.capacity :], value[-self.capacity :]
            owners = None if owners is None else owners[-self.capacity :]
            follows = follows[-self.capacity :]
            scores = None if scores is None else scores[-self.capacity :]
            length = self.capacity
        slots = (self._head + np.arange(length)) % self.capacity
        self.planes[slots] = planes_u8
        self.policy[slots] = policy
        self.value[slots] = value
        if self.keeps_ownership:
            self.ownership[slots] = 0 if owners is None else owners
            self.has_ownership[slots] = owners is not None
        if self.keeps_replies:
            self.has_reply[slots] = follows
        if self.keeps_score:
            self.score[slots] = 0.0 if scores is None else scores
            self.has_score[slots] = scores is not None
        self._head = (self._head + length) % self.capacity
        self._size = min(self._size + length, self.capacity)

    def contents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of what is stored, oldest first: ``(planes uint8[n, ...], policy[n, A], value[n])``."""
        order = self._order()
        return self.planes[order], self.policy[order], self.value[order]

    def ownership_contents(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the ownership kept, oldest first: ``(ownership int8[n, P], has_ownership bool[n])``."""
        if not self.keeps_ownership:
            raise ValueError("this window keeps no ownership (made with ownership_points=0)")
        order = self._order()
        return self.ownership[order], self.has_ownership[order]

    def _order(self) -> np.ndarray:
        start = (self._head - self._size) % self.capacity
        return (start + np.arange(self._size)) % self.capacity

    def sample(self, batch_size: int, rng: np.random.Generator, *, game: Game | None = None) -> Batch:
        """A uniform minibatch (with replacement) as a ``Batch``: planes float32[B, H, W, C],
        policy[B, A], value[B], the ownership and its mask when the window keeps them,
        and the opponent's reply and its mask when it keeps those, and the score and its
        mask likewise (a score is the same under every symmetry).

        With ``game``, each sample gets one of the game's symmetries at random (the
        data augmentation of AlphaGo Zero), the same one for its planes, policy,
        ownership and reply; the batch is grouped by symmetry so each transform is one
        vectorised call.
        """
        if self._size == 0:
            raise ValueError("the replay window is empty")
        index = rng.integers(0, self._size, size=batch_size)
        # slots are filled from 0 up before wrapping, so 0.._size-1 are exactly the stored ones
        planes, policy, value = self.planes[index], self.policy[index], self.value[index]
        ownership = self.ownership[index] if self.keeps_ownership else None
        reply = has_reply = None
        if self.keeps_replies:
            has_reply = self.has_reply[index]
            # the next slot is the reply where the mask says so; elsewhere it may be
            # another game's, or empty: zeros
            reply = np.where(has_reply[:, None], self.policy[(index + 1) % self.capacity], 0.0).astype(np.float32)
        if game is not None:
            ks = rng.integers(0, len(game.symmetries), size=batch_size)
            for k in np.unique(ks):
                rows = ks == k
                # transform in uint8, before the float32 copy: 4x fewer bytes to move
                planes[rows] = game.transform_planes(planes[rows], int(k))
                policy[rows] = game.transform_policy(policy[rows], int(k))
                if ownership is not None:
                    # the points as a one-plane board: the very permutation of the planes
                    board = ownership[rows].reshape(-1, *self.planes_shape[:2], 1)
                    ownership[rows] = game.transform_planes(board, int(k)).reshape(-1, self.ownership_points)
                if reply is not None:
                    # actions are the board's, not the mover's: the same map as the policy's
                    reply[rows] = game.transform_policy(reply[rows], int(k))
        self.samples_drawn += batch_size
        owners = {} if ownership is None else {"ownership": ownership.astype(np.float32),
                                               "has_ownership": self.has_ownership[index].astype(np.float32)}
        replies = {} if has_reply is None else {"opponent_policy": reply,
                                                "has_opponent_policy": has_reply.astype(np.float32)}
        scores = {} if not self.keeps_score else {"score": self.score[index],
                                                  "has_score": self.has_score[index].astype(np.float32)}
        return Batch(planes.astype(np.float32), policy, value, **owners, **replies, **scores)
