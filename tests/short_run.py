"""A short real training run for the pages that show runs: tic-tac-toe with
``tengen train --single-process``, as a person starts it, under a minute and a half
of CPU on two cores (most of it compiling the search kernels).

Gating ``threshold`` at 0.05 promotes any candidate that is not swept, so the ladder
gets points; every fifth game is kept in ``games/``; the run stops after 1000
learner steps (two minutes at most), long enough for a few status lines with a loss.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = {
    "game": {"name": "tictactoe"},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 8, "leaves_per_round": 4},
    "selfplay": {"games_in_flight": 16, "temperature_moves": 4},
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 100, "replay_window": 5000},
    "gating": {"rule": "threshold", "threshold": 0.05, "games": 4, "games_in_flight": 4},
    "run": {"keep_game_every": 5, "keep_games_max": 50},
    "stop": {"steps": 1000, "minutes": 2},
    "seed": 3,
}


def short_run(base: Path) -> Path:
    """Train into ``base/run`` and return it."""
    config = base / "ttt.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    run_dir = base / "run"
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "train", str(config), "--single-process",
                           "--run-dir", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return run_dir
