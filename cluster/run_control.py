"""Reading and steering a run from outside it (`tengen status`, `tengen scale`).

A live run is reached through its Redis: for the embedded server, the run directory
holds the connection (``redis/connection.json``, owner-readable only); for an
external one, the same file (or the run's config) holds the URL and the password
is in ``TENGEN_REDIS_PASSWORD`` (or the file ``TENGEN_REDIS_PASSWORD_FILE`` names).
Neither command imports TensorFlow or Ray.

``tengen status`` waits a few seconds at most for Redis and then reports from the run
directory (a stopped run, or Redis away); ``tengen scale`` waits through an outage as
the run's own clients do (``redis.outage_s``), since its request must reach the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
import yaml

from tengen.cluster.redis_client import OutagePolicy, RedisLike, RedisUnavailable
from tengen.cluster.redis_server import connect
from tengen.cluster.run_dir import RunDir, RunDirError

# The registry and stream modules are imported where a live Redis answers: they load
# the engine (numba, for GameRecord), which a run directory's status does not need.

__all__ = ["RunDirError", "check_run_dir", "live_client", "read_status", "request_workers", "STATUS_WAIT_S"]

#: how long `tengen status` waits for a live run's Redis before it reads the directory
STATUS_WAIT_S = 3.0


def check_run_dir(run_dir: Path, *, resume: bool) -> None:
    """A new run needs a directory that holds none; ``resume`` needs one that does."""
    RunDir(run_dir).check(resume=resume)


def _outage_s(files: RunDir) -> float:
    try:
        config = yaml.safe_load(files.config.read_text()) or {}
        return float((config.get("redis") or {}).get("outage_s") or 120.0)
    except (OSError, yaml.YAMLError, TypeError, ValueError):
        return 120.0


def live_client(files: RunDir, *, wait_s: float) -> RedisLike | None:
    """A client of the run's Redis if it answers within ``wait_s``, else None."""
    policy = OutagePolicy(outage_s=wait_s, connect_timeout_s=min(5.0, wait_s))
    try:
        if files.connection.exists():
            info = json.loads(files.connection.read_text())
            # An external Redis's password is not written down: connect() takes it from
            # the environment, as the run did.
            client = connect(info["url"], password=info.get("password"), policy=policy)
        else:
            config = yaml.safe_load(files.config.read_text()) or {}
            url = (config.get("redis") or {}).get("url")
            if not url:
                return None
            client = connect(url, policy=policy)
        client.ping()
        return client
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return None  # RedisUnavailable is a ConnectionError


def read_status(run_dir: Path) -> dict:
    """What a run is doing or did: live from Redis, else from ``status.json``."""
    files = RunDir(run_dir)
    if not files.holds_run():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    status: dict = {"run_dir": str(run_dir), "run_id": files.run_id(), "live": False}
    if files.status.exists():
        status["last_report"] = json.loads(files.status.read_text())
        status["components"] = status["last_report"].get("components", {})
    if files.ladder.exists():
        status["ladder"] = json.loads(files.ladder.read_text())
    client = live_client(files, wait_s=STATUS_WAIT_S)
    if client is not None:
        from tengen.cluster.registry import ModelRegistry
        from tengen.cluster.status_board import StatusBoard, memory_by_part
        from tengen.cluster.stream import SampleStream

        run_id = files.run_id()
        try:
            board = StatusBoard(client, run_id).get_status()
            registry = ModelRegistry(client, run_id)
            status.update({
                "live": True,
                "best_version": registry.best_version(),
                "ladder": registry.ladder(),
                "stream_length": SampleStream(client, run_id, maxlen=1).length(),
                "workers_alive": sorted(k.split(":", 1)[1] for k in board if k.startswith("worker:")),
                "redis_memory": memory_by_part(client, run_id),
                "components": {**status.get("components", {}), **board},
            })
        except RedisUnavailable:
            status["live"] = False  # it went away while we read: what the directory says stands
    return status


def request_workers(run_dir: Path, workers: int) -> None:
    """Ask a live run's driver for ``workers`` self-play workers."""
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    files = RunDir(run_dir)
    if not files.holds_run():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    client = live_client(files, wait_s=_outage_s(files))
    if client is None:
        raise ConnectionError(f"the run in {run_dir} is not running (its Redis does not answer)")
    from tengen.cluster.status_board import StatusBoard

    StatusBoard(client, files.run_id()).request_workers(workers)
