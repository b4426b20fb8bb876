"""A tengen 9x9 model in KaTrain: KaTrain's own engine and game classes (its package,
in a virtual environment of its own under .cache/, tests/katrain_driver.py) start
`tengen analysis` as their KataGo command, analyse a game, and read every node's
score, winrate, candidate moves and ownership from what it answers."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from play_server import write_checkpoint
from unavailable import unavailable

from tengen.testing.debian import CACHE

pytestmark = pytest.mark.slow  # KaTrain fetched, a model loaded
ROOT = Path(__file__).resolve().parent.parent
KATRAIN = "katrain==1.20.0"


def katrain_python() -> Path:
    """The Python of .cache/katrain, a virtual environment holding KaTrain (made once)."""
    venv = CACHE / "katrain"
    python = venv / "bin" / "python"
    if not (venv / "ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", KATRAIN], capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:
            unavailable(f"pip install {KATRAIN} failed: {done.stderr[-1000:]}")
        (venv / "ready").write_text(KATRAIN + "\n")
    return python


def katrain_analyses(checkpoint: Path, sgf: str, cwd: Path) -> dict:
    """What KaTrain's engine and game classes saw analysing ``sgf`` with ``tengen analysis``
    over ``checkpoint`` as their KataGo command (tests/katrain_driver.py's report)."""
    command = shlex.join([sys.executable, "-m", "tengen.cli", "analysis", "--checkpoint", str(checkpoint)])
    done = subprocess.run([str(katrain_python()), str(ROOT / "tests" / "katrain_driver.py"),
                           f"cd {ROOT} && exec {command}", sgf], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_katrain_analyses_a_game_with_a_tengen_9x9_model(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "best", {"name": "go", "size": 9, "komi": 7.5}, simulations=16,
                                  network={"ownership": True})
    seen = katrain_analyses(checkpoint, "(;GM[1]FF[4]SZ[9]KM[7.5]RU[Chinese];B[ee];W[cc];B[gg];W[gc])", tmp_path)
    assert seen["errors"] == [] and len(seen["nodes"]) == 5
    for node in seen["nodes"]:
        assert node["complete"], node
        assert 0 <= node["winrate"] <= 1 and isinstance(node["score"], float)
        # the score KaTrain shows is the ownership's area count less komi (Black's view)
        assert node["score"] == pytest.approx(sum(node["ownership"]) - 7.5, abs=1e-3)
        assert len(node["ownership"]) == 81 and len(node["policy"]) == 82
        assert node["candidates"] and sum(visits for _, visits, _ in node["candidates"]) >= 39


def test_katrain_shows_the_score_head_s_score_of_a_model_that_has_one(tmp_path):
    # a model of a run with KataGo's inputs and its score head: the score KaTrain shows is the head's
    checkpoint = write_checkpoint(tmp_path / "best", {"name": "go", "size": 9, "komi": 7.5, "features": True},
                                  simulations=16, network={"ownership": True, "score": True})
    seen = katrain_analyses(checkpoint, "(;GM[1]FF[4]SZ[9]KM[7.5]RU[Chinese];B[ee];W[cc])", tmp_path)
    assert seen["errors"] == [] and len(seen["nodes"]) == 3
    for node in seen["nodes"]:
        assert node["complete"] and isinstance(node["score"], float) and len(node["ownership"]) == 81, node
        # not the ownership's count: an untrained head and an untrained ownership head disagree
        assert abs(node["score"] - (sum(node["ownership"]) - 7.5)) > 1e-3, node
