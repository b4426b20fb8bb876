"""bench/supervised_ceiling.py: the config's net trained on exact solver labels."""

from __future__ import annotations

import numpy as np
import pytest
from bench_scripts import load

from tengen.engine.games.mnk import connect4
from tengen.play.grading import parse_line
from tengen.run.checkpoint import load_model
from tengen.run.config import load_config

_ceiling = load("supervised_ceiling")
Samples, batch_rows, train, training_samples = (_ceiling.Samples, _ceiling.batch_rows, _ceiling.train,
                                                 _ceiling.training_samples)

C4 = connect4()
WIN_IN_ONE = "152637 -18 -18 -18 18 -18 -18 -18 18"  # only column 4 wins; elsewhere O wins there
FOUR_FOUR_FIVE_FIVE = "4455 -4 -3 18 2 2 18 -3 18"  # 3 or 6 win on the next move; 4 and 5 later


def test_a_position_teaches_its_optimal_moves_and_its_children_their_exact_values():
    samples = training_samples(C4, [parse_line(FOUR_FOUR_FIVE_FIVE)])
    # the position and its 7 children, mirrored
    assert len(samples) == 16 and samples.has_policy.sum() == 2
    position, mirrored = np.flatnonzero(samples.has_policy)
    assert samples.policy[position].tolist() == [0, 0, 0.5, 0, 0, 0.5, 0]
    assert samples.policy[mirrored].tolist() == [0, 0.5, 0, 0, 0.5, 0, 0]
    assert samples.value[position] == samples.value[mirrored] == 1
    # the children's values are the other player's: columns 1, 2 and 7 lose for X, the rest win
    assert sorted(samples.value[~samples.has_policy].tolist()) == [-1] * 8 + [1] * 6
    assert not samples.policy[~samples.has_policy].any()
    assert np.array_equal(samples.planes[mirrored], samples.planes[position][:, ::-1])


def test_children_that_end_the_game_are_left_out():
    samples = training_samples(C4, [parse_line(WIN_IN_ONE)])
    assert len(samples) == 2 * 7  # the position and six children: column 4's win is not a position
    assert (samples.value == 1).all()  # X wins, and after any other column O does


def test_half_of_each_batch_has_a_policy():
    samples = training_samples(C4, [parse_line(WIN_IN_ONE), parse_line(FOUR_FOUR_FIVE_FIVE)])
    rows = batch_rows(samples, 64, np.random.default_rng(0))
    assert len(rows) == 64 and samples.has_policy[rows[:32]].all()


@pytest.mark.slow
def test_a_short_training_saves_a_model_the_tools_load(tmp_path):
    config = load_config("connect4")
    samples = training_samples(C4, [parse_line(WIN_IN_ONE), parse_line(FOUR_FOUR_FIVE_FIVE)])
    assert isinstance(samples, Samples)
    _, steps = train(config, samples, minutes=0.05, drop_at=10, save_every=10, out=tmp_path)
    assert steps > 0
    saved_config, game, model = load_model(tmp_path / "last")
    assert game.name == "connect4" and saved_config.network == config.network
    assert model.count_params() > 0
