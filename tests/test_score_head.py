"""KataGo's score head: the final score difference from the mover's view as a mean and
a spread (scoreMean, scoreStdev), trained on the games played to the end with a small
weight. Its target, its outputs, its loss, weights with and without it, the config
and the learner's wiring (tiny Go 5x5 nets)."""

import dataclasses
import math

import keras
import numpy as np
import pytest
import yaml

from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.network import (
    CompiledModel,
    ScoreBelief,
    WeightsError,
    build_network,
    has_ownership,
    has_score,
    model_variables,
    save_weights_file,
    score_scale,
    variable_array,
    weights_from_bytes,
    weights_have_score,
    weights_to_bytes,
)
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.learner.learner import Learner
from tengen.learner.replay import ReplayWindow, mover_ownership, mover_score
from tengen.learner.trainer import Trainer, score_nll
from tengen.run.checkpoint import load_model, load_player
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import ConfigError, parse_config
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.sample_stream import LocalSampleStream

GO5 = make_game("go", size=5)  # komi 7.5


def tiny(*, score: bool, ownership: bool = False):
    return build_network(input_shape=GO5.planes_shape, num_actions=GO5.num_actions, blocks=1, filters=8,
                         ownership=ownership, score=score)


def planes(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, (batch, *GO5.planes_shape)).astype(np.float32)


def numpy(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


def board(text: str) -> np.ndarray:
    """An ASCII board, top row first: X black, O white, . empty."""
    rows = [line.split() for line in text.strip().splitlines()]
    return np.array([[{".": 0, "X": 1, "O": 2}[c] for c in row] for row in rows], np.int8)


# -- the target: the final score from each mover's view ----------------------------------------------


def test_the_score_target_is_the_movers_area_lead_with_komi_by_hand():
    final = GO5.state_from_board(board("""
        . X . O .
        X X O O .
        . X O . O
        X X O O O
        . X O . .
    """))
    # Black's area: 10 points (its stones and the empty points left of them); White's:
    # 14; (0, 2) is dame. Black leads by 10 - 14 = -4 before komi, -4 - 7.5 = -11.5 after:
    # White wins by 11.5.
    owners = GO5.final_ownership(final)
    assert GO5.score(final) == -11.5
    # positions with Black, White, Black to move
    state, history, game_planes = GO5.initial_state(), [], []
    for move in ("C3", "D4", "B2"):
        game_planes.append(GO5.encode(state, history))
        history.append(state.copy())
        GO5.play(state, GO5.text_to_action(move))
    scores = mover_score(np.stack(game_planes), owners, GO5.komi)
    assert scores.dtype == np.float32 and scores.tolist() == [-11.5, 11.5, -11.5]
    # the same as the sum of each mover's ownership row, komi taken from Black's side
    rows = mover_ownership(np.stack(game_planes), owners).sum(axis=1)
    assert rows.tolist() == [-4, 4, -4]
    # a komi of -4.5 (Black gets it) turns the game Black's by 0.5
    assert mover_score(np.stack(game_planes), owners, -4.5).tolist() == [0.5, -0.5, 0.5]


def positions(first: int, count: int):
    """``count`` one-point positions numbered from ``first``: the value carries the number."""
    ids = np.arange(first, first + count)
    return np.zeros((count, 1, 1, 1), np.float32), np.ones((count, 2), np.float32) / 2, ids.astype(np.float32)


def test_the_window_keeps_scores_for_finished_games_and_masks_resigned_ones():
    window = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=2, score=True)
    window.add(*positions(0, 2), score=np.array([3.5, -3.5]))  # played to the end
    window.add(*positions(2, 2))  # resigned: no score
    window.add(*positions(4, 2), score=np.array([-0.5, 0.5]))  # wraps: slot 0 now holds position 5
    assert window.value.tolist() == [5, 1, 2, 3, 4]
    assert window.score.tolist() == [0.5, -3.5, 0, 0, -0.5]
    assert window.has_score.tolist() == [True, True, False, False, True]
    batch = window.sample(100, np.random.default_rng(0))
    expected = {1: (-3.5, 1), 2: (0, 0), 3: (0, 0), 4: (-0.5, 1), 5: (0.5, 1)}
    for position, score, has in zip(batch.value, batch.score, batch.has_score, strict=True):
        assert (score, has) == expected[int(position)]
    assert batch.ownership is None  # the score needs no ownership kept


