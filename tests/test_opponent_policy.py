"""KataGo's auxiliary opponent-policy target: a second policy head that predicts the
opponent's reply, trained on the next position's search policy with a small weight
(0.15), and ignored by everything that plays. Tiny tic-tac-toe and Go 5x5 nets."""

import keras
import numpy as np
import pytest
import yaml

from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.network import (
    CompiledModel,
    WeightsError,
    build_network,
    has_opponent_policy,
    has_ownership,
    model_variables,
    save_weights_file,
    variable_array,
    weights_from_bytes,
    weights_have_opponent_policy,
    weights_to_bytes,
)
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.learner.learner import Learner
from tengen.learner.replay import ReplayWindow, reply_follows
from tengen.learner.trainer import Trainer
from tengen.run.checkpoint import load_model, load_player
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import ConfigError, parse_config
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.sample_stream import LocalSampleStream

TTT = make_game("tictactoe")
GO5 = make_game("go", size=5)


def tiny(game=TTT, *, opponent_policy: bool, ownership: bool = False):
    return build_network(input_shape=game.planes_shape, num_actions=game.num_actions, blocks=1, filters=8,
                         ownership=ownership, opponent_policy=opponent_policy)


def planes(batch: int, game=TTT, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, (batch, *game.planes_shape)).astype(np.float32)


def numpy(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


# -- the target: the next position's policy, read from the replay window --------------------------


def test_reply_follows_reads_which_positions_the_next_one_answers():
    # Seven moves; the searches at plies 1 and 5 were cheap, so the recorded positions
    # are plies 0, 2, 3, 4 and 6. Ply 3 answers ply 2 and ply 4 answers ply 3; ply 0's
    # reply (ply 1) and ply 4's (ply 5) were not recorded, and ply 6 is the last.
    full = np.array([1, 0, 1, 1, 1, 0, 1], bool)
    assert reply_follows(full, 5).tolist() == [False, True, True, False, False]
    # before playout caps were recorded every move's search was: all but the last
    assert reply_follows(None, 4).tolist() == [True, True, True, False]
    assert reply_follows(None, 0).tolist() == []
    with pytest.raises(ValueError, match="5 full searches for 4 recorded positions"):
        reply_follows(full, 4)


def one_hot_positions(first: int, count: int):
    """Positions numbered ``first..``: planes and value carry the number, and the policy
    target is all on the action of that number, so that a reply names its position."""
    ids = np.arange(first, first + count)
    return (ids.reshape(count, 1, 1, 1).astype(np.float32), np.eye(8, dtype=np.float32)[ids],
            ids.astype(np.float32))


def test_the_window_serves_the_next_positions_policy_across_its_wrap():
    window = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=8, opponent_policy=True)
    # Game A, positions 0 1 2: position 1's reply had a cheap search (not recorded).
    window.add(*one_hot_positions(0, 3), follows=np.array([True, False, False]))
    # Game B, positions 3 4 5 6, every search full. The ring now holds
    #   slot:      0  1  2  3  4
    #   position:  5  6  2  3  4      (0 and 1 overwritten)
    window.add(*one_hot_positions(3, 4))
    assert window.value.tolist() == [5, 6, 2, 3, 4]
    assert window.has_reply.tolist() == [True, False, False, True, True]
    # position -> its reply: 4's is in slot 0, past the ring's end; 6's next slot holds
    # game A's 2, which is no reply to it; 2 is its game's last
    expected = {2: None, 3: 4, 4: 5, 5: 6, 6: None}

    batch = window.sample(200, np.random.default_rng(0))
    assert set(batch.value.tolist()) == set(expected)
    for position, reply, has in zip(batch.value, batch.opponent_policy, batch.has_opponent_policy, strict=True):
        if expected[int(position)] is None:
            assert has == 0 and not reply.any()
        else:
            assert has == 1 and reply.tolist() == np.eye(8)[expected[int(position)]].tolist()


