"""The ownership head: the network's third output, its loss, and weights from before it
(tiny Go 5x5 nets)."""

import keras
import numpy as np
import pytest
import yaml

from tengen.cli import gtp_ownership
from tengen.engine.games import make_game
from tengen.engine.network import (
    CompiledModel,
    WeightsError,
    build_network,
    has_ownership,
    save_weights_file,
    weights_from_bytes,
    weights_have_ownership,
    weights_to_bytes,
)
from tengen.learner.replay import ReplayWindow
from tengen.learner.trainer import Trainer
from tengen.play.gtp import GtpEngine
from tengen.play.ownership import NetworkOwnership, area_without_dead
from tengen.run.checkpoint import load_model, load_player
from tengen.run.config import ConfigError, load_config, parse_config

GO5 = make_game("go", size=5)


def tiny(*, ownership: bool):
    return build_network(input_shape=GO5.planes_shape, num_actions=GO5.num_actions, blocks=1, filters=8,
                         ownership=ownership)


def planes(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, (batch, *GO5.planes_shape)).astype(np.float32)


@pytest.fixture(scope="module")
def with_head():
    return tiny(ownership=True)


@pytest.fixture(scope="module")
def without_head():
    return tiny(ownership=False)


def test_the_head_is_a_third_output_of_one_value_per_point(with_head, without_head):
    assert has_ownership(with_head) and not has_ownership(without_head)
    assert list(with_head.output_shape) == [(None, 26), (None,), (None, 25)]
    assert list(without_head.output_shape) == [(None, 26), (None,)]
    _, _, owners = with_head(planes(4), training=False)
    assert owners.shape == (4, 25) and np.all(np.abs(keras.ops.convert_to_numpy(owners)) <= 1.0)  # tanh


def test_the_compiled_call_keeps_two_outputs_and_ownership_is_its_own_call(with_head, without_head):
    compiled = CompiledModel(with_head, buckets=(1, 8))
    policy, value = compiled(planes(3))
    assert policy.shape == (3, 26) and value.shape == (3,)
    np.testing.assert_allclose(policy.sum(axis=1), 1.0, rtol=1e-5)
    owners = compiled.ownership(planes(3))
    assert owners.shape == (3, 25) and owners.dtype == np.float32 and np.all(np.abs(owners) <= 1.0)
    # the same numbers as the model's own third output, bucket padding and all
    np.testing.assert_allclose(owners, keras.ops.convert_to_numpy(with_head(planes(3), training=False)[2]), atol=1e-5)
    assert compiled.ownership(np.zeros((0, *GO5.planes_shape), np.float32)).shape == (0, 25)
    # the evaluation a search makes is the same with or without the head's variables
    plain = CompiledModel(without_head, buckets=(1, 8))
    assert not plain.has_ownership
    with pytest.raises(ValueError, match="no ownership head"):
        plain.ownership(planes(1))


# -- weights from before the head ----------------------------------------------------------------


def test_old_weights_load_without_the_head_and_refuse_a_network_that_wants_it(without_head):
    old = weights_to_bytes(without_head, metadata={"version": 3})
    assert not weights_have_ownership(old)
    weights_from_bytes(tiny(ownership=False), old)  # as before
    with pytest.raises(WeightsError, match="the blob has no ownership head .* network.ownership false"):
        weights_from_bytes(tiny(ownership=True), old)


def test_weights_with_the_head_say_so_and_refuse_a_network_without_it(with_head):
    new = weights_to_bytes(with_head, metadata={})
    assert weights_have_ownership(new)
    with pytest.raises(WeightsError, match="has an ownership head that this network lacks"):
        weights_from_bytes(tiny(ownership=False), new)
    copy = tiny(ownership=True)
    weights_from_bytes(copy, new)
    owners = [keras.ops.convert_to_numpy(model(planes(2), training=False)[2]) for model in (copy, with_head)]
    np.testing.assert_array_equal(*owners)


def test_a_learner_checkpoint_from_before_the_head_is_refused_clearly(without_head):
    old = Trainer(model=tiny(ownership=False), optimizer="adam", learning_rate=0.01).checkpoint_to_bytes()
    with pytest.raises(WeightsError, match="no ownership head"):
        Trainer(model=tiny(ownership=True), optimizer="adam", learning_rate=0.01).restore_from_bytes(old)


