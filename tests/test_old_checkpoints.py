"""A Go model from before KataGo's techniques (no feature planes, no global pooling,
none of the new heads) loads and plays under today's go9 config, and a model with all
of them under a config from before: the weights say what the network has."""

from __future__ import annotations

import pytest
import yaml

from tengen.engine.network import (
    WeightsError,
    save_weights_file,
    weights_global_pooling_every,
    weights_input_planes,
    weights_to_bytes,
)
from tengen.run.checkpoint import build_model, load_model, load_player
from tengen.run.config import parse_config

BEFORE = {"game": {"name": "go", "size": 9, "komi": 7.5},
          "network": {"blocks": 2, "filters": 8, "ownership": False},
          "mcts": {"simulations": 8}}
TODAY = {"game": {"name": "go", "size": 9, "komi": 7.5, "features": True},
         "network": {"blocks": 2, "filters": 8, "ownership": True, "global_pooling_every": 2,
                     "opponent_policy": True, "score": True},
         "mcts": {"simulations": 8, "score_utility": 0.1, "lcb_z": 5.0}}


def test_the_weights_header_says_which_planes_and_pooling_the_network_has():
    plain, featured = build_model(parse_config(BEFORE)), build_model(parse_config(TODAY))
    assert weights_input_planes(weights_to_bytes(plain, metadata={})) == 17  # 8 positions x 2 colours, the mover
    assert weights_input_planes(weights_to_bytes(featured, metadata={})) == 37  # and 20 feature planes
    assert weights_global_pooling_every(weights_to_bytes(plain, metadata={}), blocks=2) == 0
    assert weights_global_pooling_every(weights_to_bytes(featured, metadata={}), blocks=2) == 2
    every_block = build_model(parse_config({**TODAY, "network": {**TODAY["network"], "global_pooling_every": 1}}))
    assert weights_global_pooling_every(weights_to_bytes(every_block, metadata={}), blocks=2) == 1
    # pooling in both of 2 blocks is every block's; in a net of 3 no setting pools the first two alone
    assert weights_global_pooling_every(weights_to_bytes(every_block, metadata={}), blocks=3) is None


@pytest.mark.parametrize("trained, loaded_under", [(BEFORE, TODAY), (TODAY, BEFORE)], ids=["old-model", "new-model"])
def test_a_model_loads_and_plays_under_a_go_config_of_the_other_time(tmp_path, trained, loaded_under):
    weights = tmp_path / "model.safetensors"
    save_weights_file(build_model(parse_config(trained)), weights, metadata={})
    config_file = tmp_path / "go9.yaml"
    config_file.write_text(yaml.safe_dump(loaded_under))

    config, game, _ = load_model(weights, parse_config(loaded_under))
    had = parse_config(trained)
    assert bool(config.game.features) == bool(had.game.features)
    assert config.network.global_pooling_every == had.network.global_pooling_every
    assert (config.network.ownership, config.network.opponent_policy, config.network.score) == (
        had.network.ownership, had.network.opponent_policy, had.network.score)
    assert game.planes_shape[2] == weights_input_planes(weights.read_bytes())

    _, game, player = load_player(str(weights), str(config_file), 8)
    state = game.initial_state()
    assert game.legal_mask(state)[player(game, state, [])]


def test_weights_of_another_board_or_history_are_still_refused_with_the_planes_each_reads(tmp_path):
    # no feature setting gives 13 planes (a history of 6): the loader does not guess
    weights = tmp_path / "model.safetensors"
    save_weights_file(build_model(parse_config({**BEFORE, "game": {**BEFORE["game"], "history_length": 6}})),
                      weights, metadata={})
    with pytest.raises(WeightsError, match="the weights read 13 input planes and this config's game gives 37"):
        load_model(weights, parse_config(TODAY))