def test_the_window_refuses_scores_it_cannot_keep():
    plain = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=2)
    with pytest.raises(ValueError, match="keeps no score"):
        plain.add(*positions(0, 2), score=np.zeros(2))
    plain.add(*positions(0, 2))
    assert plain.sample(1, np.random.default_rng(0)).score is None
    window = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=2, score=True)
    with pytest.raises(ValueError, match=r"score must be \[2\]"):
        window.add(*positions(0, 2), score=np.zeros(3))


# -- the head -----------------------------------------------------------------------------------------


def test_the_head_is_one_more_output_a_mean_and_a_spread_in_points():
    with_head, plain = tiny(score=True), tiny(score=False)
    assert has_score(with_head) and not has_score(plain)
    assert list(with_head.output_shape) == [(None, 26), (None,), (None, 2)]
    both = tiny(score=True, ownership=True)
    assert has_ownership(both) and has_score(both)
    assert list(both.output_shape) == [(None, 26), (None,), (None, 25), (None, 2)]
    belief = numpy(with_head(planes(4), training=False)[2])
    assert belief.shape == (4, 2) and np.all(belief[:, 1] >= 0.5)  # the spread is at least half a point
    # every layer added is the head's, named so
    extra = set(model_variables(with_head)) - set(model_variables(plain))
    assert extra and all(path.startswith("score_") for path in extra)


def test_the_belief_layer_scales_its_raw_outputs_to_points_by_hand():
    assert score_scale(5, 5) == 6.25 and score_scale(9, 9) == 20.25
    belief = numpy(ScoreBelief(20.25)(np.array([[1.0, 0.0], [-0.5, 2.0]], np.float32)))
    # mean: 20.25 * raw; spread: 20.25 * softplus(raw) + 0.5, softplus(0) = ln 2
    np.testing.assert_allclose(belief[:, 0], [20.25, -10.125], rtol=1e-6)
    np.testing.assert_allclose(belief[:, 1], [20.25 * math.log(2) + 0.5, 20.25 * math.log1p(math.exp(2)) + 0.5],
                               rtol=1e-5)


def copy_shared_weights(source, target):
    variables = model_variables(target)
    for path, v in model_variables(source).items():
        if path in variables:
            variables[path].assign(variable_array(v))


def test_the_compiled_model_answers_the_score_apart_and_the_search_call_is_unchanged():
    both, plain = tiny(score=True, ownership=True), tiny(score=False)
    copy_shared_weights(both, plain)
    x = planes(5, seed=2)
    compiled = CompiledModel(both, buckets=(1, 8))
    policy, value = compiled(x)
    np.testing.assert_array_equal(policy, CompiledModel(plain, buckets=(1, 8))(x)[0])
    np.testing.assert_array_equal(value, CompiledModel(plain, buckets=(1, 8))(x)[1])
    outputs = both(x, training=False)
    np.testing.assert_allclose(compiled.score(x), numpy(outputs[3]), atol=1e-4)
    np.testing.assert_allclose(compiled.ownership(x), numpy(outputs[2]), atol=1e-5)
    with pytest.raises(ValueError, match="no score head"):
        CompiledModel(plain).score(x)


# -- weights with and without the head --------------------------------------------------------------


def test_a_blob_says_whether_it_holds_the_head_and_loads_only_into_a_network_alike():
    old = weights_to_bytes(tiny(score=False), metadata={"version": 3})
    assert not weights_have_score(old)
    weights_from_bytes(tiny(score=False), old)
    with pytest.raises(WeightsError, match="no score head .* network.score false"):
        weights_from_bytes(tiny(score=True), old)
    source = tiny(score=True)
    new = weights_to_bytes(source, metadata={})
    assert weights_have_score(new)
    with pytest.raises(WeightsError, match="has an score head that this network lacks"):
        weights_from_bytes(tiny(score=False), new)
    # the round trip keeps the head's weights, so it answers the same
    target = tiny(score=True)
    weights_from_bytes(target, new)
    x = planes(3, seed=4)
    np.testing.assert_allclose(numpy(target(x, training=False)[2]), numpy(source(x, training=False)[2]), atol=1e-6)


