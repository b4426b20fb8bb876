"""The gatekeeper decides each match once: a gatekeeper killed after its verdict and
before its reply has the match asked of its replacement, which must give the verdict
recorded, not a second one from playing it again (issue: "the gatekeeper promotes
inside the actor")."""

from __future__ import annotations

import pytest

from tengen.engine.network import weights_to_bytes
from tengen.run.config import parse_config
from tengen.run.model_registry import LocalModelRegistry
from tengen.workers.gatekeeper import Gatekeeper

CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 4},
                       "mcts": {"simulations": 8},
                       "gating": {"rule": "threshold", "threshold": 0.01, "games": 8, "games_in_flight": 8}})


@pytest.fixture
def registry() -> LocalModelRegistry:
    registry = LocalModelRegistry("gate-once")
    for version in (0, 1):
        registry.publish(version, weights_to_bytes(CONFIG.network_spec().build(), metadata={}), {})
    registry.promote(0, elo=0.0, result={"initial": True})
    return registry


def gatekeeper(registry: LocalModelRegistry, seed: int) -> Gatekeeper:
    return Gatekeeper(game=CONFIG.game.make(), network=CONFIG.network_spec(), registry=registry,
                      options=CONFIG.gating_options(), seed=seed)


def test_a_match_asked_again_gets_the_verdict_recorded_without_being_played(registry):
    first = gatekeeper(registry, seed=1)
    decided = first.gate(1, 0)
    assert first.matches == 1 and len(decided["games"]) >= 1
    ladder = registry.ladder()

    replacement = gatekeeper(registry, seed=2)  # another seed would play other games
    again = replacement.gate(1, 0)
    assert replacement.matches == 0 and again["games"] == []
    assert {k: v for k, v in again.items() if k != "games"} == {k: v for k, v in decided.items() if k != "games"}
    assert registry.ladder() == ladder  # no second promotion or rejection on the record