def test_a_window_without_the_head_serves_no_replies_and_follows_is_checked():
    window = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=8)
    window.add(*one_hot_positions(0, 3))
    batch = window.sample(4, np.random.default_rng(0))
    assert batch.opponent_policy is None and batch.has_opponent_policy is None
    with pytest.raises(ValueError, match="follows must be"):
        window.add(*one_hot_positions(0, 3), follows=np.array([True, False]))
    with pytest.raises(ValueError, match="last position has no reply"):
        window.add(*one_hot_positions(0, 2), follows=np.array([True, True]))


def test_a_game_longer_than_the_window_keeps_its_tails_replies():
    window = ReplayWindow(capacity=3, planes_shape=(1, 1, 1), num_actions=8, opponent_policy=True)
    window.add(*one_hot_positions(0, 5), follows=np.array([True, True, False, True, False]))
    assert window.value.tolist() == [2, 3, 4] and window.has_reply.tolist() == [False, True, False]


def test_the_reply_gets_the_same_symmetry_as_the_planes_and_the_policy():
    rng = np.random.default_rng(5)
    # every action a different probability, so that the symmetry a sample got can be read off its policy
    policy = np.stack([rng.permutation(9) + 1.0 for _ in range(2)]).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    game_planes = planes(2, seed=5)
    window = ReplayWindow(capacity=10, planes_shape=TTT.planes_shape, num_actions=9, opponent_policy=True)
    window.add(game_planes, policy, np.array([1.0, -1.0], np.float32))

    batch = window.sample(64, rng, game=TTT)
    seen = set()
    for row in np.flatnonzero(batch.has_opponent_policy):  # the first position's samples
        [k] = [k for k in range(len(TTT.symmetries))
               if np.allclose(TTT.transform_policy(policy[:1], k)[0], batch.policy[row])]
        seen.add(k)
        np.testing.assert_array_equal(batch.planes[row], TTT.transform_planes(game_planes[:1], k)[0])
        np.testing.assert_allclose(batch.opponent_policy[row], TTT.transform_policy(policy[1:], k)[0])
    assert len(seen) > 1  # more than the identity was checked


# -- the head -----------------------------------------------------------------------------------------


def test_the_head_is_one_more_output_shaped_like_the_policy():
    with_head, plain = tiny(opponent_policy=True), tiny(opponent_policy=False)
    assert has_opponent_policy(with_head) and not has_opponent_policy(plain)
    assert list(with_head.output_shape) == [(None, 9), (None,), (None, 9)]
    both = tiny(GO5, opponent_policy=True, ownership=True)
    assert has_ownership(both) and has_opponent_policy(both)
    assert list(both.output_shape) == [(None, 26), (None,), (None, 25), (None, 26)]
    # the head is one dense layer on the policy head's features: nothing else is added
    extra = set(model_variables(with_head)) - set(model_variables(plain))
    assert extra == {"opponent_policy_logits/kernel", "opponent_policy_logits/bias"}


def copy_shared_weights(source, target):
    variables = model_variables(target)
    for path, v in model_variables(source).items():
        if path in variables:
            variables[path].assign(variable_array(v))


def test_the_search_sees_the_same_network_with_or_without_the_head():
    with_head, plain = tiny(opponent_policy=True), tiny(opponent_policy=False)
    copy_shared_weights(with_head, plain)
    x = planes(5, seed=2)
    policy, value = CompiledModel(with_head, buckets=(1, 8))(x)
    np.testing.assert_array_equal(policy, CompiledModel(plain, buckets=(1, 8))(x)[0])
    np.testing.assert_array_equal(value, CompiledModel(plain, buckets=(1, 8))(x)[1])
    # and the ownership call of a net with both heads is still the ownership head's
    both = tiny(GO5, opponent_policy=True, ownership=True)
    owners = CompiledModel(both, buckets=(1, 8)).ownership(planes(3, GO5))
    np.testing.assert_allclose(owners, numpy(both(planes(3, GO5), training=False)[2]), atol=1e-5)


# -- weights with and without the head --------------------------------------------------------------