def test_a_learner_checkpoint_without_the_head_is_refused_clearly():
    old = Trainer(model=tiny(score=False), optimizer="adam", learning_rate=0.01).checkpoint_to_bytes()
    with pytest.raises(WeightsError, match="no score head"):
        Trainer(model=tiny(score=True), optimizer="adam", learning_rate=0.01).restore_from_bytes(old)


GO5_CONFIG = {"game": {"name": "go", "size": 5}, "network": {"blocks": 1, "filters": 8, "score": True},
              "mcts": {"simulations": 8}}


@pytest.mark.parametrize("head", [False, True])
def test_a_model_file_loads_and_plays_whether_it_has_the_head_or_not(tmp_path, head):
    # the config asks for the head; the weights decide, and the config returned says which
    config_file = tmp_path / "go5.yaml"
    config_file.write_text(yaml.safe_dump(GO5_CONFIG))
    save_weights_file(tiny(score=head), tmp_path / "model.safetensors", metadata={})
    config, _, model = load_model(tmp_path / "model.safetensors", parse_config(GO5_CONFIG))
    assert config.network.score == head == has_score(model)
    config, game, player = load_player(str(tmp_path / "model.safetensors"), str(config_file), 8)
    state = game.initial_state()
    assert game.legal_mask(state)[player(game, state, [])]


# -- the loss ---------------------------------------------------------------------------------------------


def test_the_likelihood_by_hand():
    nll = numpy(score_nll(np.array([3.0, 5.0, 5.0, 5.0]), np.array([3.0, 3.0, 3.0, 3.0]),
                          np.array([1.0, 2.0, 1.0, 4.0])))
    # exact mean, spread 1: 0; a miss of 2 with a spread of 2: 1/2 + ln 2
    np.testing.assert_allclose(nll, [0.0, 0.5 + math.log(2), 2.0, 0.125 + math.log(4)], rtol=1e-6)
    # for a miss of 2 the spread of 2 is the likeliest
    assert nll[1] < nll[2] and nll[1] < nll[3]


def batch_of(n: int, seed: int):
    rng = np.random.default_rng(seed)
    policy = rng.dirichlet(np.ones(GO5.num_actions), n).astype(np.float32)
    value = rng.choice([-1.0, 1.0], n).astype(np.float32)
    score = (rng.integers(-8, 9, n) + 0.5).astype(np.float32)
    return planes(n, seed=seed), policy, value, score


def test_the_score_loss_is_the_masked_likelihood_times_its_weight():
    model = tiny(score=True)
    trainer = Trainer(model=model, optimizer="sgd", learning_rate=0.01, score_weight=0.02)
    x, policy, value, score = batch_of(6, seed=1)
    has = np.array([1, 0, 1, 1, 0, 0], np.float32)
    # the resigned rows' targets are never read: wild ones change nothing
    score[has == 0] = 1000.0
    belief = numpy(model(x, training=True)[2])  # what the step sees (batch-norm stats alike)
    mean, stdev = belief[:, 0], belief[:, 1]
    by_hand = ((score - mean) ** 2 / (2 * stdev**2) + np.log(stdev))[has == 1].mean()

    losses = trainer.train_step(x, policy, value, score=score, has_score=has)
    assert losses["score_loss"] == pytest.approx(by_hand, rel=1e-4)
    parts = losses["policy_loss"] + losses["value_loss"] + 0.02 * losses["score_loss"] + losses["l2"]
    assert losses["loss"] == pytest.approx(parts, rel=1e-5)
    # no game played to the end: no score loss
    assert trainer.train_step(x, policy, value, score=score, has_score=np.zeros(6))["score_loss"] == 0.0
    assert trainer.train_step(x, policy, value)["score_loss"] == 0.0
    with pytest.raises(ValueError, match="score and has_score go together"):
        trainer.train_step(x, policy, value, score=score)
    plain = Trainer(model=tiny(score=False), optimizer="sgd", learning_rate=0.01)
    assert "score_loss" not in plain.train_step(x, policy, value)
    with pytest.raises(ValueError, match="without the score head"):
        plain.train_step(x, policy, value, score=score, has_score=has)


