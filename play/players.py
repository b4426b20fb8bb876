"""The players of matches: ``MctsPlayer`` for a model, ``RolloutMctsPlayer`` for pure
MCTS, ``RandomPlayer``. Each is play/match.py's ``Player``, and their games are played
by its ``play_games``, the one loop for every match (a GTP engine is the other kind of
player, play/gtp_player.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.mcts import Evaluator, RolloutEvaluator, Search, SearchSettings, choose_move
from tengen.play.match import PlayerBase

__all__ = ["MctsPlayer", "MctsPlayerSettings", "RolloutMctsPlayer", "RandomPlayer"]


class MctsPlayer(PlayerBase):
    """A model's search (``search``, one ``SearchSettings``) over all its games at
    once; the most visited move (by lower confidence bound with ``search.lcb_z``),
    except for the first ``temperature_moves`` moves of a game, sampled from the
    visits so that games between the same two players differ.
    With ``search.search == "gumbel"``: Gumbel's move, searched with Gumbel noise in
    those first moves (a sample of the improved policy) and without it after. The
    root noise of self-play is not a player's: it searches by ``search`` as given
    (``SearchSettings.for_play`` drops what is for training)."""

    def __init__(self, game: Game, evaluate: Evaluator, *, slots: int, search: SearchSettings,
                 temperature_moves: int = 0, name: str = "mcts"):
        self.name = name
        self.game = game
        self.evaluate = evaluate
        self.simulations = search.simulations
        self.temperature_moves = temperature_moves
        self.search = Search(game, games=slots, settings=search)

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
        if self.search.settings.lcb_z > 0:
            return [choose_move(self.search.move_visits(slot), rng, temperature=1.0, unsampled=self.game.pass_action)
                    if opening else self.search.best_move(slot) for slot, opening in zip(slots, openings, strict=True)]
        return [choose_move(self.search.move_visits(slot), rng, temperature=1.0 if opening else 0.0,
                            unsampled=self.game.pass_action)
                for slot, opening in zip(slots, openings, strict=True)]

    def advance(self, slot: int, action: int) -> None:
        self.search.advance(slot, action)


@dataclass(frozen=True)
class MctsPlayerSettings:
    """How an ``MctsPlayer`` searches and chooses its moves, as one typed value. The
    run config makes the gating players' (``TengenConfig.gating_options().player``)
    and ``tengen match``'s (``TengenConfig.match_player()``)."""

    search: SearchSettings
    temperature_moves: int = 0

    def with_simulations(self, simulations: int) -> MctsPlayerSettings:
        """These settings with another visit limit (``tengen match --sims``, the benches)."""
        return dataclasses.replace(self, search=dataclasses.replace(self.search, simulations=simulations))

    def build(self, game: Game, evaluate: Evaluator, *, slots: int, name: str) -> MctsPlayer:
        """A player of ``game`` with these settings, searching ``slots`` games at once."""
        return MctsPlayer(game, evaluate, slots=slots, search=self.search, temperature_moves=self.temperature_moves,
                          name=name)


class RolloutMctsPlayer(MctsPlayer):
    """Pure MCTS: UCT over uniform priors, leaves valued by random playouts (the
    baseline of the classic tutorials and of OpenSpiel's MCTSBot)."""

    def __init__(self, game: Game, *, slots: int, simulations: int, seed: int, uct_c: float = 2.0,
                 rollouts: int = 1, name: str | None = None):
        self._rollouts = RolloutEvaluator(game, rollouts=rollouts, seed=seed)
        search = SearchSettings(simulations=simulations, c_puct=uct_c, leaves_per_round=1).for_rollouts()
        super().__init__(game, self._rollouts.evaluate_states, slots=slots, search=search,
                         name=name or f"mcts{simulations}")

    def _search(self, active: np.ndarray) -> None:
        self._rollouts.run(self.search, self.simulations, active)


class RandomPlayer(PlayerBase):
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
