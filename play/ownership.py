"""Who will own each point of a Go board, and which stones are dead, alive or in seki.

This is the estimate behind GTP's ``final_status_list`` and ``final_score`` and the
engine's end-of-game play. It sits behind one narrow interface,

    ``Ownership``: ``ownership(state, history) -> float32[N * N]``

the expected final owner of every point, in [-1, 1] from Black's point of view
(+1 Black's, -1 White's), row-major from the top-left like the Go actions.
``NetworkOwnership`` reads a network's ownership head (engine/network.py); the other
needs no model: ``PlayoutOwnership`` averages the final Tromp-Taylor owner of every point over many
seeded light playouts from the position (uniform random legal moves, never filling
one's own single-point eye, played until both pass), the classic Monte Carlo
estimate. It is deterministic: the same position always gets the same estimate.

``stone_status`` turns an estimate into a status per group, and ``area_without_dead``
scores a board with the dead stones taken off (GNU Go's Chinese counting): with no
stone dead that is Tromp-Taylor on the board as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from tengen.engine.games import go_kernels as K
from tengen.engine.games.go import GoGame, Group

__all__ = [
    "Ownership",
    "PlayoutOwnership",
    "NetworkOwnership",
    "GroupStatus",
    "stone_status",
    "area_without_dead",
    "DEAD_BELOW",
    "SETTLED",
]

#: ``ownership(state, history) -> float32[N * N]`` in [-1, 1], Black's point of view
Ownership = Callable[[np.ndarray, Sequence[np.ndarray]], np.ndarray]
#: a network's ownership head: ``planes uint8[B, H, W, C] -> float32[B, H * W]``, +1 for
#: the mover's points (``CompiledModel.ownership``)
OwnershipHead = Callable[[np.ndarray], np.ndarray]

#: a group whose stones its own colour is expected to keep less than this (mean
#: ownership seen from the group's colour) is dead: the opponent owns its points
#: in more playouts than its owner does
DEAD_BELOW = 0.0
#: a group (or point) with at least this ownership for one colour is settled
SETTLED = 0.8

ALIVE, DEAD, SEKI = "alive", "dead", "seki"


@njit(cache=True)
def _is_self_atari(params, st, p, color, mark):
    """Whether ``color`` on empty padded point p captures nothing and leaves its
    group with one liberty (``mark``: scratch, all zero between calls)."""
    points, stride = params[K.P_POINTS], params[K.P_STRIDE]
    board, head, nxt, libs = K.HEADER, K.HEADER + points, K.HEADER + 2 * points, K.HEADER + 3 * points
    opponent = 3 - color
    for q in (p - stride, p - 1, p + 1, p + stride):
        if st[board + q] == opponent:
            h = st[head + q]
            touching = 0
            for r in (p - stride, p - 1, p + 1, p + stride):
                if st[board + r] == opponent and st[head + r] == h:
                    touching += 1
            if st[libs + h] == touching:
                return False  # captures: gains a liberty at least
    count = 0
    found = np.empty(4, dtype=np.int32)  # the liberties counted (at most 2 needed) and marked
    marked = 0
    for q in (p - stride, p - 1, p + 1, p + stride):
        if st[board + q] == K.EMPTY and mark[q] == 0:
            mark[q] = 1
            found[marked] = q
            marked += 1
            count += 1
    if count < 2:
        for q in (p - stride, p - 1, p + 1, p + stride):
            if count >= 2:
                break
            if st[board + q] != color:
                continue
            h = st[head + q]
            s = h
            while count < 2:
                for r in (s - stride, s - 1, s + 1, s + stride):
                    if r != p and st[board + r] == K.EMPTY and mark[r] == 0:
                        mark[r] = 1
                        if marked < 4:
                            found[marked] = r
                            marked += 1
                        count += 1
                        if count >= 2:
                            break
                s = st[nxt + s]
                if s == h:
                    break
    for i in range(marked):
        mark[found[i]] = 0
    return count < 2


@njit(cache=True)
def _playout(params, st, mark, captured, empties):
    """Uniform random legal moves until both pass, never filling one's own
    single-point eye and never self-atari; a player passes when no such move is left.
    Avoiding self-atari keeps a seki a seki (neither side fills the shared liberties)."""
    points = params[K.P_POINTS]
    n_empty = 0
    for p in range(points):
        if st[K.HEADER + p] == K.EMPTY:
            empties[n_empty] = p
            n_empty += 1
    while st[K.END] == K.ONGOING:
        color = 1 + st[K.TO_PLAY]
        k = n_empty
        chosen = -1
        while k > 0:
            i = np.random.randint(k)
            p = empties[i]
            if (K.is_legal_point(params, st, p) and not K.is_own_eye(params, st, p, color)
                    and not _is_self_atari(params, st, p, color, mark)):
                chosen = i
                break
            k -= 1
            empties[i], empties[k] = empties[k], empties[i]
        if chosen == -1:
            K.play_pass(params, st)
        elif K.play_point(params, st, empties[chosen], captured) == 0:
            n_empty -= 1
            empties[chosen] = empties[n_empty]
        else:
            n_empty = 0
            for q in range(points):
                if st[K.HEADER + q] == K.EMPTY:
                    empties[n_empty] = q
                    n_empty += 1


@njit(cache=True)
def _playout_ownership_kernel(params, st, playouts, seed, out):
    """Mean owner per board action over ``playouts`` light playouts from ``st``
    (END and PASSES cleared first, so a finished game is played on)."""
    np.random.seed(seed)
    points, size, stride = params[K.P_POINTS], params[K.P_SIZE], params[K.P_STRIDE]
    scratch = st.copy()
    region = np.empty(points, dtype=np.int32)
    stack = np.empty(points, dtype=np.int32)
    owner = np.empty(points, dtype=np.int32)
    mark = np.zeros(points, dtype=np.int32)
    captured = np.empty(points, dtype=np.int32)
    empties = np.empty(points, dtype=np.int32)
    out[:] = 0.0
    for _ in range(playouts):
        scratch[:] = st
        scratch[K.END] = K.ONGOING
        scratch[K.PASSES] = 0
        _playout(params, scratch, mark, captured, empties)
        K.area_owners_into(params, scratch, region, stack, owner)
        a = 0
        for y in range(size):
            p = (y + 1) * stride + 1
            for _ in range(size):
                out[a] += owner[p]
                a += 1
                p += 1
    for a in range(size * size):
        out[a] /= playouts


class PlayoutOwnership:
    """The ``Ownership`` of light random playouts (no model).

    Keyword-only: ``playouts`` per estimate, ``seed`` (fixed: the same position gets
    the same estimate, so the GTP commands built on it always agree). Playouts use
    simple ko, never fill their own single-point eyes and never play self-atari
    (so a seki stays one), and stop when both pass.
    """

    def __init__(self, game: GoGame, *, playouts: int = 256, seed: int = 0):
        if playouts < 1:
            raise ValueError("playouts must be at least 1")
        self.game = game
        self.playouts = playouts
        self.seed = seed
        # Superko off: the state's superko history (beyond the five board arrays) is
        # then never read, so states of a superko game work too.
        self._params = K.make_params(game.size, game.komi, False, 4 * game.size * game.size)
        self._params[K.P_STATE_SIZE] = game.params[K.P_STATE_SIZE]

    def __call__(self, state: np.ndarray, history: Sequence[np.ndarray] = ()) -> np.ndarray:
        out = np.zeros(self.game.size * self.game.size, dtype=np.float32)
        # MOVES restarts at 0: a playout may run 4 * N * N moves whatever the game's
        # count (the cap only stops cycles such as triple ko).
        start = state.copy()
        start[K.MOVES] = 0
        _playout_ownership_kernel(self._params, start, self.playouts, self.seed, out)
        return out


class NetworkOwnership:
    """The ``Ownership`` of a network's ownership head: the position's (and its
    history's) planes through ``head`` under each of the board's 8 symmetries, mapped
    back and averaged (one batch of 8; a net's estimate then has the board's symmetry,
    as the true ownership does), and turned from the mover's view to Black's.
    Deterministic, like a network call."""

    def __init__(self, game: GoGame, head: OwnershipHead, *, symmetries: bool = True):
        self.game = game
        self.head = head
        self._ks = range(len(game.symmetries)) if symmetries else range(1)

    def __call__(self, state: np.ndarray, history: Sequence[np.ndarray] = ()) -> np.ndarray:
        game, sym = self.game, self.game.symmetries
        planes = game.encode(state, history).astype(np.uint8)
        images = np.stack([game.transform_planes(planes, k) for k in self._ks])
        owners = np.asarray(self.head(images), dtype=np.float32)
        if owners.shape != (len(images), game.size * game.size):
            raise ValueError(f"the ownership head answered {owners.shape} for {len(images)} positions of "
                             f"{game.size * game.size} points")
        # image cell i is original cell gather[k][i]: scatter[k] reads each original
        # cell's value off the image
        mover = np.mean([owners[i][sym.scatter[k]] for i, k in enumerate(self._ks)], axis=0)
        return (mover if game.to_play(state) == 0 else -mover).astype(np.float32)


@dataclass(frozen=True)
class GroupStatus:
    """A group, its status ('alive', 'dead' or 'seki') and the mean ownership of its
    stones seen from its own colour (+1: surely kept, -1: surely lost)."""

    group: Group
    status: str
    kept: float


def stone_status(game: GoGame, state: np.ndarray, ownership: np.ndarray) -> list[GroupStatus]:
    """Every group's status under an ownership estimate, ordered by first stone.

    Dead: its colour keeps its stones less often than it loses them (mean kept
    < DEAD_BELOW). Seki: not dead, and sharing a liberty with a living opponent
    group where that liberty is self-atari for both colours and the estimate gives
    it to nobody (neither side can approach without being captured). Alive: the
    rest.
    """
    own = np.asarray(ownership, dtype=np.float32).reshape(-1)
    groups = game.groups(state)
    kept = []
    for g in groups:
        sign = 1.0 if g.color == 0 else -1.0
        kept.append(float(sign * own[list(g.stones)].mean()))
    living = [k >= DEAD_BELOW for k in kept]
    seki = [False] * len(groups)
    for i, g in enumerate(groups):
        for j in range(i + 1, len(groups)):
            h = groups[j]
            if h.color == g.color or not (living[i] and living[j]):
                continue
            shared = [a for a in set(g.liberties).intersection(h.liberties) if abs(float(own[a])) < 1 - SETTLED]
            if shared and all(_self_atari(game, state, a, 0) and _self_atari(game, state, a, 1) for a in shared):
                seki[i] = seki[j] = True
    out = []
    for g, k, s in zip(groups, kept, seki, strict=True):
        status = DEAD if k < DEAD_BELOW else (SEKI if s else ALIVE)
        out.append(GroupStatus(g, status, k))
    return out


def _self_atari(game: GoGame, state: np.ndarray, action: int, color: int) -> bool:
    """Whether ``color`` playing ``action`` captures nothing and leaves its own group
    with at most one liberty (or is not even legal)."""
    probe = state.copy()
    probe[K.TO_PLAY] = color
    probe[K.KO] = K.NO_POINT
    probe[K.END] = K.ONGOING
    if not game.is_legal(probe, action):
        return True
    if len(game.play_unchecked(probe, action)):
        return False
    group = game.group(probe, action)
    return group is None or group.liberty_count <= 1


def area_without_dead(game: GoGame, state: np.ndarray, dead: Sequence[int]) -> int:
    """Black's area minus White's (komi not included) after taking the stones on
    ``dead`` (actions) off the board: Tromp-Taylor on what is left."""
    if not len(dead):
        return game.area(state)
    board = game.board(state).reshape(-1).copy()
    board[list(dead)] = 0
    # Taking stones off only adds liberties, so the position is always valid.
    return game.area(game.state_from_board(board.reshape(game.board_shape), game.to_play(state)))
