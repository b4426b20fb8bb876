"""One compiled entry point per rule operation, for code that runs over any game.

Compiled search cannot take a Python ``Game`` object, so each game family has a
kernel *kind* (``Game.kernel_kind``) and these functions dispatch on it. Every
state keeps the player to move at index 0 (``TO_PLAY``) in both families.
"""

from __future__ import annotations

from numba import njit

from tengen.engine.games import go_kernels as go
from tengen.engine.games import mnk
from tengen.engine.games.base import KERNEL_GO, KERNEL_MNK

__all__ = [
    "MNK",
    "GO",
    "TO_PLAY",
    "legal_mask_into",
    "candidate_mask_into",
    "is_legal",
    "candidates_are_legal",
    "own_eye_rule_into",
    "play",
    "play_known_ongoing",
    "random_moves",
    "random_outcome",
    "is_terminal",
    "outcome",
    "board_into",
]

MNK, GO = KERNEL_MNK, KERNEL_GO
TO_PLAY = 0


@njit(cache=True, inline="always")
def legal_mask_into(kind, params, st, out):
    """Fill ``out[A]`` with the legal actions of the player to move."""
    if kind == GO:
        go.legal_mask_into(params, st, out)
    else:
        mnk.legal_mask_into(params, st, out)


@njit(cache=True, inline="always")
def candidate_mask_into(kind, params, st, out):
    """Fill ``out[A]`` with a cheap superset of the legal actions (Go: every empty
    point but the ko point; the m,n,k games: exactly the legal ones)."""
    if kind == GO:
        go.candidate_mask_into(params, st, out)
    else:
        mnk.legal_mask_into(params, st, out)


@njit(cache=True, inline="always")
def candidates_are_legal(kind):
    """Whether ``candidate_mask_into`` is exact, so that no candidate needs checking."""
    return kind != GO


@njit(cache=True, inline="always")
def own_eye_rule_into(kind, params, st, listed):
    """Take out of ``listed`` (legal or candidate moves) every move that fills the
    mover's own eye, and the pass while another legal move is left
    (``go_kernels.own_eye_rule_into``: the search's ``avoid_own_eyes``); the m,n,k
    games have neither eyes nor a pass."""
    if kind == GO:
        go.own_eye_rule_into(params, st, listed)


@njit(cache=True, inline="always")
def is_legal(kind, params, st, action):
    if kind == GO:
        return go.is_legal_action(params, st, action)
    return mnk.is_legal(params, st, action)


@njit(cache=True, inline="always")
def play(kind, params, st, action, scratch):
    """Play a legal action in place; ``scratch`` is an int32 buffer of the board's
    padded size for Go's captured points."""
    if kind == GO:
        go.play_action(params, st, action, scratch)
    else:
        mnk.play_in_place(params, st, action)


@njit(cache=True, inline="always")
def play_known_ongoing(kind, params, st, action, scratch):
    """``play`` for a move known not to end the game (the m,n,k games then skip
    their line scan)."""
    if kind == GO:
        go.play_action(params, st, action, scratch)
    else:
        mnk.play_known_ongoing(params, st, action)


@njit(cache=True, inline="always")
def random_moves(kind, params, st):
    """Finish the game with random legal moves (Go: never filling one's own eye, the
    classic light playout), from numba's generator as the caller seeded it."""
    if kind == GO:
        go.random_moves(params, st, True)
    else:
        mnk.random_moves(params, st)


@njit(cache=True, inline="always")
def random_outcome(kind, params, st, scratch):
    """``outcome`` after ``random_moves`` from ``st``, which stays as it is (``scratch``:
    a state-sized buffer the playout may use)."""
    if kind == GO:
        scratch[:] = st
        go.random_moves(params, scratch, True)
        return outcome(kind, params, scratch)
    return mnk.random_outcome(params, st, scratch)


@njit(cache=True, inline="always")
def is_terminal(kind, params, st):
    if kind == GO:
        return st[go.END] != go.ONGOING
    return st[mnk.WINNER] != mnk.NO_WINNER


@njit(cache=True, inline="always")
def outcome(kind, params, st):
    """+1 / -1 / 0 from player 0's point of view, for a finished game."""
    if kind == GO:
        if st[go.END] == go.ENDED_BY_RESIGNATION:
            return 1.0 if st[go.WINNER] == 0 else -1.0
        twice = 2 * go.area_score(params, st) - params[go.P_KOMI2]
        return 1.0 if twice > 0 else (-1.0 if twice < 0 else 0.0)
    winner = st[mnk.WINNER]
    if winner == mnk.DRAW:
        return 0.0
    return 1.0 if winner == 0 else -1.0


@njit(cache=True, inline="always")
def board_into(kind, params, st, out):
    """Write the board (0 empty, 1 player 0, 2 player 1) row-major into ``out[H*W]``."""
    if kind == GO:
        size, stride = params[go.P_SIZE], params[go.P_STRIDE]
        for y in range(size):
            for x in range(size):
                out[y * size + x] = st[go.HEADER + (y + 1) * stride + x + 1]
    else:
        n = params[mnk.P_HEIGHT] * params[mnk.P_WIDTH]
        for i in range(n):
            out[i] = st[mnk.HEADER + i]
