"""From visit counts to a move: the policy target, temperature sampling, and the
best move of one position."""

from __future__ import annotations

import numpy as np

__all__ = ["visit_policy", "choose_move"]


def visit_policy(visits: np.ndarray) -> np.ndarray:
    """The search policy target: visit counts normalised to sum to 1."""
    total = visits.sum()
    return (visits / total).astype(np.float32) if total > 0 else visits.astype(np.float32)


def choose_move(visits: np.ndarray, rng: np.random.Generator, *, temperature: float,
                unsampled: int | None = None) -> int:
    """Sample a move with probability proportional to N^(1 / temperature); temperature
    0 takes the most visited (ties broken at random).

    ``unsampled`` (Go's pass) stays in the draw only when it has more visits than every
    other move: a sampled pass invites the opponent to end the game by passing
    back, and Go self-play on few simulations then collapses into games of one or two
    moves that teach nothing else (seen in a go9 run: its first promoted network's
    games averaged 2.8 moves)."""
    if temperature <= 0:
        best = np.flatnonzero(visits == visits.max())
        return int(rng.choice(best))
    weights = visits.astype(np.float64) ** (1.0 / temperature)
    if unsampled is not None:
        others = np.delete(visits, unsampled)
        if others.max() > 0 and visits[unsampled] <= others.max():
            weights[unsampled] = 0.0
    return int(rng.choice(len(visits), p=weights / weights.sum()))
