"""KataGo's static score utility in the search (``mcts.score_utility``): each evaluated
leaf's value as it returns to the search becomes (1 - w) * value + w * (2/pi) *
atan(scoreMean / side), so that between two equal wins the search prefers the bigger,
and a won game stays worth the most. A fake scored evaluator on Go 5x5 with values
worked by hand, and a network with the score head."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from tengen.engine.games import make_game
from tengen.engine.mcts import MoveRule, Search, SearchSettings, score_utility, value_with_score, with_score_utility
from tengen.engine.network import CompiledModel, build_network, save_weights_file
from tengen.play.search_player import SearchPlayer
from tengen.run.checkpoint import load_model, load_player
from tengen.run.config import ConfigError, parse_config

GO5 = make_game("go", size=5)
C3, A1 = GO5.text_to_action("C3"), GO5.text_to_action("A1")


def test_the_utility_by_hand():
    # atan(5 / 5) = pi / 4: a lead of one board side is worth half the weight
    u = score_utility(np.array([5.0, -5.0, 0.0, 1e9]), weight=0.2, scale=5.0)
    np.testing.assert_allclose(u, [0.1, -0.1, 0.0, 0.2], rtol=1e-6)
    # mixed into the value: (1 - 0.2) * value + the term, so a sure win with a huge lead
    # is worth exactly 1 and never more
    mixed = value_with_score(np.array([0.6, 1.0, -1.0, 1.0]), np.array([5.0, 1e9, -1e9, -1e9]), weight=0.2, scale=5.0)
    np.testing.assert_allclose(mixed, [0.8 * 0.6 + 0.1, 1.0, -1.0, 0.6], rtol=1e-6)


class BlackWinsEverywhere:
    """Every position is Black's win at 0.6 (from the mover's view: +0.6 with Black to
    move, -0.6 with White), with priors uniform but for A1's, twice the others'; Black's lead is 10 points with a black
    stone on C3 and 1 point without (the mover's view again: negated for White)."""

    calls = 0

    def _evaluate(self, planes):
        black_to_move = GO5.movers(planes) == 0
        # planes 0 and 1: the mover's stones and the opponent's
        black_c3 = np.where(black_to_move, planes[:, 2, 2, 0], planes[:, 2, 2, 1]) > 0
        sign = np.where(black_to_move, 1.0, -1.0)
        policy = np.ones((len(planes), GO5.num_actions), np.float32)
        policy[:, A1] = 2.0
        policy /= policy.sum(axis=1, keepdims=True)
        return policy, (0.6 * sign).astype(np.float32), (sign * np.where(black_c3, 10.0, 1.0)).astype(np.float32)

    def __call__(self, planes):
        policy, value, _ = self._evaluate(planes)
        return policy, value

    def with_score(self, planes):
        self.calls += 1
        return self._evaluate(planes)


def search_between_c3_and_a1(weight: float) -> Search:
    search = Search(GO5, games=1, settings=SearchSettings(simulations=40, leaves_per_round=1, score_utility=weight))
    search.reset(0)
    only_two = np.ones(GO5.num_actions, bool)
    only_two[[C3, A1]] = False
    search.restrict(0, [MoveRule(player=0, forbidden=only_two, until_depth=1)])
    search.run(BlackWinsEverywhere())
    return search


def test_the_score_term_picks_the_bigger_of_two_equal_wins():
    # Without it both moves are worth 0.6 to Black: A1, the likelier by its prior, gets
    # the more visits and is played.
    plain = search_between_c3_and_a1(0.0)
    visits = plain.root_visits(0)
    np.testing.assert_allclose(plain.root_q(0)[[C3, A1]], [0.6, 0.6], rtol=1e-5)
    assert visits[C3] + visits[A1] == 39 and visits[A1] > visits[C3]
    assert plain.best_move(0) == A1
    # With weight 0.5 (the side, 5, as the scale), every value under C3 (a black stone
    # there: a 10-point lead) is 0.5 * 0.6 + 0.5 * (2/pi) * atan(10 / 5) = 0.652 to Black;
    # under A1 it is 0.5 * 0.6 + 0.5 * (2/pi) * atan(1 / 5) = 0.363 until Black takes C3 too.
    scored = search_between_c3_and_a1(0.5)
    q = scored.root_q(0)
    assert q[C3] == pytest.approx(0.5 * 0.6 + 0.5 * 2 / math.pi * math.atan(2.0), rel=1e-5)
    assert q[A1] < q[C3]
    assert scored.root_visits(0)[C3] > scored.root_visits(0)[A1]
    assert scored.best_move(0) == C3


def test_a_search_that_asks_for_the_utility_needs_an_evaluator_with_scores():
    search = Search(GO5, games=1, settings=SearchSettings(simulations=8, score_utility=0.1))
    search.reset(0)
    evaluator = BlackWinsEverywhere()
    with pytest.raises(ValueError, match="score_utility needs an evaluator that answers scores"):
        search.run(lambda planes: evaluator(planes))
    with pytest.raises(ValueError, match="score_utility must be in"):
        SearchSettings(score_utility=1.5)


def test_the_searching_player_evaluates_with_scores_when_asked():
    evaluator = BlackWinsEverywhere()
    player = SearchPlayer(evaluator, search=SearchSettings(simulations=16, score_utility=0.5), simulations=16)
    player.search(GO5, GO5.initial_state())
    assert evaluator.calls > 0
    plain = BlackWinsEverywhere()
    SearchPlayer(plain, search=SearchSettings(simulations=16), simulations=16).search(GO5, GO5.initial_state())
    assert plain.calls == 0


def tiny(*, score: bool):
    return build_network(input_shape=GO5.planes_shape, num_actions=GO5.num_actions, blocks=1, filters=8, score=score)


def test_a_network_with_the_head_answers_the_evaluation_and_the_score_in_one_call():
    compiled = CompiledModel(tiny(score=True), buckets=(1, 8))
    planes = np.random.default_rng(0).integers(0, 2, (3, *GO5.planes_shape)).astype(np.float32)
    policy, value, mean = compiled.with_score(planes)
    np.testing.assert_allclose(policy, compiled(planes)[0], atol=1e-6)
    np.testing.assert_allclose(value, compiled(planes)[1], atol=1e-6)
    np.testing.assert_allclose(mean, compiled.score(planes)[:, 0], atol=1e-4)
    with pytest.raises(ValueError, match="no score head"):
        CompiledModel(tiny(score=False)).with_score(planes)


GO5_CONFIG = {"game": {"name": "go", "size": 5}, "network": {"blocks": 1, "filters": 8, "score": True},
              "mcts": {"simulations": 8, "score_utility": 0.1}}


def test_the_config_gives_the_utility_to_play_only_and_needs_the_head(tmp_path):
    config = parse_config(GO5_CONFIG)
    assert config.play_search().score_utility == 0.1
    # self-play's search gets it folded into the values its evaluator answers (below)
    assert config.search_settings().score_utility == 0.0
    assert config.gating_options().player.search.score_utility == 0.0
    assert parse_config({"game": {"name": "go", "size": 5}}).play_search().score_utility == 0.0
    with pytest.raises(ConfigError, match="mcts.score_utility needs network.score"):
        parse_config({**GO5_CONFIG, "network": {"blocks": 1, "filters": 8}})
    # a model without the head loads under this config, searching without the utility
    save_weights_file(tiny(score=False), tmp_path / "old.safetensors", metadata={})
    loaded, _, _ = load_model(tmp_path / "old.safetensors", config)
    assert not loaded.network.score and loaded.play_search().score_utility == 0.0
    # and one with the head plays with it
    config_file = tmp_path / "go5.yaml"
    config_file.write_text(yaml.safe_dump(GO5_CONFIG))
    save_weights_file(tiny(score=True), tmp_path / "new.safetensors", metadata={})
    loaded, game, player = load_player(str(tmp_path / "new.safetensors"), str(config_file), 8)
    assert player.settings.score_utility == 0.1
    state = game.initial_state()
    assert game.legal_mask(state)[player(game, state, [])]


def test_self_play_s_evaluator_answers_values_with_the_utility_folded_in():
    # the mover's view: Black to move on an empty 5x5 board leads by 1 point, and the
    # position's value is 0.6; the utility of 1 point on a 5-point side is w (2/pi) atan(1/5)
    planes = GO5.encode(GO5.initial_state())[None]
    policy, value = with_score_utility(BlackWinsEverywhere().with_score, weight=0.5, side=5.0)(planes)
    assert value.tolist() == pytest.approx([0.5 * 0.6 + 0.5 * 2 / math.pi * math.atan(1 / 5)])
    np.testing.assert_allclose(policy, BlackWinsEverywhere()(planes)[0])


def test_self_play_of_sure_wins_with_big_leads_makes_samples_the_stream_takes():
    # Every position is Black's sure win (+1) by 40 points. The additive utility once
    # backed up 1 + w and the learner's stream refused the sample ("search_value holds
    # numbers outside [-1, 1]"): the all-on go9 run's worker failed on every game.
    from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
    from tengen.run.codec import encode_game

    def sure_wins(planes):
        sign = np.where(GO5.movers(planes) == 0, 1.0, -1.0).astype(np.float32)  # the mover's view
        policy = np.full((len(planes), GO5.num_actions), 1.0 / GO5.num_actions, np.float32)
        return policy, sign, 40.0 * sign

    # self-play's search takes the utility from its evaluator, as behind the inference server
    settings = SelfPlaySettings(search=SearchSettings(simulations=16))
    evaluator = with_score_utility(sure_wins, weight=0.1, side=5.0)
    records = SelfPlay(GO5, games=2, seed=0, settings=settings).play(evaluator, games=2)
    for record in records:
        assert np.abs(record.search_value).max() <= 1.0
        encode_game(record, worker_id="w000")


def test_the_inference_server_folds_the_utility_into_the_values_it_answers():
    import asyncio

    from tengen.workers.inference_server import InferenceServer

    class StandIn(BlackWinsEverywhere):
        input_shape = GO5.planes_shape
        trace_count = 0

        def load_weights_blob(self, blob):
            return None

    spec = parse_config(GO5_CONFIG).network_spec()
    planes = np.stack([GO5.encode(GO5.initial_state())] * 3)
    plain = InferenceServer(network=spec, model=StandIn())
    folded = InferenceServer(network=spec, model=StandIn(), score_utility=0.5)
    _, value = asyncio.run(plain.evaluate(planes))
    _, with_utility = asyncio.run(folded.evaluate(planes))
    np.testing.assert_allclose(with_utility, 0.5 * value + 0.5 * 2 / math.pi * math.atan(1 / 5), rtol=1e-6)
    with pytest.raises(ValueError, match="score head"):
        InferenceServer(network=spec, model=uniform_stand_in(), score_utility=0.5)


def uniform_stand_in():
    from tengen.testing.instant_evaluator import InstantEvaluator

    return InstantEvaluator(input_shape=GO5.planes_shape, num_actions=GO5.num_actions)


@pytest.mark.slow
def test_a_single_process_run_plays_and_trains_with_the_utility_and_the_head(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    config = tmp_path / "go5.yaml"
    config.write_text(yaml.safe_dump({
        **GO5_CONFIG, "mcts": {"simulations": 8, "leaves_per_round": 4, "score_utility": 0.1},
        "selfplay": {"games_in_flight": 8, "resign_threshold": None},
        "train": {"batch_size": 32, "min_positions": 32, "candidate_every": 4, "replay_window": 2000},
        "gating": {"rule": "threshold", "threshold": 0.5, "games": 4, "games_in_flight": 4},
        "evaluation": {"enabled": False}, "stop": {"steps": 8},
    }))
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "train", str(config), "--single-process", "--run-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    last = json.loads((tmp_path / "run" / "status.jsonl").read_text().splitlines()[-1])
    # games played to the end (no resignation) train the score head beside the rest
    assert last["games"] > 0 and last["learner_step"] >= 8 and "score_loss" in last["losses"], last