GO5_CONFIG = {"game": {"name": "go", "size": 5}, "network": {"blocks": 1, "filters": 8, "ownership": True},
              "mcts": {"simulations": 8}}


def test_gtp_loading_takes_the_head_from_the_weights(tmp_path, without_head):
    # A run's weights from before the head, loaded under a config that asks for it (the
    # new go configs): a network without the head, and the config returned says so.
    save_weights_file(without_head, tmp_path / "model.safetensors", metadata={})
    config, _, model = load_model(tmp_path / "model.safetensors", parse_config(GO5_CONFIG))
    assert not config.network.ownership and not has_ownership(model)
    save_weights_file(tiny(ownership=True), tmp_path / "new.safetensors", metadata={})
    config, _, model = load_model(tmp_path / "new.safetensors", parse_config(GO5_CONFIG))
    assert config.network.ownership and has_ownership(model)


# -- the config -------------------------------------------------------------------------------


def test_the_head_is_off_by_default_on_in_the_go_configs_and_for_go_only():
    assert not parse_config({"game": {"name": "go", "size": 9}}).network.ownership
    for name in ("go9", "go13", "go19"):
        config = load_config(f"configs/{name}.yaml")
        assert config.network.ownership and config.network_spec().ownership
        assert config.learner_options().ownership_weight == 1.0
    with pytest.raises(ConfigError, match="network.ownership applies to go only, not connect4"):
        parse_config({"game": {"name": "connect4"}, "network": {"ownership": True}})


def test_the_memory_estimate_counts_the_ownership_the_window_keeps():
    config = parse_config({**GO5_CONFIG, "train": {"replay_window": 300, "min_positions": 10}})
    window = ReplayWindow(capacity=300, planes_shape=GO5.planes_shape, num_actions=GO5.num_actions,
                          ownership_points=25)
    stored = (window.planes, window.policy, window.value, window.ownership, window.has_ownership)
    assert config.memory_estimates()["replay"] == sum(a.nbytes for a in stored)


# -- the loss ---------------------------------------------------------------------------------


def test_the_ownership_loss_is_the_masked_mean_per_point_squared_error():
    model = tiny(ownership=True)
    trainer = Trainer(model=model, optimizer="sgd", learning_rate=0.01, ownership_weight=2.0)
    rng = np.random.default_rng(1)
    x = planes(6, seed=1)
    policy = np.full((6, 26), 1 / 26, np.float32)
    value = rng.choice([-1.0, 1.0], 6).astype(np.float32)
    target = rng.choice([-1.0, 0.0, 1.0], (6, 25)).astype(np.float32)
    has = np.array([1, 1, 0, 1, 0, 0], np.float32)
    owners = keras.ops.convert_to_numpy(model(x, training=True)[2])  # what the step sees (batch-norm stats alike)
    by_hand = ((owners - target) ** 2).mean(axis=1)[has == 1].mean()

    losses = trainer.train_step(x, policy, value, target, has)
    assert losses["ownership_loss"] == pytest.approx(by_hand, rel=1e-4)
    parts = losses["policy_loss"] + losses["value_loss"] + 2.0 * losses["ownership_loss"] + losses["l2"]
    assert losses["loss"] == pytest.approx(parts, rel=1e-5)
    # a batch without a single target costs nothing, and no targets at all means that
    assert trainer.train_step(x, policy, value, target, np.zeros(6, np.float32))["ownership_loss"] == 0.0
    assert trainer.train_step(x, policy, value)["ownership_loss"] == 0.0
    assert trainer.trace_count == (0 if keras.backend.backend() == "torch" else 1)  # PyTorch: eager


def test_ownership_targets_need_the_head():
    trainer = Trainer(model=tiny(ownership=False), optimizer="sgd", learning_rate=0.01)
    x, policy, value = planes(2), np.full((2, 26), 1 / 26, np.float32), np.zeros(2, np.float32)
    assert "ownership_loss" not in trainer.train_step(x, policy, value)
    with pytest.raises(ValueError, match="without the ownership head"):
        trainer.train_step(x, policy, value, np.zeros((2, 25), np.float32), np.ones(2, np.float32))


# -- use: GTP's dead stones and kata-analyze's ownership ----------------------------------------


