"""The replay window and the trainer (tiny nets, a few steps)."""

import keras
import numpy as np
import pytest

from tengen.engine.games import make_game
from tengen.engine.network import WeightsError, build_network, weights_to_bytes
from tengen.learner.replay import ReplayWindow
from tengen.learner.trainer import StepSchedule, Trainer

# -- replay window -------------------------------------------------------------------------


def numbered_positions(first, count, *, num_actions=2):
    """Positions whose planes, policy and value all carry their number, to follow them."""
    ids = np.arange(first, first + count)
    planes = ids.reshape(count, 1, 1, 1).astype(np.float32)
    policy = np.repeat(ids[:, None], num_actions, axis=1).astype(np.float32)
    return planes, policy, ids.astype(np.float32)


def test_window_wraps_and_keeps_the_last_positions_in_order():
    window = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=2)
    window.add(*numbered_positions(0, 3))  # slots: 0 1 2 . .
    window.add(*numbered_positions(3, 4))  # slots: 5 6 2 3 4 (positions 0, 1 overwritten)

    planes, policy, value = window.contents()
    assert len(window) == 5 and window.positions_added == 7
    assert value.tolist() == [2, 3, 4, 5, 6]
    assert planes.reshape(-1).tolist() == [2, 3, 4, 5, 6]
    assert policy[:, 0].tolist() == [2, 3, 4, 5, 6]
    assert window.value.tolist() == [5, 6, 2, 3, 4]  # the ring itself


def test_a_game_longer_than_the_window_keeps_its_tail():
    window = ReplayWindow(capacity=5, planes_shape=(1, 1, 1), num_actions=2)
    window.add(*numbered_positions(0, 2))
    window.add(*numbered_positions(2, 8))
    assert window.contents()[2].tolist() == [5, 6, 7, 8, 9]
    assert window.positions_added == 10


def test_sample_shapes_dtypes_and_reuse():
    window = ReplayWindow(capacity=100, planes_shape=(6, 7, 3), num_actions=7)
    rng = np.random.default_rng(0)
    window.add(
        rng.integers(0, 2, (10, 6, 7, 3)).astype(np.float32),
        rng.dirichlet(np.ones(7), 10).astype(np.float32),
        rng.choice([-1.0, 1.0], 10).astype(np.float32),
    )
    assert window.planes.dtype == np.uint8

    batch = window.sample(4, rng)
    planes, policy, value = batch.planes, batch.policy, batch.value
    assert batch.ownership is None and batch.has_ownership is None  # a window that keeps none
    assert planes.shape == (4, 6, 7, 3) and planes.dtype == np.float32
    assert policy.shape == (4, 7) and policy.dtype == np.float32
    assert value.shape == (4,) and value.dtype == np.float32

    window.sample(4, rng)
    assert window.samples_drawn == 8
    assert window.reuse == pytest.approx(8 / 10)


def test_only_stored_positions_are_sampled():
    window = ReplayWindow(capacity=50, planes_shape=(1, 1, 1), num_actions=2)
    window.add(*numbered_positions(0, 3))  # 47 slots still empty
    value = window.sample(100, np.random.default_rng(1)).value
    assert set(value.tolist()) == {0, 1, 2}


def test_bad_input_is_refused():
    window = ReplayWindow(capacity=5, planes_shape=(3, 3, 3), num_actions=9)
    with pytest.raises(ValueError, match="empty"):
        window.sample(1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="planes must be"):
        window.add(np.zeros((2, 3, 3, 2)), np.zeros((2, 9)), np.zeros(2))
    with pytest.raises(ValueError, match="policy must be"):
        window.add(np.zeros((2, 3, 3, 3)), np.zeros((2, 7)), np.zeros(2))
    with pytest.raises(ValueError, match="value must be"):
        window.add(np.zeros((2, 3, 3, 3)), np.zeros((2, 9)), np.zeros(3))
    with pytest.raises(ValueError, match="0..255"):
        window.add(np.full((2, 3, 3, 3), 0.5), np.zeros((2, 9)), np.zeros(2))
    assert window.positions_added == 0


