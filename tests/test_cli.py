"""The tengen command as people use it: real processes, real files."""

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from unavailable import unavailable

ROOT = Path(__file__).resolve().parent.parent


def tengen(*args, stdin: str | bytes = "", timeout=300, env: dict[str, str] | None = None):
    """The command's run (``env``: added to this environment); stdin may hold bytes that
    are not UTF-8, read under a strict locale (Python's default for a UTF-8 one: a bad
    byte there used to be a traceback)."""
    done = subprocess.run([sys.executable, "-m", "tengen.cli", *args],
                          input=stdin.encode() if isinstance(stdin, str) else stdin, capture_output=True,
                          timeout=timeout, cwd=ROOT,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8:strict", **(env or {})})
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(errors="replace"),
                                       done.stderr.decode(errors="replace"))


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


@pytest.mark.slow
def test_single_process_training_leaves_a_run_directory(connect4_run):
    for name in ["run.json", "config.yaml", "log.txt", "ladder.json", "learner/learner.ckpt", "best/model.safetensors"]:
        assert (connect4_run / name).exists(), name
    assert "done:" in (connect4_run / "log.txt").read_text()
    # self-play calls the model itself: the status line says how large its batches were
    # and how long it spent inside the compiled call: in all, and as a share of each interval
    lines = [json.loads(line) for line in (connect4_run / "status.jsonl").read_text().splitlines()]
    assert 0 < lines[-1]["mean_batch"] <= 8 * 4  # at most games in flight x leaves per round
    assert all(0.0 <= line["model_busy"] < 1.0 for line in lines)
    assert 0.0 < lines[-1]["model_s"] < lines[-1]["elapsed_s"]
    assert [line["model_s"] for line in lines] == sorted(line["model_s"] for line in lines)


@pytest.mark.slow
def test_bestmove_answers_every_line_and_survives_bad_ones(connect4_run):
    lines = [b"", b"4453", b"4444444", b"x9", b"1212121", b"4\xff", b"7"]
    for sims in ("0", "24"):
        done = tengen("bestmove", "--checkpoint", str(connect4_run / "best"), "--sims", sims,
                      stdin=b"\n".join(lines) + b"\n")
        assert done.returncode == 0, done.stderr
        answers = done.stdout.split()
        assert len(answers) == len(lines)
        assert answers[0] in list("1234567") and answers[1] in list("1234567") and answers[6] in list("1234567")
        assert answers[2:6] == ["error"] * 4  # full column, bad text, finished game, not UTF-8
        assert "not legal" in done.stderr and "'x'" in done.stderr and "game is over" in done.stderr
        assert "invalid UTF-8" in done.stderr


@pytest.mark.slow
def test_bestmove_refuses_a_model_of_another_shape(connect4_run, tmp_path):
    other = tiny_config(tmp_path, {"name": "connect4"}, network={"blocks": 2, "filters": 8})
    done = tengen("bestmove", "--config", str(other), "--checkpoint", str(connect4_run / "best"), stdin="4\n")
    assert done.returncode == 2 and "lacks tensor 'block1_conv1/kernel'" in done.stderr


