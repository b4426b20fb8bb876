"""Proof that the loop learns: tic-tac-toe from scratch to perfect play, in one process.

Trains with configs/tictactoe.yaml (a few minutes on two cores), then checks the best
model with search against an exhaustive minimax: the optimal move in every reachable
position, and no loss to a perfect player from either side.
"""

import numpy as np
import pytest
from positions import reachable_positions

from tengen.engine.mcts import Search, SearchSettings
from tengen.engine.network import CompiledModel
from tengen.play.match import play_match
from tengen.play.players import MctsPlayer
from tengen.play.solvers import tictactoe_optimal_actions
from tengen.run.checkpoint import load_model
from tengen.run.config import load_config
from tengen.run.single_process import SingleProcessRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # minutes of training before the first test

SIMULATIONS = 800


class PerfectPlayer:
    """Plays a random optimal move (by exhaustive minimax)."""

    name = "perfect"

    def new_game(self, slot, state):
        pass

    def choose(self, slots, states, rng):
        return [int(rng.choice(sorted(tictactoe_optimal_actions(s)))) for s in states]

    def advance(self, slot, action):
        pass


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("tictactoe")
    summary = SingleProcessRun(load_config("configs/tictactoe.yaml"), run_dir, log=lambda line: None).run()
    return summary, run_dir


def test_training_promotes_new_models(trained):
    summary, run_dir = trained
    assert summary["promotions"] >= 1
    assert (run_dir / "best" / "model.safetensors").exists()
    assert "promoted" in (run_dir / "log.txt").read_text()


def test_search_plays_the_optimal_move_in_every_reachable_position(trained):
    config, game, model = load_model(trained[1] / "best")
    positions = reachable_positions(game)
    assert len(positions) == 4520
    search = Search(game, games=len(positions),
                    settings=SearchSettings(simulations=SIMULATIONS, c_puct=config.mcts.c_puct,
                                            fpu_reduction=config.mcts.fpu_reduction,
                                            leaves_per_round=config.mcts.leaves_per_round))
    for i, state in enumerate(positions):
        search.reset(i, state)
    search.run(CompiledModel(model))
    wrong = []
    for i, state in enumerate(positions):
        move = int(np.argmax(np.where(game.legal_mask(state), search.root_visits(i), -1)))
        if move not in tictactoe_optimal_actions(state):
            wrong.append(game.render(state) + f"\nplayed {move + 1}")
    assert not wrong, f"{len(wrong)} non-optimal moves, e.g.\n" + "\n\n".join(wrong[:3])


def test_never_loses_to_a_perfect_player(trained):
    config, game, model = load_model(trained[1] / "best")
    player = MctsPlayer(game, CompiledModel(model), slots=50,
                        search=SearchSettings(simulations=SIMULATIONS, c_puct=config.mcts.c_puct,
                                              fpu_reduction=config.mcts.fpu_reduction))
    result = play_match(game, player, PerfectPlayer(), games=100, slots=50, rng=np.random.default_rng(0))
    assert result.games == 100 and result.losses == 0