def test_each_sample_gets_one_symmetry_of_the_stored_position():
    game = make_game("tictactoe")
    # X in the corner and O beside it: no symmetry maps this position onto itself,
    # and the policy 0..8 is different under each of the 8 symmetries too
    state = game.initial_state()
    game.play(state, 0)
    game.play(state, 1)
    stored_planes = game.encode(state)
    stored_policy = np.arange(9, dtype=np.float32) / 36
    images = [game.transform_planes(stored_planes, k) for k in range(8)]
    assert len({image.tobytes() for image in images}) == 8

    window = ReplayWindow(capacity=4, planes_shape=game.planes_shape, num_actions=9)
    window.add(stored_planes[None], stored_policy[None], np.array([1.0], np.float32))
    batch = window.sample(200, np.random.default_rng(3), game=game)
    planes, policy, value = batch.planes, batch.policy, batch.value

    seen = set()
    for sample_planes, sample_policy in zip(planes, policy, strict=True):
        (k,) = [k for k in range(8) if np.array_equal(images[k], sample_planes)]
        np.testing.assert_array_equal(sample_policy, game.transform_policy(stored_policy, k))
        seen.add(k)
    assert seen == set(range(8))
    assert np.all(value == 1.0)


# -- trainer -------------------------------------------------------------------------------


def tiny_net(game):
    return build_network(input_shape=game.planes_shape, num_actions=game.num_actions, blocks=1, filters=8)


def fixed_batch(game, batch, seed):
    rng = np.random.default_rng(seed)
    planes = rng.integers(0, 2, (batch, *game.planes_shape)).astype(np.float32)
    # one-hot targets, so that a net that memorises them drives the cross-entropy to 0
    policy = np.eye(game.num_actions, dtype=np.float32)[rng.integers(0, game.num_actions, batch)]
    value = rng.choice([-1.0, 1.0], batch).astype(np.float32)
    return planes, policy, value


@pytest.fixture(scope="module")
def connect4():
    return make_game("connect4")


@pytest.mark.slow
def test_a_tiny_net_overfits_a_fixed_batch(connect4):
    trainer = Trainer(model=tiny_net(connect4), optimizer="adam", learning_rate=1e-2)
    batch = fixed_batch(connect4, 16, seed=0)

    losses = [trainer.train_step(*batch) for _ in range(30)]

    assert set(losses[0]) >= {"loss", "policy_loss", "value_loss", "l2"}
    assert losses[0]["l2"] > 0
    assert losses[-1]["loss"] < 0.5 * losses[0]["loss"]
    assert losses[-1]["policy_loss"] < losses[0]["policy_loss"]
    assert losses[-1]["value_loss"] < losses[0]["value_loss"]
    assert trainer.step == 30


@pytest.mark.slow
def test_a_mixed_precision_net_learns_and_keeps_float32_weights(connect4):
    # float16 with loss scaling on TensorFlow, bfloat16 on JAX and PyTorch (what a GPU
    # learner runs): the variables, and so the checkpoint's bytes, stay float32
    model = build_network(input_shape=connect4.planes_shape, num_actions=connect4.num_actions, blocks=1, filters=8,
                          mixed_precision=True)
    trainer = Trainer(model=model, optimizer="adam", learning_rate=1e-2)
    batch = fixed_batch(connect4, 16, seed=0)

    losses = [trainer.train_step(*batch) for _ in range(30)]

    assert all(np.isfinite(step["loss"]) for step in losses)
    assert losses[-1]["loss"] < 0.5 * losses[0]["loss"]
    assert {variable.dtype for variable in model.trainable_variables} == {"float32"}


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() == "jax", reason="jax.jit compiles per batch size (the learner's is fixed)")
def test_train_step_traces_once_for_any_batch_size(connect4):
    trainer = Trainer(model=tiny_net(connect4), learning_rate=0.01)
    for batch in (8, 16, 3):
        trainer.train_step(*fixed_batch(connect4, batch, seed=batch))
    assert trainer.trace_count == (0 if keras.backend.backend() == "torch" else 1)  # PyTorch: eager