def test_old_weights_load_as_before_and_say_they_have_no_head():
    old = weights_to_bytes(tiny(opponent_policy=False), metadata={"version": 3})
    assert not weights_have_opponent_policy(old)
    weights_from_bytes(tiny(opponent_policy=False), old)
    with pytest.raises(WeightsError, match="no opponent-policy head .* network.opponent_policy false"):
        weights_from_bytes(tiny(opponent_policy=True), old)
    new = weights_to_bytes(tiny(opponent_policy=True), metadata={})
    assert weights_have_opponent_policy(new)
    with pytest.raises(WeightsError, match="has an opponent-policy head that this network lacks"):
        weights_from_bytes(tiny(opponent_policy=False), new)


def test_a_learner_checkpoint_without_the_head_is_refused_clearly():
    old = Trainer(model=tiny(opponent_policy=False), optimizer="adam", learning_rate=0.01).checkpoint_to_bytes()
    with pytest.raises(WeightsError, match="no opponent-policy head"):
        Trainer(model=tiny(opponent_policy=True), optimizer="adam", learning_rate=0.01).restore_from_bytes(old)


TTT_CONFIG = {"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8, "opponent_policy": True},
              "mcts": {"simulations": 8}}


@pytest.mark.parametrize("head", [False, True])
def test_a_model_file_loads_and_plays_whether_it_has_the_head_or_not(tmp_path, head):
    # the config asks for the head; the weights decide, and the config returned says which
    config_file = tmp_path / "ttt.yaml"
    config_file.write_text(yaml.safe_dump(TTT_CONFIG))
    save_weights_file(tiny(opponent_policy=head), tmp_path / "model.safetensors", metadata={})
    config, _, model = load_model(tmp_path / "model.safetensors", parse_config(TTT_CONFIG))
    assert config.network.opponent_policy == head == has_opponent_policy(model)
    config, game, player = load_player(str(tmp_path / "model.safetensors"), str(config_file), 8)
    state = game.initial_state()
    assert game.legal_mask(state)[player(game, state, [])]


# -- the loss ---------------------------------------------------------------------------------------------


def batch_of(n: int, seed: int):
    rng = np.random.default_rng(seed)
    policy = rng.dirichlet(np.ones(9), n).astype(np.float32)
    reply = np.eye(9, dtype=np.float32)[rng.integers(0, 9, n)]
    value = rng.choice([-1.0, 1.0], n).astype(np.float32)
    return planes(n, seed=seed), policy, value, reply


def test_the_opponent_loss_is_the_masked_cross_entropy_times_its_weight():
    model = tiny(opponent_policy=True)
    trainer = Trainer(model=model, optimizer="sgd", learning_rate=0.01, opponent_policy_weight=0.15)
    x, policy, value, reply = batch_of(6, seed=1)
    has = np.array([1, 0, 1, 1, 0, 0], np.float32)
    logits = numpy(model(x, training=True)[2])  # what the step sees (batch-norm stats alike)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    by_hand = -(reply * log_softmax).sum(axis=1)[has == 1].mean()

    losses = trainer.train_step(x, policy, value, opponent_policy=reply, has_opponent_policy=has)
    assert losses["opponent_policy_loss"] == pytest.approx(by_hand, rel=1e-4)
    parts = losses["policy_loss"] + losses["value_loss"] + 0.15 * losses["opponent_policy_loss"] + losses["l2"]
    assert losses["loss"] == pytest.approx(parts, rel=1e-5)
    # no reply at all costs nothing
    assert trainer.train_step(x, policy, value)["opponent_policy_loss"] == 0.0
    with pytest.raises(ValueError, match="opponent_policy and has_opponent_policy go together"):
        trainer.train_step(x, policy, value, opponent_policy=reply)
    plain = Trainer(model=tiny(opponent_policy=False), optimizer="sgd", learning_rate=0.01)
    assert "opponent_policy_loss" not in plain.train_step(x, policy, value)
    with pytest.raises(ValueError, match="without the opponent-policy head"):
        plain.train_step(x, policy, value, opponent_policy=reply, has_opponent_policy=has)