def test_train_stops_at_start_on_a_bad_config(tmp_path):
    config = tiny_config(tmp_path, {"name": "connect4"}, mcts={"simulation": 10})
    done = tengen("train", str(config), "--single-process", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2 and "mcts.simulation: unknown key" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
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


@pytest.mark.slow
def test_train_refuses_a_run_dir_that_already_holds_a_run(connect4_run, tmp_path):
    checkpoint = connect4_run / "learner" / "learner.ckpt"
    before = checkpoint.read_bytes()
    config = tiny_config(tmp_path, {"name": "connect4"})
    done = tengen("train", str(config), "--single-process", "--run-dir", str(connect4_run))
    assert done.returncode == 2 and "already holds a run: pass --resume" in done.stderr
    assert checkpoint.read_bytes() == before


@pytest.mark.slow
def test_resume_continues_a_run_from_its_checkpoint(connect4_run, tmp_path):
    from tengen.run.records import read_ladder
    from tengen.run.run_dir import RunDir

    run = RunDir(tmp_path / "run")
    shutil.copytree(connect4_run, run.path)
    ladder = read_ladder(run).entries
    # The run stopped at its 8 steps; a config that only moves the stop goes on.
    config = tiny_config(tmp_path, {"name": "connect4"}, stop={"steps": 16})
    done = tengen("train", str(config), "--resume", "--single-process", "--run-dir", str(run.path))
    assert done.returncode == 0, done.stderr
    assert "resumed at step 8" in done.stdout and '"steps": 16' in done.stdout
    assert read_ladder(run).entries[:len(ladder)] == ladder
    # --set moves any key on --resume, written into the run's config.yaml (the run's own config, no file given)
    done = tengen("train", "--resume", "--single-process", "--run-dir", str(run.path), "--set", "stop.steps=20",
                  "--set", "mcts.simulations=12")
    assert done.returncode == 0 and '"steps": 20' in done.stdout, done.stderr
    saved = yaml.safe_load(run.config.read_text())
    assert saved["stop"]["steps"] == 20 and saved["mcts"]["simulations"] == 12


def test_train_refuses_settings_it_cannot_make_and_flags_a_mode_ignores(tmp_path):
    run_dir = str(tmp_path / "run")
    for args, words in [
        (["--set", "stop.hours=3"], "--set: stop.hours is not a config key"),
        (["--set", "stop.minutes"], "give KEY=VALUE"),
        (["--set", "mcts.simulations=-4"], "mcts.simulations"),
        (["--single-process", "--workers", "3", "--redis", "redis://x:6379/0"],
         "--workers, --redis mean nothing to --single-process"),
    ]:
        done = tengen("train", "tictactoe", "--run-dir", run_dir, *args)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
    assert not (tmp_path / "run").exists()


def test_global_flags_follow_the_subcommand_too_and_every_option_says_what_it_is():
    import argparse

    from tengen.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["status", "--run-dir", "r", "--verbose"]).verbose_here
    assert parser.parse_args(["--verbose", "status", "--run-dir", "r"]).verbose_all
    assert parser.parse_args(["config", "show", "go9", "--verbose"]).verbose_here  # a command in a group too

    def commands(parser):
        groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return [(parser.prog, parser)] + [c for g in groups for sub in g.choices.values() for c in commands(sub)]

    missing = [(name, action.option_strings or action.dest) for name, sub in commands(parser)
               for action in sub._actions if not action.help and not isinstance(action, argparse._HelpAction)
               and not isinstance(action, argparse._SubParsersAction)]
    assert missing == []
    listed = tengen("config", "list").stdout.splitlines()
    assert all(line.rstrip().endswith(".") for line in listed), listed  # whole sentences, not cut mid-way