@pytest.mark.slow
def test_the_xla_step_trains_as_the_plain_step_does(connect4):
    """XLA (the default) is only a faster way to run the same step: from the same
    weights on the same batches, both trainers report the same losses and end with
    the same weights, to float32 rounding."""
    model = tiny_net(connect4)
    twin = tiny_net(connect4)
    start = model.get_weights()
    twin.set_weights(start)
    xla, plain = Trainer(model=model, learning_rate=0.05), Trainer(model=twin, learning_rate=0.05, jit_compile=False)
    assert xla.jit_compile and not plain.jit_compile
    for seed in range(3):
        batch = fixed_batch(connect4, 16, seed=seed)
        a, b = xla.train_step(*batch), plain.train_step(*batch)
        assert a == pytest.approx(b, rel=1e-4)
    for w_xla, w_plain in zip(model.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_allclose(w_xla, w_plain, rtol=1e-3, atol=1e-5)
    assert not np.allclose(model.get_weights()[0], start[0])  # they did train


@pytest.mark.slow
def test_schedule_switches_at_the_boundary_step(connect4):
    trainer = Trainer(model=tiny_net(connect4), learning_rate=[[0, 0.1], [3, 0.01]])
    batch = fixed_batch(connect4, 4, seed=0)
    used = [trainer.train_step(*batch)["learning_rate"] for _ in range(5)]
    # steps 0, 1, 2 use 0.1; step 3 on uses 0.01
    assert used == pytest.approx([0.1, 0.1, 0.1, 0.01, 0.01])
    assert trainer.learning_rate == pytest.approx(0.01)


def test_a_schedule_must_start_at_zero_and_increase():
    with pytest.raises(ValueError, match="step 0"):
        StepSchedule([[10, 0.1]])
    with pytest.raises(ValueError, match="increase"):
        StepSchedule([[0, 0.1], [5, 0.01], [5, 0.001]])


@pytest.mark.slow
def test_restored_checkpoint_continues_identically(connect4):
    batches = [fixed_batch(connect4, 8, seed=s) for s in range(5)]
    config = {"optimizer": "sgd", "learning_rate": [[0, 0.05], [4, 0.01]]}

    first = Trainer(model=tiny_net(connect4), **config)
    for batch in batches[:3]:
        first.train_step(*batch)
    blob = first.checkpoint_to_bytes({"rng": [1, 2, 3], "stream_id": "1700000000000-5"})
    for batch in batches[3:]:
        first.train_step(*batch)

    # a fresh trainer: its own random initial weights, no momentum yet
    second = Trainer(model=tiny_net(connect4), **config)
    extra = second.restore_from_bytes(blob)
    assert extra == {"rng": [1, 2, 3], "stream_id": "1700000000000-5"}
    assert second.step == 3
    for batch in batches[3:]:
        second.train_step(*batch)

    assert second.step == first.step == 5
    for a, b in zip(first.model.weights, second.model.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.path)


def test_a_checkpoint_must_match_the_optimizer_and_format(connect4):
    sgd = Trainer(model=tiny_net(connect4), optimizer="sgd", learning_rate=0.01)
    adam = Trainer(model=tiny_net(connect4), optimizer="adam", learning_rate=0.01)
    with pytest.raises(WeightsError, match="optimizer/"):
        adam.restore_from_bytes(sgd.checkpoint_to_bytes({}))
    with pytest.raises(WeightsError, match="not a tengen-checkpoint blob"):
        sgd.restore_from_bytes(weights_to_bytes(sgd.model, metadata={}))


@pytest.mark.slow
def test_a_position_without_a_policy_target_trains_the_value_alone(connect4):
    planes, policy, value = fixed_batch(connect4, 8, seed=4)
    has_policy = np.array([1, 1, 1, 1, 0, 0, 0, 0], np.float32)
    # the policy term is the mean cross-entropy over the four rows that have a target
    model = tiny_net(connect4)
    logits = keras.ops.convert_to_numpy(model(planes, training=True)[0])  # the step's forward pass: batch statistics
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    losses = Trainer(model=model, learning_rate=0.1).train_step(planes, policy, value, has_policy=has_policy)
    assert losses["policy_loss"] == pytest.approx(-(policy[:4] * log_p[:4]).sum(axis=1).mean(), rel=1e-4)

    # the other rows' policies are ignored: zeros (no target) or anything else train alike
    twin = keras.models.clone_model(model)
    twin.set_weights(model.get_weights())
    first, second = Trainer(model=model, learning_rate=0.1), Trainer(model=twin, learning_rate=0.1)
    zeros = policy.copy()
    zeros[4:] = 0.0
    for _ in range(3):
        first.train_step(planes, policy, value, has_policy=has_policy)
        second.train_step(planes, zeros, value, has_policy=has_policy)
    for a, b in zip(model.weights, twin.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.path)
    with pytest.raises(ValueError, match="has_policy has 4 rows for a batch of 8"):
        first.train_step(planes, policy, value, has_policy=has_policy[:4])