def test_with_weight_zero_the_head_changes_nothing_else():
    with_head, plain = tiny(opponent_policy=True), tiny(opponent_policy=False)
    copy_shared_weights(with_head, plain)
    trainers = [Trainer(model=m, optimizer="sgd", learning_rate=0.05, opponent_policy_weight=0.0)
                for m in (with_head, plain)]
    x, policy, value, reply = batch_of(8, seed=2)
    for _ in range(3):
        headed = trainers[0].train_step(x, policy, value, opponent_policy=reply, has_opponent_policy=np.ones(8))
        alone = trainers[1].train_step(x, policy, value)
        assert headed["opponent_policy_loss"] > 0
        for part in ("policy_loss", "value_loss"):
            assert headed[part] == pytest.approx(alone[part], rel=1e-5)
        # the total leaves the head's loss out (its kernel's L2 is the only difference)
        assert headed["loss"] == pytest.approx(headed["policy_loss"] + headed["value_loss"] + headed["l2"], rel=1e-6)


def test_a_tiny_net_learns_the_replies_of_a_fixed_batch():
    model = tiny(opponent_policy=True)
    trainer = Trainer(model=model, optimizer="adam", learning_rate=0.01)
    x, policy, value, reply = batch_of(16, seed=3)
    has = np.ones(16, np.float32)
    logits = numpy(model(x, training=True)[2])
    # the start is wherever the random initial weights put it (near ln 9 = 2.2, but not always)
    at_start = -(reply * (logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)))).sum(axis=1).mean()
    losses = [trainer.train_step(x, policy, value, opponent_policy=reply, has_opponent_policy=has)
              ["opponent_policy_loss"] for _ in range(80)]
    assert losses[0] == pytest.approx(at_start, rel=1e-4)
    assert losses[-1] < 0.5 * losses[0]


# -- the config and the learner ---------------------------------------------------------------------


def test_the_head_is_off_by_default_and_its_weight_is_katagos():
    config = parse_config({"game": {"name": "connect4"}})
    assert not config.network.opponent_policy and not config.network_spec().opponent_policy
    assert config.train.opponent_policy_weight == config.learner_options().opponent_policy_weight == 0.15
    on = parse_config({**TTT_CONFIG, "train": {"opponent_policy_weight": 0.5}})  # any game
    assert on.network_spec().opponent_policy and on.learner_options().opponent_policy_weight == 0.5
    for weight in (-0.1, 11):
        with pytest.raises(ConfigError, match="opponent_policy_weight"):
            parse_config({**TTT_CONFIG, "train": {"opponent_policy_weight": weight}})


def test_the_memory_estimate_counts_the_replies_mask():
    config = parse_config({**TTT_CONFIG, "train": {"replay_window": 300, "min_positions": 10}})
    window = ReplayWindow(capacity=300, planes_shape=TTT.planes_shape, num_actions=9, opponent_policy=True)
    stored = (window.planes, window.policy, window.value, window.has_reply)
    assert config.memory_estimates()["replay"] == sum(a.nbytes for a in stored)


def test_the_learner_marks_replies_from_each_records_searches_and_trains_the_head(tmp_path):
    # playout caps: about half the searches cheap, so some recorded positions have no reply
    settings = SelfPlaySettings(search=SearchSettings(simulations=8), full_search_fraction=0.5, cheap_simulations=2)
    records = SelfPlay(TTT, games=8, seed=1, settings=settings).play(uniform_evaluator(9), games=12)
    stream = LocalSampleStream(maxlen=100)
    stream.add_many([encode_game(r, worker_id="w0") for r in records])
    config = parse_config({**TTT_CONFIG, "train": {"batch_size": 8, "min_positions": 8, "candidate_every": 1000}})
    learner = Learner(game=TTT, network=config.network_spec(), options=config.learner_options(), source=stream,
                      registry=LocalModelRegistry("opp"), decode=game_decoder(TTT), storage=tmp_path, seed=0)
    expected = np.concatenate([reply_follows(r.full_search, len(r.value)) for r in records])
    assert learner.window.has_reply[: len(expected)].tolist() == expected.tolist()
    assert 0 < expected.sum() < len(expected) - len(records)  # some replies, and some cheap ones among them
    stats = learner.step(seconds=120, wait_for_data=False, until_step=2)  # returns at step 2
    assert stats["step"] == 2 and stats["losses"]["opponent_policy_loss"] > 0
