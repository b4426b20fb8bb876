"""Strength against fixed references (workers/strength.py): a perfect tic-tac-toe
player scores what perfect play scores, a random one what the solver says a random
move is worth, each with its standard error; a model version is measured from its
weights blob; the CPU share is kept by hand-set clocks."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from tengen.engine.games import make_game
from tengen.engine.network import weights_to_bytes
from tengen.play.solvers import tictactoe_optimal_actions
from tengen.run.config import parse_config
from tengen.workers import strength
from tengen.workers.strength import (
    CpuShare,
    StrengthEvaluator,
    perfect_tictactoe_side,
    random_side,
    reachable_positions,
)

TICTACTOE = make_game("tictactoe")
CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 4},
                       "mcts": {"simulations": 8},
                       "evaluation": {"positions": 200, "games": 20, "cpu_share": 1.0}})


def by_reference(scores):
    return {score["reference"]: score for score in scores}


def test_tictactoe_has_4520_positions_to_move_in():
    positions = reachable_positions(TICTACTOE)
    assert len(positions) == 4520
    assert not any(TICTACTOE.is_terminal(state) for state in positions)


def test_a_perfect_player_makes_only_optimal_moves_and_draws_with_perfect_play():
    evaluator = StrengthEvaluator(game=TICTACTOE, options=CONFIG.strength_options())
    scores = by_reference(evaluator.measure(perfect_tictactoe_side(seed=1)))
    assert scores["optimal_moves"] == {"reference": "optimal_moves", "measure": "share", "value": 1.0, "se": 0.0,
                                       "n": 200, "skipped": None}
    # perfect against perfect: every game drawn, a score of one half and no spread
    assert scores["vs_perfect"] == {"reference": "vs_perfect", "measure": "score", "value": 0.5, "se": 0.0,
                                    "n": 20, "skipped": None}


def test_a_random_player_scores_what_a_random_move_is_worth():
    options = CONFIG.strength_options()
    evaluator = StrengthEvaluator(game=TICTACTOE, options=options)
    scores = by_reference(evaluator.measure(random_side(TICTACTOE, seed=3)))
    # The expectation over every position: a random move is optimal with the share of
    # the legal moves that are (the sample is of 200, so its mean is near this one).
    expected = np.mean([len(tictactoe_optimal_actions(s)) / TICTACTOE.legal_mask(s).sum()
                        for s in reachable_positions(TICTACTOE)])
    optimal = scores["optimal_moves"]
    assert optimal["n"] == 200
    assert optimal["se"] == pytest.approx(math.sqrt(optimal["value"] * (1 - optimal["value"]) / 200), abs=1e-4)
    assert abs(optimal["value"] - expected) < 4 * optimal["se"] + 0.05
    assert optimal["value"] < 0.9
    # against perfect play a random player loses most games and wins none
    versus = scores["vs_perfect"]
    assert versus["n"] == 20 and versus["value"] < 0.3 and versus["se"] > 0


def test_a_model_version_is_measured_from_its_weights():
    network = CONFIG.network_spec()
    blob = weights_to_bytes(network.build(), metadata={})
    evaluator = StrengthEvaluator(game=TICTACTOE, options=CONFIG.strength_options(), network=network,
                                  pace=CpuShare(1.0))
    result = evaluator.evaluate(7, blob)
    assert result["version"] == 7 and result["elapsed_s"] >= 0 and result["cpu_s"] >= 0
    scores = by_reference(result["scores"])
    assert set(scores) == {"optimal_moves", "vs_perfect"}
    assert all(0 <= s["value"] <= 1 and s["se"] >= 0 for s in scores.values())
    # the same weights measure the same: the sample and the matches' seeds are fixed
    assert evaluator.evaluate(7, blob)["scores"] == result["scores"]


def test_connect4_is_graded_on_labelled_positions_and_against_pure_mcts():
    config = parse_config({"game": {"name": "connect4"}, "evaluation": {"positions": 30, "games": 2,
                                                                        "mcts_simulations": 20}})
    scores = by_reference(StrengthEvaluator(game=config.game.make(), options=config.strength_options()).measure(
        random_side(config.game.make(), seed=2)))
    assert set(scores) == {"positions_optimal", "positions_outcome", "vs_mcts20"}
    assert scores["positions_optimal"]["n"] == 30 and scores["vs_mcts20"]["n"] == 2
    # a move that is optimal keeps the outcome
    assert scores["positions_optimal"]["value"] <= scores["positions_outcome"]["value"]


def test_go_without_gnu_go_says_so(monkeypatch, tmp_path):
    config = parse_config({"game": {"name": "go", "size": 5}, "evaluation": {"games": 2, "mcts_simulations": 4}})
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(strength, "GNUGO_OUTSIDE_PATH", (str(tmp_path / "games" / "gnugo"),))
    assert strength.find_gnugo() is None
    scores = by_reference(StrengthEvaluator(game=config.game.make(), options=config.strength_options()).measure(
        random_side(config.game.make(), seed=2)))
    assert scores["vs_gnugo1"] == {
        "reference": "vs_gnugo1", "measure": "score", "value": None, "se": None, "n": 0,
        "skipped": f"GNU Go is not installed (no gnugo on the PATH or at {tmp_path / 'games' / 'gnugo'})"}
    assert scores["vs_mcts4"]["n"] == 2


def test_gnu_go_is_found_where_debian_puts_it_when_the_path_leaves_that_out(monkeypatch, tmp_path):
    # Debian's gnugo package installs /usr/games/gnugo; root's PATH has no /usr/games
    games = tmp_path / "games"
    games.mkdir()
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(strength, "GNUGO_OUTSIDE_PATH", (str(games / "gnugo"),))
    assert strength.find_gnugo() is None
    (games / "gnugo").write_text("#!/bin/sh\n")
    assert strength.find_gnugo() is None  # not executable: not GNU Go
    (games / "gnugo").chmod(0o755)
    assert strength.find_gnugo() == str(games / "gnugo")
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "gnugo").write_text("#!/bin/sh\n")
    (on_path / "gnugo").chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    assert strength.find_gnugo() == str(on_path / "gnugo")  # the PATH first


class Clocks:
    """Wall and CPU time set by hand; a sleep moves the wall clock only."""

    def __init__(self):
        self.wall = 100.0
        self.cpu = 50.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.wall += seconds


def test_the_cpu_share_sleeps_off_what_the_process_used_past_its_share():
    clocks = Clocks()
    share = CpuShare(0.25, clock=lambda: clocks.wall, cpu=lambda: clocks.cpu, sleep=clocks.sleep)
    clocks.wall += 1.0
    clocks.cpu += 0.2  # 0.2 s of CPU in 1 s: within a quarter
    assert share() == 0.0
    clocks.wall += 1.0
    clocks.cpu += 0.8  # 1.0 s of CPU in 2 s: a quarter allows it in 4 s, so 2 s more
    assert share() == pytest.approx(2.0)
    assert clocks.slept == [pytest.approx(2.0)] and share.slept == pytest.approx(2.0)
    share.begin()  # a new evaluation counts from now
    clocks.wall += 1.0
    assert share() == 0.0
    with pytest.raises(ValueError):
        CpuShare(0)


def test_go_with_gnu_go_on_the_path_plays_it_at_the_configs_level(monkeypatch):
    from tengen.testing.debian import fetch_gnugo

    gnugo = fetch_gnugo()
    monkeypatch.setenv("PATH", f"{gnugo.parent}{os.pathsep}{os.environ['PATH']}")
    config = parse_config({"game": {"name": "go", "size": 5}, "evaluation": {"games": 2, "mcts_simulations": 4,
                                                                           "gnugo_level": 3}})
    scores = by_reference(StrengthEvaluator(game=config.game.make(), options=config.strength_options()).measure(
        random_side(config.game.make(), seed=2)))
    versus = scores["vs_gnugo3"]
    assert versus["n"] == 2 and versus["skipped"] is None
    assert versus["value"] <= 0.5  # a random player does not beat GNU Go
