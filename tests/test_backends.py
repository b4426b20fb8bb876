"""The network on TensorFlow, JAX and PyTorch (engine/backend.py): one set of weights
for all three, learner checkpoints that stay on their backend unless converted, and a
clear stop for a backend that is not installed. Each backend runs in its own process
(tests/backend_probe.py): Keras picks its backend once per process."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from unavailable import unavailable

from tengen.engine import backend as backends
from tengen.engine.backend import BACKENDS, BackendUnavailable, use_backend
from tengen.run.config import load_config

PROBE = Path(__file__).with_name("backend_probe.py")
TENGEN = [sys.executable, "-m", "tengen.cli"]


def installed() -> list[str]:
    missing = [name for name in BACKENDS if importlib.util.find_spec(name) is None]
    if missing:
        unavailable(f"the {', '.join(missing)} backend{'s' if len(missing) > 1 else ''} not installed "
                    "(pip install 'tengen-zero[jax,torch]')")
    return list(BACKENDS)


def probe(backend: str, folder: Path, mode: str) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, str(PROBE), backend, str(folder), mode], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """Each backend's weights, checkpoint and answers after three steps of its own."""
    folder = tmp_path_factory.mktemp("backends")
    for backend in installed():
        losses = probe(backend, folder, "train")["losses"]
        assert losses[-1] < losses[0], (backend, losses)  # it trains, on every backend
    return folder


@pytest.mark.slow
def test_weights_trained_on_one_backend_answer_alike_on_every_other(trained):
    for backend in BACKENDS:
        report = probe(backend, trained, "load")
        assert set(report) == set(BACKENDS)
        for source, seen in report.items():
            # float32 convolutions summed in another order: the same answers to ~1e-6
            assert seen["policy"] < 1e-4 and seen["value"] < 1e-4, (backend, source, seen)
            if source == backend:
                assert seen["refused"] is None and seen["step"] == 3
            else:  # the optimizer's state is its backend's: resumed there, or converted
                assert f"written by a learner on {source}" in seen["refused"], seen
                assert f"tengen checkpoint-convert RUN_DIR --backend {backend}" in seen["refused"]
                assert seen["step"] == 0  # nothing was restored


@pytest.mark.slow
def test_a_converted_checkpoint_resumes_on_its_new_backend(trained, tmp_path):
    run = tmp_path / "run"
    (run / "learner").mkdir(parents=True)
    (run / "config.yaml").write_text(load_config("tictactoe").to_yaml())
    (run / "learner" / "learner.ckpt").write_bytes((trained / "tensorflow.ckpt").read_bytes())

    done = subprocess.run([*TENGEN, "checkpoint-convert", str(run), "--backend", "jax"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "learner.ckpt converted to jax; config.yaml says network.backend: jax"
    assert yaml.safe_load((run / "config.yaml").read_text())["network"]["backend"] == "jax"

    # the jax probe now restores it as its own (step 3, nothing refused)
    converted = tmp_path / "converted"
    converted.mkdir()
    for suffix in ("weights", "npz"):
        (converted / f"jax.{suffix}").write_bytes((trained / f"jax.{suffix}").read_bytes())
    (converted / "jax.ckpt").write_bytes((run / "learner" / "learner.ckpt").read_bytes())
    restored = probe("jax", converted, "load")["jax"]
    assert restored["refused"] is None and restored["step"] == 3


def test_a_run_directory_without_a_checkpoint_is_said_so(tmp_path):
    (tmp_path / "config.yaml").write_text(load_config("tictactoe").to_yaml())
    done = subprocess.run([*TENGEN, "checkpoint-convert", str(tmp_path), "--backend", "tensorflow"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "no learner checkpoint in" in done.stderr


def test_a_backend_that_is_not_installed_stops_with_the_command_that_installs_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: None if name == "jax" else real(name))
    with pytest.raises(BackendUnavailable, match=r"the jax backend is not installed: pip install 'tengen-zero\[jax\]'"):
        use_backend("jax")
    with pytest.raises(BackendUnavailable, match="unknown network backend 'mxnet'; choose one of tensorflow, jax"):
        use_backend("mxnet")


def test_train_with_a_backend_that_is_not_installed_stops_before_anything_starts(monkeypatch, tmp_path, capsys):
    from tengen.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: None if name == "torch" else real(name))
    code = main(["train", "tictactoe", "--single-process", "--run-dir", str(tmp_path / "run"),
                 "--set", "network.backend=torch"])
    assert code == 2
    assert "the torch backend is not installed: pip install 'tengen-zero[torch]'" in capsys.readouterr().err


def test_a_backend_the_schema_does_not_know_is_a_config_error():
    from tengen.run.config import ConfigError

    assert load_config("tictactoe").with_changes({"network.backend": "torch"}).network_spec().backend == "torch"
    with pytest.raises(ConfigError, match="network.backend"):
        load_config("tictactoe").with_changes({"network.backend": "mxnet"})


def test_resuming_a_run_on_another_backend_asks_for_the_conversion_first(tmp_path, capsys):
    from tengen.cli import main

    (tmp_path / "config.yaml").write_text(load_config("tictactoe").with_changes({"network.backend": "jax"}).to_yaml())
    code = main(["train", "--resume", "--run-dir", str(tmp_path), "--set", "network.backend=tensorflow"])
    assert code == 2
    assert (f"the run's learner checkpoints are jax's: tengen checkpoint-convert {tmp_path} --backend tensorflow, "
            "then resume") in capsys.readouterr().err
