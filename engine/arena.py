"""Matches between two players, many games at once, colours alternated.

A player keeps one slot per concurrent game: ``new_game(slot, state)`` starts a
game, ``choose(slots, states, rng)`` picks the moves of the games in which it is to
move (one batched search for all of them), and ``advance(slot, action)`` tells it the
move played (its own or the opponent's), so tree players keep their subtrees.

``play_match`` stops as soon as the decision rule (engine/gating.py) has a verdict;
the result carries the wins, draws and losses of the first player and an Elo
estimate with its interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.gating import Decision, EloEstimate, GatingRule, estimate_elo
from tengen.engine.mcts import Evaluator, RolloutEvaluator, Search, choose_move

__all__ = ["Player", "MctsPlayer", "RolloutMctsPlayer", "RandomPlayer", "PlayedGame", "MatchResult", "play_match"]


class Player(Protocol):
    name: str

    def new_game(self, slot: int, state: np.ndarray) -> None: ...

    def choose(self, slots: list[int], states: list[np.ndarray], rng: np.random.Generator) -> list[int]: ...

    def advance(self, slot: int, action: int) -> None: ...


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
                 gumbel_c_scale: float = 1.0):
        self.name = name
        self.game = game
        self.evaluate = evaluate
        self.simulations = simulations
        self.temperature_moves = temperature_moves
        self.search = Search(game, games=slots, simulations=simulations, c_puct=c_puct,
                             fpu_reduction=fpu_reduction, leaves_per_round=leaves_per_round, formula=formula,
                             keep_leaf_states=keep_leaf_states, search=search,
                             gumbel_considered=gumbel_considered, gumbel_c_visit=gumbel_c_visit,
                             gumbel_c_scale=gumbel_c_scale)

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
        return [choose_move(self.search.root_visits(slot), rng, temperature=1.0 if opening else 0.0)
                for slot, opening in zip(slots, openings, strict=True)]

    def advance(self, slot: int, action: int) -> None:
        self.search.advance(slot, action)


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


@dataclass(frozen=True)
class PlayedGame:
    """One finished game of a match, in the order the games ended."""

    moves: tuple[int, ...]
    first_is_black: bool  # whether the first player moved first (Go: black)
    outcome: float  # +1 / 0 / -1 for the player who moved first


@dataclass(frozen=True)
class MatchResult:
    """The first player's results against the second, and the games that were played
    to the end (those cut off by an early decision are not)."""

    wins: int
    draws: int
    losses: int
    decision: Decision
    elo: EloEstimate
    played: tuple[PlayedGame, ...] = ()

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.5


def play_match(
    game: Game,
    first: Player,
    second: Player,
    *,
    games: int,
    slots: int,
    rng: np.random.Generator,
    rule: GatingRule | None = None,
) -> MatchResult:
    """Play up to ``games`` games, ``slots`` at a time, ``first`` taking player 0 in
    even-numbered games and player 1 in odd ones; stop early once ``rule`` decides.
    Without a rule every game is played (a measurement), and the decision says
    whether ``first`` scored above one half."""
    wins = draws = losses = 0
    started = 0
    states: list[np.ndarray | None] = [None] * slots
    first_is_black = [True] * slots
    moves: list[list[int]] = [[] for _ in range(slots)]
    played: list[PlayedGame] = []
    decision = rule.decide(0, 0, 0) if rule else Decision.CONTINUE

    def start(slot: int) -> None:
        nonlocal started
        state = game.initial_state()
        states[slot] = state
        first_is_black[slot] = started % 2 == 0
        moves[slot] = []
        first.new_game(slot, state)
        second.new_game(slot, state)
        started += 1

    for slot in range(min(slots, games)):
        start(slot)
    while decision == Decision.CONTINUE and any(s is not None for s in states):
        for player, is_first in ((first, True), (second, False)):
            movers = [i for i, s in enumerate(states)
                      if s is not None and (game.to_play(s) == 0) == (first_is_black[i] == is_first)]
            if not movers:
                continue
            actions = player.choose(movers, [s for i in movers if (s := states[i]) is not None], rng)
            for slot, action in zip(movers, actions, strict=True):
                state = states[slot]
                assert state is not None
                game.play(state, action)
                moves[slot].append(int(action))
                first.advance(slot, action)
                second.advance(slot, action)
                if not game.is_terminal(state):
                    continue
                played.append(PlayedGame(tuple(moves[slot]), first_is_black[slot], game.outcome(state)))
                result = game.outcome(state) * (1 if first_is_black[slot] else -1)
                wins, draws, losses = wins + (result > 0), draws + (result == 0), losses + (result < 0)
                states[slot] = None
                if rule:
                    decision = rule.decide(wins, draws, losses)
                if decision == Decision.CONTINUE and started < games:
                    start(slot)
            if decision != Decision.CONTINUE:
                break
    if decision == Decision.CONTINUE:  # every game played without a verdict
        decision = rule.decide(wins, draws, losses) if rule else Decision.CONTINUE
        if decision == Decision.CONTINUE:
            decision = Decision.PROMOTE if wins + 0.5 * draws > 0.5 * max(wins + draws + losses, 1) else Decision.REJECT
    return MatchResult(wins, draws, losses, decision, estimate_elo(wins, draws, losses), tuple(played))
