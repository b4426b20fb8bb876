"""Positions the tests search or grade: every one reachable in a small game."""

from __future__ import annotations

import numpy as np


def reachable_positions(game) -> list[np.ndarray]:
    """Every position reachable from the empty board that is not over (one per board)."""
    found, seen, stack = [], set(), [game.initial_state()]
    while stack:
        state = stack.pop()
        key = game.board(state).tobytes()
        if key in seen or game.is_terminal(state):
            continue
        seen.add(key)
        found.append(state)
        for a in np.flatnonzero(game.legal_mask(state)):
            child = state.copy()
            game.play(child, int(a))
            stack.append(child)
    return found