def stones_head(images: np.ndarray) -> np.ndarray:
    """A stand-in head that knows only the stones: +1 on the mover's, -1 on the opponent's."""
    return (images[..., 0].astype(np.float32) - images[..., 1]).reshape(len(images), -1)


def test_network_ownership_maps_each_symmetry_back_and_turns_to_blacks_view():
    state, history = GO5.initial_state(), []
    for move in ("A5", "E1", "B5"):  # Black A5 and B5, White E1; White to move
        history.append(state.copy())
        GO5.play(state, GO5.text_to_action(move))
    estimate = NetworkOwnership(GO5, stones_head)(state, history)
    expected = np.zeros(25, np.float32)
    expected[[GO5.text_to_action(v) for v in ("A5", "B5")]] = 1.0  # Black's, though White is to move
    expected[GO5.text_to_action("E1")] = -1.0
    np.testing.assert_array_equal(estimate, expected)

    # A head that only ever says "the top-left corner is the mover's": averaged over the
    # 8 symmetries, each of the 4 corners gets 2 of them, from Black's view when Black moves.
    def corner_head(images):
        out = np.zeros((len(images), 25), np.float32)
        out[:, 0] = 1.0
        return out

    averaged = NetworkOwnership(GO5, corner_head)(GO5.initial_state())
    corners = [GO5.text_to_action(v) for v in ("A5", "E5", "A1", "E1")]
    assert averaged[corners].tolist() == [0.25] * 4 and np.delete(averaged, corners).tolist() == [0.0] * 21
    assert NetworkOwnership(GO5, corner_head, symmetries=False)(GO5.initial_state())[0] == 1.0
    with pytest.raises(ValueError, match="answered"):
        NetworkOwnership(GO5, lambda images: np.zeros((1, 25)))(GO5.initial_state())


def test_gtp_reads_the_heads_ownership_for_dead_stones_and_kata_analyze(tmp_path):
    config_file = tmp_path / "go5.yaml"
    config_file.write_text(yaml.safe_dump(GO5_CONFIG))
    save_weights_file(tiny(ownership=True), tmp_path / "model.safetensors", metadata={})
    config, game, player = load_player(str(tmp_path / "model.safetensors"), str(config_file), 8)
    factory = gtp_ownership(config, player)
    assert factory is not None
    engine = GtpEngine(size=5, komi=7.5, player=player, ownership=factory, history_length=game.history_length,
                       max_moves=game.max_moves, analysis_visits=16)
    for command in ("play b C3", "play w D3", "play b C4"):
        assert engine.handle(command) == "=\n\n"
    head = NetworkOwnership(game, player.evaluate.ownership)
    state, history = game.state_from_moves([game.text_to_action(v) for v in ("C3", "D3", "C4")])
    network = head(state, history)  # Black's view; White is to move

    reply = engine.handle("kata-analyze w 10 ownership true")
    owners = np.array(reply.split(" ownership ")[1].split(), np.float32)
    assert owners.shape == (25,) and np.all(np.abs(owners) <= 1.0)
    np.testing.assert_allclose(owners, -network, atol=1e-5)  # for the player to move, as KataGo prints it

    # final_status_list: a group is dead where the head gives its stones to the other side
    at = {v: float(network[game.text_to_action(v)]) for v in ("C3", "C4", "D3")}
    expected = (["C3", "C4"] if at["C3"] + at["C4"] < 0 else []) + (["D3"] if -at["D3"] < 0 else [])
    dead = engine.handle("final_status_list dead")[2:].split()
    alive = engine.handle("final_status_list alive")[2:].split()
    assert sorted(dead) == sorted(expected) and sorted(dead + alive) == ["C3", "C4", "D3"]
    # and final_score takes those stones off
    score = area_without_dead(game, state, [game.text_to_action(v) for v in dead]) - game.komi
    assert engine.handle("final_score") == f"= {'B' if score > 0 else 'W'}+{abs(score):g}\n\n"


def test_gtp_keeps_its_playouts_for_a_checkpoint_without_the_head(tmp_path):
    config_file = tmp_path / "go5.yaml"
    config_file.write_text(yaml.safe_dump({**GO5_CONFIG, "network": {"blocks": 1, "filters": 8}}))
    save_weights_file(tiny(ownership=False), tmp_path / "model.safetensors", metadata={})
    config, _, player = load_player(str(tmp_path / "model.safetensors"), str(config_file), 8)
    assert gtp_ownership(config, player) is None
