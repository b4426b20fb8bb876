"""A real ``tengen play`` for the tests: a tiny untrained checkpoint written like a
run's ``best/`` directory, the server started as the command a person runs, its URL
read from its first line, and a JSON client over urllib."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: seconds for the server to load TensorFlow and the model and print its URL
START_TIMEOUT = 240


def write_checkpoint(directory: Path, game: dict[str, Any], *, simulations: int = 32, leaves_per_round: int = 4,
                     gating: dict[str, Any] | None = None) -> Path:
    """``directory`` as a run's ``best/``: ``config.yaml`` and ``model.safetensors`` of
    a fresh 1-block, 8-filter network for ``game`` (a config's ``game`` section), with
    that search and ``gating`` section. A child process builds it, so the test process
    never imports TensorFlow."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(yaml.safe_dump({
        "game": game,
        "network": {"blocks": 1, "filters": 8},
        "mcts": {"simulations": simulations, "leaves_per_round": leaves_per_round},
        **({"gating": gating} if gating else {}),
    }))
    script = textwrap.dedent(f"""
        from tengen.cluster.checkpoint import build_model
        from tengen.cluster.config import load_config
        from tengen.engine.network import save_weights_file
        save_weights_file(build_model(load_config({str(config)!r})), {str(directory / "model.safetensors")!r},
                          metadata={{"version": "000000"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return directory


class PlayServer:
    """``tengen play --checkpoint DIR --port 0 [args]`` as a child process; ``url``
    is what it printed first. ``close()`` stops it with SIGTERM and checks that it
    stopped cleanly."""

    def __init__(self, checkpoint: Path, *args: str, env: dict[str, str] | None = None):
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tengen.cluster.cli", "play", "--checkpoint", str(checkpoint), "--port", "0",
             *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env or os.environ.copy())
        assert self.process.stdout is not None
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        if not first or not first[0]:
            self.process.kill()
            raise AssertionError(f"tengen play printed no URL within {START_TIMEOUT} s:\n{self.stderr()}")
        self.url = first[0].strip()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self._stderr.close()
        return code

    # -- the JSON API ----------------------------------------------------------------------
    def call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
             timeout: float = 120) -> tuple[int, Any]:
        """(status, decoded JSON) of one request; errors are answers too."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get_text(self, path: str) -> tuple[int, str, dict[str, str]]:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
