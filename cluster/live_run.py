"""A run's Redis, reached from outside the run (`tengen status`, `tengen scale`,
`tengen games`, `tengen serve`), through what its run directory records.

For the embedded server, the run directory holds the connection
(``redis/connection.json``, owner-readable only); for an external one, the same file
(or the run's config) holds the URL and the password is in ``TENGEN_REDIS_PASSWORD``
(or the file ``TENGEN_REDIS_PASSWORD_FILE`` names). Nothing here imports TensorFlow or
Ray.
"""

from __future__ import annotations

import json

import redis
import yaml

from tengen.cluster.redis_client import DEFAULT_POLICY, OutagePolicy, RedisLike
from tengen.cluster.redis_server import connect
from tengen.run.run_dir import RunDir

__all__ = ["live_client", "outage_s", "recorded_server"]


def outage_s(files: RunDir) -> float:
    """The run's ``redis.outage_s``: how long its own clients wait through an outage."""
    try:
        config = yaml.safe_load(files.config.read_text()) or {}
        return float((config.get("redis") or {}).get("outage_s") or DEFAULT_POLICY.outage_s)
    except (OSError, yaml.YAMLError, TypeError, ValueError):
        return DEFAULT_POLICY.outage_s


def recorded_server(files: RunDir) -> str | None:
    """Which redis-server the run's embedded Redis runs on, as its driver recorded it
    (None: an external Redis, or a run from before it was recorded)."""
    try:
        return json.loads(files.connection.read_text()).get("server")
    except (OSError, ValueError, AttributeError):
        return None


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