def test_a_tiny_net_learns_the_scores_of_a_fixed_batch():
    model = tiny(score=True)
    trainer = Trainer(model=model, optimizer="adam", learning_rate=0.01, score_weight=1.0)
    x, policy, value, score = batch_of(16, seed=3)
    has = np.ones(16, np.float32)
    # as the training step sees them (batch statistics: the moving ones lag behind)
    first = numpy(model(x, training=True)[2])
    losses = [trainer.train_step(x, policy, value, score=score, has_score=has)["score_loss"] for _ in range(100)]
    belief = numpy(model(x, training=True)[2])
    # the likelihood rises (the median of the last steps: a spread near its half-point
    # floor makes single steps jumpy) and the means move toward the targets
    assert np.median(losses[-10:]) < losses[0] - 0.25
    assert np.abs(belief[:, 0] - score).mean() < np.abs(first[:, 0] - score).mean()


# -- the config and the learner ---------------------------------------------------------------------


def test_the_head_is_off_by_default_for_go_only_and_its_weight_is_katagos():
    config = parse_config({"game": {"name": "go", "size": 9}})
    assert not config.network.score and not config.network_spec().score
    assert config.train.score_weight == config.learner_options().score_weight == 0.02
    on = parse_config({**GO5_CONFIG, "train": {"score_weight": 0.5}})
    assert on.network_spec().score and on.learner_options().score_weight == 0.5
    with pytest.raises(ConfigError, match="network.score applies to go only"):
        parse_config({"game": {"name": "connect4"}, "network": {"score": True}})
    for weight in (-0.1, 11):
        with pytest.raises(ConfigError, match="score_weight"):
            parse_config({**GO5_CONFIG, "train": {"score_weight": weight}})


def test_the_memory_estimate_counts_the_scores_and_their_mask():
    config = parse_config({**GO5_CONFIG, "train": {"replay_window": 300, "min_positions": 10}})
    window = ReplayWindow(capacity=300, planes_shape=GO5.planes_shape, num_actions=GO5.num_actions, score=True)
    stored = (window.planes, window.policy, window.value, window.score, window.has_score)
    assert config.memory_estimates()["replay"] == sum(a.nbytes for a in stored)


def test_the_learner_derives_each_finished_games_score_and_trains_the_head(tmp_path):
    config = parse_config({**GO5_CONFIG, "game": {"name": "go", "size": 5, "max_moves": 30},
                           "train": {"batch_size": 8, "min_positions": 8, "candidate_every": 1000}})
    game = config.game.make()
    selfplay = SelfPlay(game, games=4, seed=5,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=8, leaves_per_round=4)))
    records = selfplay.play(uniform_evaluator(game.num_actions), games=4)
    # one game resigned: it has no final ownership, so no score
    records[1] = dataclasses.replace(records[1], ownership=None)
    stream = LocalSampleStream(maxlen=100)
    stream.add_many([encode_game(r, worker_id="w0") for r in records])
    learner = Learner(game=game, network=config.network_spec(), options=config.learner_options(), source=stream,
                      registry=LocalModelRegistry("score"), decode=game_decoder(game), storage=tmp_path, seed=0)
    expected = np.concatenate([mover_score(r.planes, r.ownership, 7.5) if r.ownership is not None
                               else np.zeros(len(r.value), np.float32) for r in records])
    has = np.concatenate([np.full(len(r.value), r.ownership is not None) for r in records])
    n = len(expected)
    assert learner.window.score[:n].tolist() == expected.tolist()
    assert learner.window.has_score[:n].tolist() == has.tolist() and 0 < has.sum() < n
    # a finished game's mover wins where its score is positive: the value target's sign
    for r in records:
        if r.ownership is not None:
            assert np.sign(mover_score(r.planes, r.ownership, 7.5)).tolist() == np.sign(r.value).tolist()
    stats = learner.step(seconds=120, wait_for_data=False, until_step=2)  # returns at step 2
    assert stats["step"] == 2 and stats["losses"]["score_loss"] != 0
