"""The models that ship with tengen (models/, run/packaged_models.py): a fresh install
plays them before it has trained anything, wherever a checkpoint is taken, and each is
as strong as its strength.json says, measured again here."""

from __future__ import annotations

import dataclasses
import math

import pytest
from page_server import PageServer
from test_cli import tengen

from tengen.run.config import load_config
from tengen.run.packaged_models import PACKAGED, checkpoint_path, packaged_models, packaged_strength
from tengen.run.run_dir import CONFIG_FILE, MODEL_FILE


def test_tictactoe_and_connect4_ship_each_with_its_config_and_measured_strength():
    models = packaged_models()
    assert set(models) >= {"tictactoe", "connect4"}
    for name, folder in models.items():
        assert load_config(folder / CONFIG_FILE).game.name == name
        assert (folder / MODEL_FILE).stat().st_size < 2_000_000  # the wheel stays small
        strength = packaged_strength(name)
        assert strength["trained_with"].startswith(f"tengen train {name}") and strength["run"]["games"] > 0
        assert all(score["value"] is not None for score in strength["scores"]), strength["scores"]
    assert checkpoint_path(f"{PACKAGED}:connect4") == models["connect4"]
    assert str(checkpoint_path("runs/connect4/best")) == "runs/connect4/best"  # a path stays a path
    with pytest.raises(FileNotFoundError, match="say which game's model: packaged:connect4"):
        checkpoint_path(PACKAGED)


def _measured(name: str, positions: int, games: int):
    from tengen.run.checkpoint import load_model
    from tengen.workers.strength import StrengthEvaluator

    config, game, _ = load_model(f"{PACKAGED}:{name}")
    options = dataclasses.replace(config.strength_options(), positions=positions, games=games)
    evaluator = StrengthEvaluator(game=game, options=options, network=config.network_spec())
    result = evaluator.evaluate(0, (packaged_models()[name] / MODEL_FILE).read_bytes())
    return {score["reference"]: score for score in result["scores"]}


def test_the_packaged_tictactoe_model_plays_perfectly():
    # an optimal move in every position sampled here, and in all 4,520 when it was packaged
    scores = _measured("tictactoe", positions=500, games=2)
    assert scores["optimal_moves"]["value"] == 1.0, scores
    said = packaged_strength("tictactoe")["scores"][0]
    assert (said["reference"], said["value"], said["n"]) == ("optimal_moves", 1.0, 4520)


def test_the_packaged_connect4_model_is_as_strong_as_its_strength_json_says():
    scores = _measured("connect4", positions=256, games=2)
    said = {score["reference"]: score for score in packaged_strength("connect4")["scores"]}
    here, there = scores["positions_optimal"], said["positions_optimal"]
    spread = math.hypot(here["se"], there["se"])
    assert abs(here["value"] - there["value"]) < 3 * spread, (here, there)
    assert there["value"] > 0.6  # the untrained network, with the same search: 0.52 (models/README.md)


@pytest.mark.slow
def test_tengen_play_connect4_serves_the_packaged_model():
    server = PageServer("play", "connect4", "--port", "0")
    try:
        status, info = server.get("/api/info")
        assert status == 200 and info["game"] == "connect4" and info["checkpoint"] == f"{PACKAGED}:connect4", info
        _, view = server.call("POST", "/api/games", {"person": 0})
        _, view = server.call("POST", f"/api/games/{view['id']}/play", {"action": 3})
        _, view = server.call("POST", f"/api/games/{view['id']}/reply", {"simulations": 32})
        assert len(view["moves"]) == 2, view
    finally:
        assert server.close() == 0


@pytest.mark.slow
def test_a_packaged_model_is_a_checkpoint_for_every_command():
    done = tengen("bestmove", "--checkpoint", f"{PACKAGED}:connect4", "--sims", "50", stdin="4453\n")
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr


def test_a_model_that_does_not_ship_is_refused_with_what_does():
    # as a KataGo user would type it: --model is --checkpoint's other name
    done = tengen("gtp", "--game", "go9", "--model", PACKAGED, stdin="quit\n")
    assert done.returncode == 2, done
    assert "packaged:go9: tengen ships no model for go9" in done.stderr and "packaged:connect4" in done.stderr
    assert "tengen train go9" in done.stderr
    done = tengen("play")
    assert done.returncode == 2 and "tengen play connect4" in done.stderr, done.stderr
    done = tengen("play", "connect4", "--checkpoint", "runs/connect4/best")
    assert done.returncode == 2 and "not both" in done.stderr, done.stderr
    done = tengen("match", f"{PACKAGED}:gomoku", f"{PACKAGED}:connect4", "--games", "2")
    assert done.returncode == 2 and "tengen ships no model for gomoku" in done.stderr, done.stderr
