"""``tengen gtp --checkpoint FILE.safetensors --config FILE`` with a real (tiny,
untrained) Keras model: what it refuses, what it warns about, a quiet stderr, a 9x9
game on a short absolute clock against GNU Go that it must not lose on time, and
KGS's cleanup phase with a model that would pass."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from gtp_referee import ROOT, Engine, GtpFailure, fetch_gnugo, play_game, tengen_command
from test_gtp import DEAD_STONES

pytestmark = pytest.mark.slow  # Keras models written, then loaded by a tengen gtp child process per test

MAIN_TIME = 20.0  # seconds of absolute time for tengen's whole game


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[str, str]:
    """(weights, config) of a fresh 9x9 net, written by a child process so that this
    one never imports TensorFlow. The weights file has no config beside it."""
    tmp = tmp_path_factory.mktemp("model")
    config = tmp / "go9-tiny.yaml"
    config.write_text(yaml.safe_dump({
        "game": {"name": "go", "size": 9, "komi": 7.5},
        "network": {"blocks": 1, "filters": 8},
        "mcts": {"simulations": 16, "leaves_per_round": 8},
    }))
    weights = tmp / "weights" / "model.safetensors"
    weights.parent.mkdir()
    script = textwrap.dedent(f"""
        from tengen.run.config import load_config
        from tengen.run.checkpoint import build_model
        from tengen.engine.network import save_weights_file
        save_weights_file(build_model(load_config({str(config)!r})), {str(weights)!r}, metadata={{"version": "000000"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return str(weights), str(config)


@pytest.fixture(scope="module")
def passing_model(model) -> tuple[str, str]:
    """(weights, config) of ``model``'s network with its policy put on pass in every
    position, as a trained model's is once it judges the game over: the case the
    cleanup phase is for. An untrained network's choices would be arbitrary."""
    weights, config = model
    passing = str(Path(weights).with_name("passing.safetensors"))
    script = textwrap.dedent(f"""
        import numpy as np
        from tengen.run.checkpoint import load_model
        from tengen.run.config import load_config
        from tengen.engine.network import save_weights_file
        _, game, network = load_model({weights!r}, load_config({config!r}))
        logits = network.get_layer("policy_logits")
        kernel, bias = logits.get_weights()
        bias[:] = 0.0
        bias[game.pass_action] = 30.0
        logits.set_weights([np.zeros_like(kernel), bias])
        save_weights_file(network, {passing!r}, metadata={{"version": "000001"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return passing, config


def test_a_model_with_go_s_feature_planes_and_a_score_head_plays_and_reports_its_scores(tmp_path) -> None:
    config = tmp_path / "go9-heads.yaml"
    config.write_text(yaml.safe_dump({
        "game": {"name": "go", "size": 9, "komi": 7.5, "features": True},
        "network": {"blocks": 1, "filters": 8, "score": True},
        "mcts": {"simulations": 16, "leaves_per_round": 8},
    }))
    weights = tmp_path / "model.safetensors"
    script = textwrap.dedent(f"""
        from tengen.run.config import load_config
        from tengen.run.checkpoint import build_model
        from tengen.engine.network import save_weights_file
        save_weights_file(build_model(load_config({str(config)!r})), {str(weights)!r}, metadata={{"version": "000000"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    engine = Engine(tengen_command("--checkpoint", str(weights), "--config", str(config), "--sims", "16",
                                   "--no-resign"), "tengen")
    try:
        engine.send("play b E5")  # the board's planes are the ones the net reads, 20 feature planes among them
        assert engine.send("genmove w") not in ("E5", "resign")
        lines = engine.send("kata-genmove_analyze b 1").split("\n")
        assert lines[-1].startswith("play ")
        assert all(" scoreLead " in line and " scoreStdev " in line for line in lines[:-1]), lines
        assert engine.stderr() == ""
    finally:
        engine.close()


def test_checkpoint_with_config_plays_refuses_other_sizes_and_warns_about_komi(model) -> None:
    weights, config = model
    engine = Engine(tengen_command("--checkpoint", weights, "--config", config, "--sims", "32", "--no-resign"),
                    "tengen")
    try:
        assert engine.send("boardsize 9") == ""
        with pytest.raises(GtpFailure, match="unacceptable size: the model was trained on 9x9 and plays no other"):
            engine.send("boardsize 13")
        engine.send("play b E5")
        vertex = engine.send("genmove w")
        assert vertex not in ("E5", "resign")
        assert engine.send("komi 7.5") == ""  # the model's komi: nothing to say
        assert engine.stderr() == ""  # and no TensorFlow noise either
        engine.send("komi 5.5")
        engine.send("komi 5.5")
        assert engine.stderr().count("komi 5.5 differs from the komi the model was trained with (7.5)") == 1
        lines = engine.send("kata-genmove_analyze b 1").split("\n")  # the model's search, streamed
        assert lines[-1].startswith("play ") and lines[0].startswith("info move ")
        assert engine.stderr().count("differs") == 1  # and nothing else
    finally:
        engine.close()


def test_checkpoint_errors_name_the_options_that_exist(tmp_path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    done = subprocess.run(tengen_command("--checkpoint", str(weights)), input="", capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "pass --config" in done.stderr
    done = subprocess.run(tengen_command("--config", "configs/go9.yaml"), input="", capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "--config goes with --checkpoint" in done.stderr


def test_a_short_absolute_clock_against_gnugo_is_never_overrun(model) -> None:
    weights, config = model
    # Far more visits than the clock allows: the clock is what stops each search.
    us = Engine(tengen_command("--checkpoint", weights, "--config", config, "--sims", "20000", "--no-resign",
                               "--lag", "0.3"), "tengen")
    them = Engine([str(fetch_gnugo()), "--mode", "gtp", "--chinese-rules", "--level", "1"], "gnugo")
    try:
        us.send("name")  # loaded
        result = play_game(us, them, main_time=MAIN_TIME, max_moves=120, require_end=False)
    finally:
        us.close()
        them.close()
    used = result.seconds_used["tengen"]
    assert used < MAIN_TIME, f"tengen overran its {MAIN_TIME:g} s: {used:.2f} s"
    assert used > 0.3 * MAIN_TIME, f"tengen used only {used:.2f} s of {MAIN_TIME:g}: it should search while it may"
    print(f"tengen used {used:.2f} s of {MAIN_TIME:g} in {len(result.moves)} moves")
    assert len(result.moves) >= 40


def test_kgs_genmove_cleanup_with_a_model_captures_the_dead_stones_it_would_pass_over(passing_model) -> None:
    weights, config = passing_model
    engine = Engine(tengen_command("--checkpoint", weights, "--config", config, "--sims", "16", "--seed", "3"),
                    "tengen")
    try:
        # With nothing dead on the board, cleanup's answer is the model's own: a pass
        # (the engine without a model would play one of the empty board's points).
        assert engine.send("kgs-genmove_cleanup b") == "pass"
        engine.send("clear_board")
        # tests/test_gtp.py's position: white's B5 and C5 lie dead in black's area
        for row, cells in enumerate(line.split() for line in DEAD_STONES.strip().splitlines()):
            for column, cell in enumerate(cells):
                if cell in "XO":
                    engine.send(f"play {'b' if cell == 'X' else 'w'} {'ABCDEFGHJ'[column]}{9 - row}")
        engine.send("play w pass")
        assert engine.send("final_status_list dead") == "B5 C5"
        liberties = {"A5", "B6", "C6", "D5", "C4", "B4"}
        played: list[str] = []
        while "captures B 2" not in engine.send("showboard"):
            assert len(played) < len(liberties), f"B5 and C5 are still on the board after {played}"
            move = engine.send("kgs-genmove_cleanup b")
            assert move != "pass", f"passed after {played} with dead stones on the board"
            played.append(move)
            engine.send("play w pass")
        # The model passed each time; the engine played a liberty of the dead stones instead.
        assert sorted(played) == sorted(liberties)
        assert engine.send("final_status_list dead") == ""
        assert engine.send("kgs-genmove_cleanup b") == "pass"  # nothing is dead now: the model's pass stands
    finally:
        engine.close()
