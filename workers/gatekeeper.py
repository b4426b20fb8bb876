"""Gatekeeper: plays a candidate against the best and promotes it when it wins.

A plain class; the cluster makes it a Ray actor. Both networks are loaded from the
model registry (hash-checked) into this process's own compiled models, the match
is ``engine.arena.play_match`` with the run's decision rule, and a pass is recorded
with ``registry.promote`` (best version, Elo ladder, notification) in one step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tengen.engine.arena import MctsPlayer, play_match
from tengen.engine.games.base import Game
from tengen.engine.gating import Decision, GatingRule
from tengen.engine.interfaces import ModelRegistryLike
from tengen.engine.network import CompiledModel
from tengen.engine.network_spec import NetworkSpec

__all__ = ["Gatekeeper"]


class Gatekeeper:
    def __init__(self, *, game: Game, network: NetworkSpec, registry: ModelRegistryLike, rule: GatingRule,
                 simulations: int, games_in_flight: int, temperature_moves: int, c_puct: float,
                 fpu_reduction: float, leaves_per_round: int, seed: int, search: str, gumbel_considered: int,
                 gumbel_c_visit: float, gumbel_c_scale: float, avoid_own_eyes: bool):
        self.game = game
        self.registry = registry
        self.rule = rule
        self.rng = np.random.default_rng(seed)
        self.models = [network.build(), network.build()]
        self.evaluators = [CompiledModel(m) for m in self.models]
        self.slots = games_in_flight
        self.player_options: dict[str, Any] = dict(
            slots=games_in_flight, simulations=simulations, c_puct=c_puct, fpu_reduction=fpu_reduction,
            leaves_per_round=leaves_per_round, temperature_moves=temperature_moves, search=search,
            gumbel_considered=gumbel_considered, gumbel_c_visit=gumbel_c_visit, gumbel_c_scale=gumbel_c_scale,
            avoid_own_eyes=avoid_own_eyes)
        self.matches = 0

    def gate(self, candidate: int, best: int) -> dict:
        """Play ``candidate`` against ``best``; promote on a pass. Returns the result,
        with ``games``: each finished game's moves and whether the candidate moved first
        (kept off the ladder, which holds the rest)."""
        for evaluate, version in zip(self.evaluators, (candidate, best), strict=True):
            blob, _ = self.registry.fetch(version)
            evaluate.load_weights_blob(blob)
        players = [MctsPlayer(self.game, evaluate, name=name, **self.player_options)
                   for evaluate, name in zip(self.evaluators, ("candidate", "best"), strict=True)]
        games = max(self.rule.games_needed_max, 1)
        result = play_match(self.game, players[0], players[1], games=games,
                            slots=self.slots, rng=self.rng, rule=self.rule)
        self.matches += 1
        summary = {
            "candidate": candidate, "best": best, "decision": str(result.decision),
            "wins": result.wins, "draws": result.draws, "losses": result.losses,
            "elo": result.elo.elo, "elo_low": result.elo.low, "elo_high": result.elo.high,
            "llr": self.rule.llr(result.wins, result.draws, result.losses) if self.rule.kind == "sprt" else None,
            "by": self.rule.decided_by(result.wins, result.draws, result.losses),
        }
        if result.decision == Decision.PROMOTE:
            ladder = self.registry.ladder()
            base = (ladder[-1].get("elo") or 0.0) if ladder else 0.0
            self.registry.promote(candidate, elo=base + (result.elo.elo if result.games else 0.0), result=summary)
        return summary | {"games": [{"moves": list(g.moves), "candidate_black": g.first_is_black}
                                    for g in result.played]}
