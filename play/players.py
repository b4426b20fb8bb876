"""The players of matches: ``MctsPlayer`` for a model, ``RolloutMctsPlayer`` for pure
MCTS, ``RandomPlayer``. Each is play/match.py's ``Player``, and their games are played
by its ``play_games``, the one loop for every match (a GTP engine is the other kind of
player, play/gtp_player.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.mcts import Evaluator, RolloutEvaluator, Search, SearchChoice, choose_move

__all__ = ["MctsPlayer", "MctsPlayerSettings", "RolloutMctsPlayer", "RandomPlayer"]


class MctsPlayer:
    """PUCT search with an evaluator (a model); the most visited move, except for the
    first ``temperature_moves`` moves of a game, sampled from the visits so that games
    between the same two players differ. With ``search="gumbel"``: Gumbel's move,
    searched with Gumbel noise in those first moves (a sample of the improved policy)
    and without it after."""

    def __init__(self, game: Game, evaluate: Evaluator, *, slots: int, simulations: int, name: str = "mcts",
                 c_puct: float = 1.25, fpu_reduction: float = 0.25, leaves_per_round: int = 8,
                 temperature_moves: int = 0, formula: str = "puct", keep_leaf_states: bool = False,
                 search: str = "puct", gumbel_considered: int = 16, gumbel_c_visit: float = 50.0,
                 gumbel_c_scale: float = 0.1, avoid_own_eyes: bool = False, discount: float = 1.0,
                 solver: bool = False):
        self.name = name
        self.game = game
        self.evaluate = evaluate
        self.simulations = simulations
        self.temperature_moves = temperature_moves
        self.search = Search(game, games=slots, simulations=simulations, c_puct=c_puct,
                             fpu_reduction=fpu_reduction, leaves_per_round=leaves_per_round, formula=formula,
                             keep_leaf_states=keep_leaf_states, search=search,
                             gumbel_considered=gumbel_considered, gumbel_c_visit=gumbel_c_visit,
                             gumbel_c_scale=gumbel_c_scale, avoid_own_eyes=avoid_own_eyes, discount=discount,
                             solver=solver)

    def new_game(self, slot: int, state: np.ndarray) -> None:
        self.search.reset(slot, state)

    def _search(self, active: np.ndarray) -> None:
        self.search.run(self.evaluate, self.simulations, active)

    def choose(self, slots: list[int], states: list[np.ndarray], rng: np.random.Generator) -> list[int]:
        active = np.zeros(self.search.games, dtype=np.bool_)
        active[slots] = True
        openings = [self.game.move_number(state) < self.temperature_moves for state in states]
        if self.search.gumbel:
            for slot, opening in zip(slots, openings, strict=True):
                if opening:
                    self.search.sample_gumbel(slot, rng)
        self._search(active)
        if self.search.gumbel:
            return [self.search.gumbel_action(slot) for slot in slots]
        return [choose_move(self.search.move_visits(slot), rng, temperature=1.0 if opening else 0.0,
                            unsampled=self.game.pass_action)
                for slot, opening in zip(slots, openings, strict=True)]

    def advance(self, slot: int, action: int) -> None:
        self.search.advance(slot, action)


@dataclass(frozen=True)
class MctsPlayerSettings:
    """How an ``MctsPlayer`` searches and chooses its moves: its keywords besides the
    evaluator, the slots and the name, as one typed value. The run config makes the
    gating players' (``TengenConfig.gating_options().player``, which ``tengen match``
    plays by too), so that their defaults are the schema's alone."""

    simulations: int
    c_puct: float
    fpu_reduction: float
    leaves_per_round: int
    temperature_moves: int
    search: SearchChoice

    def build(self, game: Game, evaluate: Evaluator, *, slots: int, name: str) -> MctsPlayer:
        """A player of ``game`` with these settings, searching ``slots`` games at once."""
        choice = self.search
        return MctsPlayer(game, evaluate, slots=slots, simulations=self.simulations, name=name, c_puct=self.c_puct,
                          fpu_reduction=self.fpu_reduction, leaves_per_round=self.leaves_per_round,
                          temperature_moves=self.temperature_moves, search=choice.search,
                          gumbel_considered=choice.gumbel_considered, gumbel_c_visit=choice.gumbel_c_visit,
                          gumbel_c_scale=choice.gumbel_c_scale, avoid_own_eyes=choice.avoid_own_eyes,
                          discount=choice.discount, solver=choice.solver)


class RolloutMctsPlayer(MctsPlayer):
    """Pure MCTS: UCT over uniform priors, leaves valued by random playouts (the
    baseline of the classic tutorials and of OpenSpiel's MCTSBot)."""

    def __init__(self, game: Game, *, slots: int, simulations: int, seed: int, uct_c: float = 2.0,
                 rollouts: int = 1, name: str | None = None):
        self._rollouts = RolloutEvaluator(game, rollouts=rollouts, seed=seed)
        super().__init__(game, self._rollouts.evaluate_states, slots=slots, simulations=simulations,
                         name=name or f"mcts{simulations}", c_puct=uct_c, leaves_per_round=1, formula="uct",
                         keep_leaf_states=True)

    def _search(self, active: np.ndarray) -> None:
        self._rollouts.run(self.search, self.simulations, active)


class RandomPlayer:
    """Uniformly random legal moves. ``avoid_own_eyes`` (Go): never one that fills a
    single-point eye of the mover's own, and a pass only when nothing else is left,
    the random player that Go benchmarks measure against (one that fills its eyes
    kills its own groups, and a pass among its moves ends games early)."""

    def __init__(self, game: Game, name: str = "random", *, avoid_own_eyes: bool = False):
        if avoid_own_eyes and not isinstance(game, GoGame):
            raise ValueError(f"avoid_own_eyes is for Go, not {game.name}")
        self.game = game
        self.name = name
        self.avoid_own_eyes = avoid_own_eyes

    def new_game(self, slot: int, state: np.ndarray) -> None:
        pass

    def choose(self, slots: list[int], states: list[np.ndarray], rng: np.random.Generator) -> list[int]:
        return [self._move(s, rng) for s in states]

    def _move(self, state: np.ndarray, rng: np.random.Generator) -> int:
        legal = np.flatnonzero(self.game.legal_mask(state))
        if self.avoid_own_eyes:
            game = self.game
            assert isinstance(game, GoGame)
            board = [int(a) for a in legal if a != game.pass_action and not game.is_own_eye(state, int(a))]
            if board:
                return int(rng.choice(board))
            return game.pass_action
        return int(rng.choice(legal))

    def advance(self, slot: int, action: int) -> None:
        pass
