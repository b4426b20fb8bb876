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


def own_eyes_and_other_moves(go, state) -> tuple[np.ndarray, np.ndarray]:
    """Go: the legal points of the player to move that fill their own eye, and the
    other legal points (``avoid_own_eyes`` lists only the latter, and the pass when
    there are none)."""
    mover = go.to_play(state)
    points = np.flatnonzero(go.legal_mask(state)[:-1])
    eye = np.array([go.is_own_eye(state, int(a), mover) for a in points], dtype=bool)
    return points[eye], points[~eye]


def pass_loving_evaluator(go):
    """Every position even, and the pass twenty times likelier than any point."""

    def evaluate(planes):
        policy = np.full((len(planes), go.num_actions), 1.0, np.float32)
        policy[:, go.pass_action] = 20.0
        return policy / policy.sum(axis=1, keepdims=True), np.zeros(len(planes), np.float32)

    return evaluate


def fixed_evaluator(game, seed=0):
    """Deterministic, a function of the planes alone, and not uniform (so that the
    improved policy differs from the prior and the visits)."""
    weights = np.random.default_rng(seed).normal(size=(int(np.prod(game.planes_shape)), game.num_actions + 1))

    def evaluate(planes):
        out = planes.reshape(len(planes), -1).astype(np.float64) @ weights / 4.0
        policy = np.exp(out[:, :-1] - out[:, :-1].max(axis=1, keepdims=True))
        return (policy / policy.sum(axis=1, keepdims=True)).astype(np.float32), np.tanh(out[:, -1]).astype(np.float32)

    return evaluate
