"""A run that cannot start says so in one line, with what to do, and exits 2: a Redis
that does not answer or refuses the password, an embedded Redis whose append-only file
is damaged (and ``tengen repair-aof``, which mends it). Real processes, a real Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tengen.cluster.redis_binary import AOF_DIR, AOF_FILE
from tengen.cluster.redis_server import DamagedAofError, EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent


def tengen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tengen.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, **(env or {})})


def ttt_config(path: Path, **redis: object) -> Path:
    path.write_text(yaml.safe_dump({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
                                    "redis": redis, "stop": {"steps": 4}}))
    return path


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("tengen train:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_a_redis_that_does_not_answer_stops_the_start_with_what_to_do(tmp_path):
    config = ttt_config(tmp_path / "config.yaml", outage_s=3)
    done = tengen("train", str(config), "--redis", "redis://127.0.0.1:1/0", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert "cannot reach the Redis at redis://127.0.0.1:1/0 within 3 s" in line
    assert "start it, correct --redis (redis.url), or leave both out" in line


def test_a_redis_that_refuses_the_password_stops_the_start(tmp_path):
    with EmbeddedRedis(data_dir=tmp_path / "theirs") as server:
        config = ttt_config(tmp_path / "config.yaml", outage_s=3)
        done = tengen("train", str(config), "--redis", server.url, "--run-dir", str(tmp_path / "run"),
                      env={"TENGEN_REDIS_PASSWORD": "not-their-password"})
    assert done.returncode == 2
    assert f"the Redis at {server.url} refused tengen" in one_line(done.stderr)
    assert "set $TENGEN_REDIS_PASSWORD" in done.stderr


def damage(data_dir: Path) -> None:
    """Break the command in the middle of the AOF (as a disk that lost a write would)."""
    files = sorted((data_dir / AOF_DIR).glob("*.incr.aof")) if (data_dir / AOF_DIR).is_dir() else []
    aof = files[-1] if files else data_dir / AOF_FILE
    data = bytearray(aof.read_bytes())
    middle = data.index(b"*3\r\n$3\r\nSET", len(data) // 2)
    data[middle:middle + 2] = b"*X"
    aof.write_bytes(bytes(data))


@pytest.mark.slow
@pytest.mark.usefixtures("each_redis_kind")
def test_a_damaged_aof_is_named_at_the_start_and_repair_aof_mends_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    ttt_config(run / "config.yaml")
    with EmbeddedRedis(data_dir=run / "redis") as server:
        client = server.client()
        client.config_set("appendfsync", "always")
        for n in range(200):
            client.set(f"key{n}", "x" * 50)
        client.close()
    damage(run / "redis")
    with pytest.raises(DamagedAofError, match="Bad file format"):
        EmbeddedRedis(data_dir=run / "redis").start()

    done = tengen("train", "--resume", "--run-dir", str(run))
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert "the run's Redis cannot load its append-only file" in line and "Bad file format" in line
    assert f"tengen repair-aof --run-dir {run}" in line

    repaired = tengen("repair-aof", "--run-dir", str(run))
    assert repaired.returncode == 0, repaired.stderr
    assert "kept the damaged file as" in repaired.stdout and "now resume" in repaired.stdout
    assert list((run / "redis").glob("*.damaged-*"))
    with EmbeddedRedis(data_dir=run / "redis") as server:  # it loads: the keys before the damage are there
        client = server.client()
        kept = client.dbsize()
        assert 50 <= kept < 200 and client.get("key0") == b"x" * 50
        client.close()
