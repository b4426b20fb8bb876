"""A real ``tengen play`` for the tests: a tiny untrained checkpoint written like a
run's ``best/`` directory, and the server started as the command a person runs
(tests/page_server.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml
from page_server import ROOT, PageServer

__all__ = ["ROOT", "PlayServer", "write_checkpoint"]


def write_checkpoint(directory: Path, game: dict[str, Any], *, simulations: int = 32, leaves_per_round: int = 4,
                     gating: dict[str, Any] | None = None, network: dict[str, Any] | None = None,
                     mcts: dict[str, Any] | None = None) -> Path:
    """``directory`` as a run's ``best/``: ``config.yaml`` and ``model.safetensors`` of
    a fresh 1-block, 8-filter network for ``game`` (a config's ``game`` section; more of
    the ``network`` section in ``network``, e.g. the ownership head; more of ``mcts`` in
    ``mcts``), with that search
    and ``gating`` section. A child process builds it, so the test process never
    imports TensorFlow."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(yaml.safe_dump({
        "game": game,
        "network": {"blocks": 1, "filters": 8, **(network or {})},
        "mcts": {"simulations": simulations, "leaves_per_round": leaves_per_round, **(mcts or {})},
        **({"gating": gating} if gating else {}),
    }))
    script = textwrap.dedent(f"""
        from tengen.run.checkpoint import build_model
        from tengen.run.config import load_config
        from tengen.engine.network import save_weights_file
        save_weights_file(build_model(load_config({str(config)!r})), {str(directory / "model.safetensors")!r},
                          metadata={{"version": "000000"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return directory


class PlayServer(PageServer):
    """``tengen play --checkpoint DIR --port 0 [args]`` as a child process."""

    def __init__(self, checkpoint: Path, *args: str, env: dict[str, str] | None = None):
        super().__init__("play", "--checkpoint", str(checkpoint), "--port", "0", *args, env=env)
