"""Gatekeeper: plays a candidate against the best and promotes it when it wins.

A plain class; the cluster makes it a Ray actor. Both networks are loaded from the
model registry (hash-checked) into this process's own compiled models, each behind
an evaluation cache (``GatingOptions.cache_positions``: match games share their
openings and their trees' transpositions) that a network keeps while it holds a version
of the match (the best after a rejected candidate, a promoted candidate as the new
best), the match is
``play.match.play_match`` with the run's decision rule, and a pass is recorded
with ``registry.promote`` (best version, Elo ladder, notification) in one step.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.gating import Decision, GatingSummary
from tengen.engine.interfaces import ModelRegistryLike, match_id
from tengen.engine.mcts import CachedEvaluator, Evaluator
from tengen.engine.network import CompiledModel
from tengen.engine.network_spec import NetworkSpec
from tengen.play.match import GatingOptions, play_match

__all__ = ["Gatekeeper", "GatingGame", "GatingResult"]


class GatingGame(TypedDict):
    """One finished game of a gating match."""

    moves: list[int]  # every move played, in order
    candidate_black: bool  # whether the candidate moved first


class GatingResult(GatingSummary):
    """What ``Gatekeeper.gate`` returns: the match's verdict (``GatingSummary``, what
    the ladder keeps) and its finished games, which the run directory keeps apart
    (run/game_sample.py). It crosses Ray to the driver as it is."""

    games: list[GatingGame]


class Gatekeeper:
    def __init__(self, *, game: Game, network: NetworkSpec, registry: ModelRegistryLike, options: GatingOptions,
                 seed: int):
        self.game = game
        self.registry = registry
        self.options = options
        self.rule = options.rule
        self.rng = np.random.default_rng(seed)
        self.models = [network.build(), network.build()]
        self.compiled = [CompiledModel(m) for m in self.models]
        self.evaluators: list[Evaluator] = (
            [CachedEvaluator(m, options.cache_positions, game.num_actions) for m in self.compiled]
            if options.cache_positions > 0 else list(self.compiled))
        self.loaded: list[int | None] = [None, None]  # the version each network (and its cache) holds
        self.slots = options.games_in_flight
        self.matches = 0

    def gate(self, candidate: int, best: int) -> GatingResult:
        """Play ``candidate`` against ``best``; promote on a pass. Returns the result,
        with ``games``: each finished game's moves and whether the candidate moved first
        (kept off the ladder, which holds the rest).

        The verdict is recorded once, by the match's id, with the promotion it makes
        (``registry.decide``): a gatekeeper killed after deciding and before replying,
        whose match the driver then asks for again, gets the verdict it recorded back
        (without its games), not a second one from a replayed match."""
        match = match_id(candidate, best)
        recorded = self.registry.decision(match)
        if recorded is not None:
            return {**recorded, "games": []}
        # A network that holds one of the two versions plays it, with its cache: the best
        # after a rejected candidate, and a promoted candidate as the new best. Versions
        # never change, so nothing kept is stale.
        order = (1, 0) if best == self.loaded[0] or candidate == self.loaded[1] else (0, 1)
        for index, version in zip(order, (candidate, best), strict=True):
            if self.loaded[index] == version:
                continue
            blob, _ = self.registry.fetch(version)
            self.compiled[index].load_weights_blob(blob)
            self.loaded[index] = version
            evaluate = self.evaluators[index]
            if isinstance(evaluate, CachedEvaluator):
                evaluate.clear()  # the answers of the network it held before
        players = [self.options.player.build(self.game, self.evaluators[index], slots=self.slots, name=name)
                   for index, name in zip(order, ("candidate", "best"), strict=True)]
        games = max(self.rule.games_needed_max, 1)
        result = play_match(self.game, players[0], players[1], games=games,
                            slots=self.slots, rng=self.rng, rule=self.rule)
        self.matches += 1
        summary: GatingSummary = {
            "candidate": candidate, "best": best, "decision": str(result.decision),
            "wins": result.wins, "draws": result.draws, "losses": result.losses,
            "elo": result.elo.elo, "elo_low": result.elo.low, "elo_high": result.elo.high,
            "llr": self.rule.llr(result.wins, result.draws, result.losses) if self.rule.kind == "sprt" else None,
            "by": self.rule.decided_by(result.wins, result.draws, result.losses),
        }
        elo = None
        if result.decision == Decision.PROMOTE:
            ladder = self.registry.ladder()
            elo = ((ladder[-1].get("elo") or 0.0) if ladder else 0.0) + (result.elo.elo if result.games else 0.0)
        decided = self.registry.decide(match, summary, elo=elo)
        if decided != summary:  # recorded while this match was played: that verdict stands
            return {**decided, "games": []}
        return {**summary, "games": [{"moves": list(g.moves), "candidate_black": g.first_is_black}
                                     for g in result.played]}
