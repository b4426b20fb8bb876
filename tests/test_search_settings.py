"""One value carries the search's settings from the config to every search: the play
path (``tengen gtp``, ``tengen bestmove``, the play page: ``load_player``) and
``tengen match`` honour every setting that applies to play, and the settings value
itself names those that do not (``SearchSettings.TRAINING_ONLY``)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

import tengen.play.search_player as search_player
from tengen.engine.mcts import Search, SearchSettings
from tengen.engine.network import save_weights_file
from tengen.run.checkpoint import build_model, load_player
from tengen.run.config import parse_config

#: every setting of the mcts section at a value other than its default: a PUCT run
#: and a Gumbel one (the solver is PUCT's)
PUCT_RUN = {"simulations": 48, "c_puct": 2.5, "fpu_reduction": 0.1, "leaves_per_round": 3, "virtual_loss": 2.0,
            "dirichlet_alpha": 0.03, "dirichlet_fraction": 0.5, "discount": 0.9, "solver": True,
            "avoid_own_eyes": True}
GUMBEL_RUN = {"search": "gumbel", "simulations": 24, "gumbel_considered": 5, "gumbel_c_visit": 20.0,
              "gumbel_c_scale": 0.2, "leaves_per_round": 2, "dirichlet_fraction": 0.4, "avoid_own_eyes": True}


def go5_run(mcts: dict):
    return parse_config({"game": {"name": "go", "size": 5}, "network": {"blocks": 1, "filters": 4}, "mcts": mcts})


@pytest.fixture
def searches_made(monkeypatch) -> list[SearchSettings]:
    """The settings of every ``Search`` the play path builds, as it builds them."""
    made: list[SearchSettings] = []

    class Recorded(Search):
        def __init__(self, game, *, games, settings):
            made.append(settings)
            super().__init__(game, games=games, settings=settings)

    monkeypatch.setattr(search_player, "Search", Recorded)
    return made


def test_the_settings_value_names_what_play_leaves_out_and_why():
    fields = {f.name for f in dataclasses.fields(SearchSettings)}
    assert set(SearchSettings.TRAINING_ONLY) <= fields and set(SearchSettings.FOR_ROLLOUTS) <= fields
    assert all(len(why) > 20 for why in SearchSettings.TRAINING_ONLY.values())
    training = SearchSettings(dirichlet_fraction=0.5, avoid_own_eyes=True, c_puct=3.0)
    # without root noise and the eye rule, the rest as it was
    assert training.for_play() == SearchSettings(dirichlet_fraction=0.0, avoid_own_eyes=False, c_puct=3.0)


@pytest.mark.parametrize("mcts", [PUCT_RUN, GUMBEL_RUN], ids=["puct", "gumbel"])
def test_a_checkpoint_plays_by_every_setting_that_applies_to_play(mcts, tmp_path, searches_made):
    config = go5_run(mcts)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
    save_weights_file(build_model(config), tmp_path / "model.safetensors", metadata={"version": 0})

    _, game, player = load_player(tmp_path, None, simulations=7)
    analysis = player.search(game, game.initial_state())
    assert analysis.visits >= 7 and analysis.best is not None

    (made,) = searches_made
    run = config.search_settings()
    for field in dataclasses.fields(SearchSettings):
        name = field.name
        played = getattr(made, name)
        if name == "simulations":
            assert played == 7  # the command's visits
        elif name in SearchSettings.TRAINING_ONLY:
            assert played == getattr(run.for_play(), name), name
        elif name == "value_spread":
            assert played  # the searching player reports each move's lower confidence bound
        elif name in SearchSettings.FOR_ROLLOUTS:
            assert played == field.default, name  # a network's search, not a rollout's
        else:
            assert played == getattr(run, name), name
    # no root noise (its alpha then says nothing) and no eye rule, which the run had
    played_for_training = (made.dirichlet_fraction, made.avoid_own_eyes)
    assert played_for_training == (0.0, False) != (run.dirichlet_fraction, run.avoid_own_eyes)
    # and each of the run's own values differs from the default, so each check above can fail
    assert all(getattr(run, name) != getattr(SearchSettings(), name) for name in mcts)


@pytest.mark.parametrize("mcts", [PUCT_RUN, GUMBEL_RUN], ids=["puct", "gumbel"])
def test_tengen_match_plays_the_gating_search_as_play_does(mcts):
    config = go5_run(mcts)
    match = config.match_player().search
    gating = config.gating_options().player.search
    assert match == gating.for_play()
    assert match == dataclasses.replace(config.play_search(), simulations=gating.simulations)
    assert gating == dataclasses.replace(config.search_settings(), simulations=gating.simulations)


def test_a_search_without_a_network_walks_by_uct_over_rollouts(searches_made):
    game = go5_run({}).game.make()
    player = search_player.SearchPlayer(None, search=SearchSettings(simulations=12, solver=True))
    player.search(game, game.initial_state())
    (made,) = searches_made
    assert (made.formula, made.keep_leaf_states, made.solver, made.simulations) == ("uct", True, False, 12)


def test_a_search_of_one_visit_still_chooses_a_move():
    # The first visit only expands the root: with a network the answer is its own
    # policy, without one the search makes a second visit.
    game = go5_run({}).game.make()
    analysis = search_player.SearchPlayer(None, search=SearchSettings(simulations=12)).search(
        game, game.initial_state(), max_visits=1)
    assert analysis.best is not None and game.legal_mask(game.initial_state())[analysis.best]
