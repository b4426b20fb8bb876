"""What values the search's leaves: the ``Evaluator`` contract and the evaluators
that need no network (uniform priors; random playouts, for pure MCTS). A network's
evaluator is ``engine.network.CompiledModel``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numba import njit

from tengen.engine.games import kernels as R
from tengen.engine.games.base import Game

if TYPE_CHECKING:
    from tengen.engine.mcts.search import Search

__all__ = ["Evaluator", "ScoredEvaluator", "score_utility", "value_with_score", "utility_scale", "with_score_utility",
           "uniform_evaluator", "RolloutEvaluator", "no_evaluation"]


class Evaluator(Protocol):
    """What values a batch of leaves: ``evaluate(planes) -> (policy, value)``.

    ``planes`` is ``[B, H, W, C]`` (uint8 or float32), each position encoded for the
    player to move (``Game.encode``); ``policy`` is ``float32[B, A]``, prior
    probabilities over the game's actions, and ``value`` is ``float32[B]`` in [-1, 1],
    from the point of view of the player to move in each position. ``B`` may be 0.
    A plain function fits, as do ``engine.network.CompiledModel``, ``uniform_evaluator``'s
    functions and ``RolloutEvaluator.run``'s; an inference server behind a self-play
    worker's ``submit``/``resolve`` answers the same way. The argument is
    positional-only, so that a callable's own name for it does not matter.
    """

    def __call__(self, planes: np.ndarray, /) -> tuple[np.ndarray, np.ndarray]: ...


class ScoredEvaluator(Protocol):
    """An ``Evaluator`` that also answers each leaf's expected final score:
    ``with_score(planes) -> (policy, value, score_mean float32[B])``, the score in points
    from the mover's view (``engine.network.CompiledModel`` with the score head)."""

    def __call__(self, planes: np.ndarray, /) -> tuple[np.ndarray, np.ndarray]: ...

    def with_score(self, planes: np.ndarray, /) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def score_utility(score_mean: np.ndarray, *, weight: float, scale: float) -> np.ndarray:
    """KataGo's static score utility, ``float32[B]``: ``weight * (2 / pi) * atan(score_mean
    / scale)``, in (-weight, weight); a lead of ``scale`` points is worth half the weight."""
    mean = np.asarray(score_mean, dtype=np.float64)
    return (weight * (2.0 / np.pi) * np.arctan(mean / scale)).astype(np.float32)


def value_with_score(value: np.ndarray, score_mean: np.ndarray, *, weight: float, scale: float) -> np.ndarray:
    """The value the search backs up with the score utility, ``float32[B]``: ``(1 - weight)
    * value + score_utility(score_mean)``, in [-1, 1] as the value is. KataGo adds the
    score term to the win/loss value; here the win/loss value gives up the score term's
    weight, because an additive term put a searched position above a won game (+1, a
    terminal or the solver's proof) and the root's value outside [-1, 1], where the
    self-play sample, resignation's threshold and Q targets read a value."""
    value = np.asarray(value, dtype=np.float32).reshape(-1)
    return ((1.0 - weight) * value + score_utility(score_mean, weight=weight, scale=scale)).astype(np.float32)


def utility_scale(height: int, width: int) -> float:
    """The score utility's scale in points on a board: its side (KataGo's square root of
    the board's area), so that a lead of a row's worth is worth half the weight."""
    return math.sqrt(height * width)


def with_score_utility(scored: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]], *,
                       weight: float, side: float) -> Evaluator:
    """An ``Evaluator`` from a scored one (``ScoredEvaluator.with_score``) whose values
    carry the score utility (``score_utility`` with the board's ``side`` as its scale),
    as ``Search.apply`` adds it: for the paths that carry policy and value only
    (self-play's inference server, its evaluation cache, its ``SelfPlay``), which then
    back the utility up unchanged. The utility is a function of the position, so a
    cached answer stays right."""

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        policy, value, score = scored(planes)
        return policy, value_with_score(value, score, weight=weight, scale=side)

    return evaluate


def no_evaluation(game: Game) -> tuple[np.ndarray, np.ndarray]:
    """The evaluation of an empty batch (a round whose walks all ended on terminal nodes)."""
    return np.zeros((0, game.num_actions), np.float32), np.zeros(0, np.float32)


def uniform_evaluator(num_actions: int) -> Evaluator:
    """Uniform priors and value 0: search by visit counts alone (tests, benchmarks)."""

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.full((n, num_actions), 1.0 / num_actions, dtype=np.float32), np.zeros(n, dtype=np.float32)

    return evaluate


@njit(cache=True)
def rollout_values_kernel(kind, params, states, count, rollouts, seed, out):
    """Mean result of ``rollouts`` random playouts from each state, for its mover."""
    np.random.seed(seed)
    scratch = states[0].copy()
    for b in range(count):
        total = 0.0
        for _ in range(rollouts):
            total += R.random_outcome(kind, params, states[b], scratch)
        out[b] = (total if states[b, R.TO_PLAY] == 0 else -total) / rollouts


class RolloutEvaluator:
    """Pure MCTS's evaluator: uniform priors, value from random playouts to the end.

    It needs the leaves' positions, not planes: ``run(search)`` drives a Search made
    with ``keep_leaf_states=True``.
    """

    def __init__(self, game: Game, *, rollouts: int = 1, seed: int = 0):
        self.game = game
        self.rollouts = rollouts
        self._seed = seed

    def evaluate_states(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(policy[B, A], value[B])`` of ``states[B, S]``."""
        n = len(states)
        values = np.zeros(n, dtype=np.float32)
        if n:
            rollout_values_kernel(self.game.kernel_kind, self.game.params, states, n, self.rollouts,
                                  self._seed, values)
            self._seed = (self._seed + 1) % (2**32)
        policy = np.full((n, self.game.num_actions), 1.0 / self.game.num_actions, dtype=np.float32)
        return policy, values

    def run(self, search: Search, simulations: np.ndarray | int | None = None,
            active: np.ndarray | None = None) -> int:
        """``search.run`` with this evaluator; returns its calls."""
        return search.run(lambda planes: self.evaluate_states(search.leaf_states()), simulations, active)