@pytest.mark.slow
def test_a_run_directory_of_the_old_single_process_format_is_refused_on_resume(connect4_run, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for name in ("config.yaml", "ladder.json"):
        shutil.copy(connect4_run / name, old / name)
    (old / "checkpoint.safetensors").write_bytes(b"the single-process checkpoint of tengen 0.1.0")
    done = tengen("train", "--resume", "--single-process", "--run-dir", str(old))
    assert done.returncode == 2 and "made by an older tengen's --single-process" in done.stderr, done.stderr
    assert sorted(p.name for p in old.iterdir()) == ["checkpoint.safetensors", "config.yaml", "ladder.json"]


@pytest.mark.slow
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


# -- start-up: the first line, a quiet terminal, light commands --------------------------------

#: what TensorFlow, CUDA, absl and Ray print at start-up (TensorFlow's C++ logs start with
#: a severity letter and the date: I0000 00:00:1796125861.327614 ...)
STARTUP_NOISE = re.compile(r"absl::InitializeLog|oneDNN|cuda|cuInit|^[IWEF]\d{4} |Started a local Ray instance|"
                           r"Token authentication|Connecting to existing Ray cluster", re.M | re.I)


@pytest.mark.slow
def test_train_says_first_what_it_does_and_keeps_the_terminal_quiet(tmp_path):
    # TF_CPP_MIN_LOG_LEVEL=1 as JAX's import leaves it (a test process that imported JAX
    # passed it on): the strength evaluator's child then showed TensorFlow's start-up.
    done = tengen("train", "tictactoe", "--single-process", "--run-dir", str(tmp_path / "run"), "--minutes", "0.2",
                  env={"TF_CPP_MIN_LOG_LEVEL": "1"})
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first == (f"tengen train: tictactoe in this process (no Ray, no Redis), CPU, into {tmp_path / 'run'} "
                     "(0.2 minutes or 10000 steps); the first games wait for the search kernels to compile"), first
    assert done.stderr == "", done.stderr
    # The flag is the config's stop.minutes, and the run directory says so.
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["stop"]["minutes"] == 0.2
    done = tengen("config", "show", "go9")
    assert done.returncode == 0 and "game:" in done.stdout
    assert done.stderr == "", done.stderr


def test_a_reader_that_leaves_early_is_no_error():
    """``tengen config show go9 | head -1``: the pipe closes before tengen writes."""
    shown = subprocess.Popen([sys.executable, "-m", "tengen.cli", "config", "show", "go9"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    shown.stdout.close()
    _, stderr = shown.communicate(timeout=120)
    assert shown.returncode == 141 and stderr == b"", stderr.decode()


def _keys(config: dict) -> set[str]:
    """A config's keys as ``section.key`` (``game.size``), or ``key`` outside a section
    (``seed``)."""
    return {f"{name}.{key}" for name, section in config.items() if isinstance(section, dict) for key in section} | {
        name for name, value in config.items() if not isinstance(value, dict)}


def _schema_keys() -> set[str]:
    """Every key the config schema knows, in ``_keys``' form."""
    from pydantic import BaseModel

    from tengen.run.config import TengenConfig

    keys = set()
    for name, field in TengenConfig.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            keys |= {f"{name}.{key}" for key in section.model_fields}
        else:
            keys.add(name)
    return keys


def test_config_show_spells_out_every_key_of_the_packaged_config():
    """``tengen config show go9 > my-go9.yaml``: a start for one's own config."""
    from tengen.run.config import config_path, load_config, parse_config

    done = tengen("config", "show", "go9")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    shown = yaml.safe_load(done.stdout)
    assert parse_config(shown, "tengen config show go9") == load_config("go9")
    # go9.yaml leaves sections and keys to their defaults (redis, ray, seed, ...); the
    # output names those too, with their values.
    written = _keys(yaml.safe_load(config_path("go9").read_text()))
    assert written < _schema_keys()
    assert _keys(shown) == _schema_keys()


@pytest.mark.slow
def test_verbose_lets_tensorflow_start_up_through(tmp_path):
    # What this machine's TensorFlow prints when nothing holds it back (on some machines, nothing).
    bare = subprocess.run([sys.executable, "-c", "import tensorflow as tf; tf.config.list_physical_devices()"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    expected = {m.group(0).lower() for m in STARTUP_NOISE.finditer(bare.stderr)}
    done = tengen("--verbose", "train", "tictactoe", "--single-process", "--run-dir", str(tmp_path / "run"),
                  "--minutes", "0.05")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tengen train: tictactoe in this process")
    assert expected <= {m.group(0).lower() for m in STARTUP_NOISE.finditer(done.stderr)}, done.stderr


@pytest.mark.slow
def test_a_ray_run_says_first_what_it_does_and_keeps_the_terminal_quiet(tmp_path):
    config = tiny_config(tmp_path, {"name": "tictactoe"}, cluster={"workers": 1, "games_per_worker": 8})
    done = tengen("train", str(config), "--run-dir", str(tmp_path / "run"), "--minutes", "0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"tengen train: tictactoe on a local Ray with an embedded Redis, CPU, into "
                            f"{tmp_path / 'run'} (0.1 minutes or 8 steps)"), first
    assert not STARTUP_NOISE.search(done.stderr), done.stderr
    assert (tmp_path / "run" / "status.json").exists()


#: runs the tengen command in this interpreter, then writes which heavy modules it loaded
HEAVY_PROBE = """
import json, sys
from tengen.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(m for m in ("tensorflow", "ray", "numba", "numpy", "jax") if m in sys.modules), out)
sys.exit(code)
"""


def tengen_loading(tmp_path, *args, stdin=None, env=None):
    """``tengen ARGS`` in a subprocess, and the heavy modules it imported."""
    probe = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", HEAVY_PROBE, str(probe), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, input=stdin, env=env)
    return done, json.loads(probe.read_text())


@pytest.mark.slow
def test_the_commands_that_need_no_cluster_import_neither_ray_nor_another_backend(connect4_run, tmp_path):
    # a machine without a cluster (a GPU box, a laptop) runs these with Ray's import cost
    # and its failures out of the way; and on JAX, a GPU image without TensorFlow runs them
    best = str(connect4_run / "best")
    commands = {
        "train --single-process": (["train", "tictactoe", "--single-process", "--run-dir", str(tmp_path / "run"),
                                    "--minutes", "0.05"], None),
        "bestmove": (["bestmove", "--checkpoint", best, "--sims", "8"], "4\n"),
        "match": (["match", best, best, "--games", "2", "--sims", "4"], None),
        "gtp": (["gtp", "--game", "go9"], "genmove b\nquit\n"),
    }
    for backend in ("tensorflow", "jax"):
        if backend == "jax" and importlib.util.find_spec("jax") is None:
            unavailable("the jax backend is not installed (pip install 'tengen-zero[jax]')")
        for name, (args, stdin) in commands.items():
            shutil.rmtree(tmp_path / "run", ignore_errors=True)
            done, loaded = tengen_loading(tmp_path, *args, stdin=stdin, env={**os.environ, "KERAS_BACKEND": backend})
            assert done.returncode == 0, (backend, name, done.stderr[-2000:])
            assert "ray" not in loaded, (backend, name)
            if backend != "tensorflow":
                assert "tensorflow" not in loaded, (backend, name)


@pytest.mark.slow
def test_play_imports_neither_ray_nor_another_backend(connect4_run, tmp_path):
    # the page serves until SIGTERM; the probe records the modules once main returns
    from page_server import PageServer

    for backend in ("tensorflow", "jax"):
        if backend == "jax" and importlib.util.find_spec("jax") is None:
            unavailable("the jax backend is not installed (pip install 'tengen-zero[jax]')")
        probe = tmp_path / f"{backend}.json"
        page = PageServer("play", "--checkpoint", str(connect4_run / "best"), "--port", "0",
                          launcher=("-c", HEAVY_PROBE, str(probe)), env={**os.environ, "KERAS_BACKEND": backend})
        try:
            _, view = page.call("POST", "/api/games", {"person": 1})  # the model moves first
            status, view = page.call("POST", f"/api/games/{view['id']}/reply", {"simulations": 8})
            assert status == 200 and len(view["moves"]) == 1, (backend, view)
        finally:
            assert page.close() == 0, page.stderr()
        loaded = json.loads(probe.read_text())
        assert "ray" not in loaded, backend
        if backend != "tensorflow":
            assert "tensorflow" not in loaded, backend


def _stopped_run(tmp_path):
    """A run directory as a finished Ray run leaves it, with the connection file of its
    Redis, now gone."""
    from tengen.testing.run_files import stopped_run

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    files = stopped_run(tmp_path / "run", redis_url=f"redis://127.0.0.1:{port}/0", password="x")
    return files, files.run_id()


def test_status_and_scale_of_a_stopped_run_import_neither_tensorflow_nor_ray(tmp_path):
    from tengen.run.records import read_status

    files, run_id = _stopped_run(tmp_path)
    done, loaded = tengen_loading(tmp_path, "status", "--run-dir", str(files.path), "--json")
    assert done.returncode == 3, done.stderr  # stopped cleanly
    status = json.loads(done.stdout)
    last = read_status(files)
    assert status["run_id"] == run_id and status["live"] is False and status["state"] == "stopped"
    assert status["last_report"]["learner_step"] == last.learner_step and "components" not in status["last_report"]
    assert status["components"] == last.wiring["components"] and status["components"]["learner"]["restarts"] == 1
    # Not even numba or numpy: reading a directory needs none of the engine.
    assert loaded == [], loaded
    # With no Redis named at all, scale says the run is not running, at once.
    files.connection.unlink()
    done, loaded = tengen_loading(tmp_path, "scale", "--run-dir", str(files.path), "--workers", "3")
    assert done.returncode == 2 and "is not running" in done.stderr, done.stderr
    assert loaded == [], loaded


def test_status_refuses_a_record_it_does_not_read_and_names_it(tmp_path):
    files, _ = _stopped_run(tmp_path)
    files.ladder.write_text(json.dumps({"format": 2, "entries": []}))  # a newer tengen's
    done = tengen("status", "--run-dir", str(files.path))
    assert done.returncode == 2 and not done.stdout, done.stderr
    assert f"tengen status: {files.ladder}: a ladder of format 2, newer than this tengen reads" in done.stderr


def test_status_and_scale_of_a_live_run_import_neither_tensorflow_nor_ray(tmp_path, redis_server, redis_client):
    from tengen.cluster.registry import ModelRegistry
    from tengen.cluster.status_board import StatusBoard

    files, run_id = _stopped_run(tmp_path)
    files.write_private(files.connection, json.dumps({"url": redis_server.url, "password": redis_server.password,
                                                      "server": redis_server.binary.describe()}).encode())
    registry = ModelRegistry(redis_client, run_id)
    registry.publish(0, b"weights", {"step": 0})
    registry.promote(0, elo=0.0, result={"initial": True})
    board = StatusBoard(redis_client, run_id)
    board.set_status("worker:w000", {"games": 5})
    done, loaded = tengen_loading(tmp_path, "status", "--run-dir", str(files.path), "--json")
    assert done.returncode == 3, done.stderr  # its Redis answers, its driver is gone: stopped cleanly
    status = json.loads(done.stdout)
    assert status["live"] is True and status["best_version"] == 0 and status["workers_alive"] == ["w000"]
    assert status["redis_server"] == redis_server.binary.describe()  # which redis-server the run's Redis is
    # cluster.registry and cluster.stream load the engine (GameRecord), and with it numba.
    assert not {"tensorflow", "ray"} & set(loaded), loaded
    done, loaded = tengen_loading(tmp_path, "scale", "--run-dir", str(files.path), "--workers", "3")
    assert done.returncode == 0, done.stderr
    assert board.desired_workers() == 3
    assert not {"tensorflow", "ray"} & set(loaded), loaded
