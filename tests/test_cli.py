"""The tengen command as people use it: real processes, real files."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def tengen(*args, stdin="", timeout=300):
    return subprocess.run([sys.executable, "-m", "tengen.cluster.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def tiny_config(tmp_path, game, **sections):
    config = {
        "game": game,
        "network": {"blocks": 1, "filters": 8},
        "mcts": {"simulations": 16, "leaves_per_round": 4},
        "selfplay": {"games_in_flight": 8},
        "train": {"batch_size": 32, "min_positions": 32, "candidate_every": 4, "replay_window": 2000},
        "gating": {"rule": "threshold", "threshold": 0.5, "games": 4, "games_in_flight": 4},
        "stop": {"steps": 8},
    }
    config.update(sections)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def connect4_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("c4")
    config = tiny_config(tmp, {"name": "connect4"})
    done = tengen("train", str(config), "--single-process", "--run-dir", str(tmp / "run"))
    assert done.returncode == 0, done.stderr
    return tmp / "run"


def test_single_process_training_leaves_a_run_directory(connect4_run):
    for name in ["run.json", "config.yaml", "log.txt", "ladder.json", "learner/learner.ckpt", "best/model.safetensors"]:
        assert (connect4_run / name).exists(), name
    assert "done:" in (connect4_run / "log.txt").read_text()


def test_bestmove_answers_every_line_and_survives_bad_ones(connect4_run):
    lines = ["", "4453", "4444444", "x9", "1212121", "7"]
    for sims in ("0", "24"):
        done = tengen("bestmove", "--checkpoint", str(connect4_run / "best"), "--sims", sims,
                      stdin="\n".join(lines) + "\n")
        assert done.returncode == 0, done.stderr
        answers = done.stdout.split()
        assert len(answers) == len(lines)
        assert answers[0] in list("1234567") and answers[1] in list("1234567") and answers[5] in list("1234567")
        assert answers[2:5] == ["error", "error", "error"]  # full column, bad text, finished game
        assert "not legal" in done.stderr and "'x'" in done.stderr and "game is over" in done.stderr


def test_bestmove_refuses_a_model_of_another_shape(connect4_run, tmp_path):
    other = tiny_config(tmp_path, {"name": "connect4"}, network={"blocks": 2, "filters": 8})
    done = tengen("bestmove", "--config", str(other), "--checkpoint", str(connect4_run / "best"), stdin="4\n")
    assert done.returncode == 2 and "lacks tensor 'block1_conv1/kernel'" in done.stderr


def test_train_stops_at_start_on_a_bad_config(tmp_path):
    config = tiny_config(tmp_path, {"name": "connect4"}, mcts={"simulation": 10})
    done = tengen("train", str(config), "--single-process", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2 and "mcts.simulation: unknown key" in done.stderr
    assert not (tmp_path / "run").exists()


def test_gtp_plays_with_a_trained_go_model(tmp_path):
    config = tiny_config(tmp_path, {"name": "go", "size": 5, "history_length": 2},
                         stop={"steps": 1}, train={"batch_size": 16, "min_positions": 16, "candidate_every": 100})
    assert tengen("train", str(config), "--single-process", "--run-dir", str(tmp_path / "run")).returncode == 0
    done = tengen("gtp", "--checkpoint", str(tmp_path / "run" / "best"), "--sims", "8",
                  stdin="boardsize 5\nplay b C3\ngenmove w\nshowboard\nquit\n")
    assert done.returncode == 0, done.stderr
    replies = [r for r in done.stdout.split("\n\n") if r]
    assert replies[0] == "=" and replies[1] == "="
    vertex = replies[2].removeprefix("= ")
    assert vertex != "C3" and (vertex == "pass" or vertex[0] in "ABCDE")


def test_train_refuses_a_run_dir_that_already_holds_a_run(connect4_run, tmp_path):
    checkpoint = connect4_run / "learner" / "learner.ckpt"
    before = checkpoint.read_bytes()
    config = tiny_config(tmp_path, {"name": "connect4"})
    done = tengen("train", str(config), "--single-process", "--run-dir", str(connect4_run))
    assert done.returncode == 2 and "already holds a run: pass --resume" in done.stderr
    assert checkpoint.read_bytes() == before


def test_resume_continues_a_run_from_its_checkpoint(connect4_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(connect4_run, run)
    ladder = json.loads((run / "ladder.json").read_text())
    # The run stopped at its 8 steps; a config that only moves the stop goes on.
    config = tiny_config(tmp_path, {"name": "connect4"}, stop={"steps": 16})
    done = tengen("train", str(config), "--resume", "--single-process", "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    assert "resumed at step 8" in done.stdout and '"steps": 16' in done.stdout
    assert json.loads((run / "ladder.json").read_text())[:len(ladder)] == ladder


def test_a_run_directory_of_the_old_single_process_format_is_refused_on_resume(connect4_run, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for name in ("config.yaml", "ladder.json"):
        shutil.copy(connect4_run / name, old / name)
    (old / "checkpoint.safetensors").write_bytes(b"the single-process checkpoint of tengen 0.1.0")
    done = tengen("train", "--resume", "--single-process", "--run-dir", str(old))
    assert done.returncode == 2 and "made by an older tengen's --single-process" in done.stderr, done.stderr
    assert sorted(p.name for p in old.iterdir()) == ["checkpoint.safetensors", "config.yaml", "ladder.json"]


def test_resume_needs_a_run_and_the_same_network(connect4_run, tmp_path):
    done = tengen("train", "--resume", "--single-process", "--run-dir", str(tmp_path / "nothing"))
    assert done.returncode == 2 and "holds no run to resume" in done.stderr
    bigger = tiny_config(tmp_path, {"name": "connect4"}, network={"blocks": 2, "filters": 8})
    done = tengen("train", str(bigger), "--resume", "--single-process", "--run-dir", str(connect4_run))
    assert done.returncode == 2 and "another game or network" in done.stderr


def test_metrics_port_is_checked_like_the_config_key(tmp_path):
    config = tiny_config(tmp_path, {"name": "tictactoe"})
    done = tengen("train", str(config), "--metrics-port", "80", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2 and "metrics_export_port: Input should be greater than or equal to 1024" in done.stderr
    done = tengen("train", str(config), "--metrics-port", "8080", "--address", "auto", "--run-dir", str(tmp_path / "r"))
    assert done.returncode == 2 and "applies to a local Ray only" in done.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "r").exists()
