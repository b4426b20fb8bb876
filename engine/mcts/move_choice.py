"""From visit counts to a move: the policy target, temperature sampling, and the
best move of one position."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.mcts.evaluators import Evaluator
from tengen.engine.mcts.search import Search

__all__ = ["visit_policy", "choose_move", "best_move"]


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


def best_move(game: Game, evaluate: Evaluator, state: np.ndarray, history: Sequence[np.ndarray] = (), *,
              simulations: int, c_puct: float = 1.25, fpu_reduction: float = 0.25,
              leaves_per_round: int = 8) -> int:
    """The move to play in one position: the most visited after ``simulations`` of
    search, or with ``simulations=0`` the legal move the evaluator's policy likes best."""
    if game.is_terminal(state):
        raise ValueError("the game is over")
    if simulations == 0:
        policy, _ = evaluate(game.encode(state, history)[None].astype(np.uint8))
        return int(np.argmax(np.where(game.legal_mask(state), policy[0], -1.0)))
    search = Search(game, games=1, simulations=simulations, c_puct=c_puct, fpu_reduction=fpu_reduction,
                    leaves_per_round=leaves_per_round)
    search.reset(0, state, history)
    search.run(evaluate)
    visits = search.root_visits(0)
    return int(np.argmax(np.where(game.legal_mask(state), visits, -1.0)))
