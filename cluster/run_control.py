"""Reading and steering a run from outside it (`tengen status`, `tengen scale`).

A live run is reached through its Redis: for the embedded server, the run directory
holds the connection (``redis/connection.json``, owner-readable only); for an
external one, the same file (or the run's config) holds the URL and the password
is in ``TENGEN_REDIS_PASSWORD``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import redis
import yaml

from cluster.redis_client import RedisLike
from cluster.redis_server import connect
from cluster.transport import ModelRegistry, SampleStream, StatusBoard

__all__ = ["RunDirError", "check_run_dir", "read_status", "request_workers"]


class RunDirError(ValueError):
    """The run directory does not fit the request: a run is there without ``--resume``,
    or none is there with it."""


def check_run_dir(run_dir: Path, *, resume: bool) -> None:
    """A new run needs a directory that holds none (so that two runs never mix their
    checkpoints and streams); ``resume`` needs one that holds one."""
    exists = (Path(run_dir) / "config.yaml").exists()
    if exists and not resume:
        raise RunDirError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another --run-dir")
    if resume and not exists:
        raise RunDirError(f"{run_dir} holds no run to resume (no config.yaml)")


def _run_id(run_dir: Path) -> str:
    from cluster.driver import run_id_for

    return run_id_for(run_dir)


def _client(run_dir: Path) -> RedisLike | None:
    """A client of the run's Redis if the run is alive, else None."""
    connection = run_dir / "redis" / "connection.json"
    try:
        if connection.exists():
            info = json.loads(connection.read_text())
            # An external Redis's password is not written down: connect() takes it from
            # TENGEN_REDIS_PASSWORD, as the run did.
            client = connect(info["url"], password=info.get("password"), socket_connect_timeout=1)
        else:
            config = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
            url = (config.get("redis") or {}).get("url")
            if not url:
                return None
            client = connect(url, password=os.environ.get("TENGEN_REDIS_PASSWORD"), socket_connect_timeout=1)
        client.ping()
        return client
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return None


def read_status(run_dir: Path) -> dict:
    """What a run is doing or did: live from Redis, else from ``status.json``."""
    if not (run_dir / "config.yaml").exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    status: dict = {"run_dir": str(run_dir), "live": False}
    saved = run_dir / "status.json"
    if saved.exists():
        status["last_report"] = json.loads(saved.read_text())
    ladder = run_dir / "ladder.json"
    if ladder.exists():
        status["ladder"] = json.loads(ladder.read_text())
    client = _client(run_dir)
    if client is not None:
        run_id = _run_id(run_dir)
        board = StatusBoard(client, run_id).get_status()
        registry = ModelRegistry(client, run_id)
        status.update({
            "live": True,
            "best_version": registry.best_version(),
            "ladder": registry.ladder(),
            "stream_length": SampleStream(client, run_id, maxlen=1).length(),
            "workers_alive": sorted(k.split(":", 1)[1] for k in board if k.startswith("worker:")),
            "components": board,
        })
    return status


def request_workers(run_dir: Path, workers: int) -> None:
    """Ask a live run's driver for ``workers`` self-play workers."""
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    client = _client(run_dir)
    if client is None:
        raise ConnectionError(f"the run in {run_dir} is not running (its Redis does not answer)")
    StatusBoard(client, _run_id(run_dir)).request_workers(workers)
