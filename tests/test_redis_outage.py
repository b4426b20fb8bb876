"""The run's Redis clients ride out real outages of the real server: killed with
SIGKILL and restarted on its AOF, loading its data set, refusing writes when full;
and they stop, with a message that says so, once an outage lasts past its limit."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tengen.cluster.redis_client import OutagePolicy, RedisUnavailable
from tengen.cluster.redis_server import EmbeddedRedis, connect, redis_executable

QUICK = OutagePolicy(outage_s=30.0, backoff_base_s=0.01, backoff_cap_s=0.2, socket_timeout_s=2.0,
                     connect_timeout_s=1.0)


@pytest.fixture
def server(tmp_path):
    with EmbeddedRedis(data_dir=tmp_path / "redis") as s:
        yield s


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    """Run ``fn`` in a thread; its result or error lands in the returned dict."""
    out: dict = {}

    def run():
        started = time.monotonic()
        try:
            out["result"] = fn()
        except Exception as e:
            out["error"] = e
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _outage(server: EmbeddedRedis, fn, *, down_s: float) -> dict:
    """SIGKILL the server, call ``fn`` while it is down, restart the server on its port
    and AOF ``down_s`` later (from this thread: the kernel stops a server whose starting
    thread exits), and return what ``fn`` gave."""
    server._kill()
    thread, out = _in_thread(fn)
    time.sleep(down_s)
    server.restart()
    thread.join(timeout=60)
    return out


def test_a_command_waits_through_a_restart_and_logs_the_outage_once(server):
    lines: list[str] = []
    client = connect(server.url, password=server.password, policy=QUICK, log=lines.append)
    client.set("tengen:{t}:before", "kept")
    time.sleep(1.1)  # appendfsync everysec: the write is on disk
    # Issued while nothing listens: retried with backoff until the server is back.
    out = _outage(server, lambda: client.get("tengen:{t}:before"), down_s=1.5)
    assert out["result"] == b"kept" and out["seconds"] >= 1.0
    assert client.outage_seconds == 0.0
    assert len(lines) == 2, lines
    assert "unreachable" in lines[0] and "retrying" in lines[0]
    assert "answering again after" in lines[1]


def test_a_pipeline_is_replayed_whole_after_a_restart(server):
    client = connect(server.url, password=server.password, policy=QUICK)
    pipe = client.pipeline(transaction=True)
    pipe.set("tengen:{t}:a", 1)
    pipe.incr("tengen:{t}:a")
    assert _outage(server, pipe.execute, down_s=1.0)["result"] == [True, 2]
    assert client.get("tengen:{t}:a") == b"2"


def test_past_outage_s_every_command_fails_at_once_with_the_reason(server):
    policy = OutagePolicy(outage_s=1.0, backoff_base_s=0.01, backoff_cap_s=0.1, connect_timeout_s=0.5)
    client = connect(server.url, password=server.password, policy=policy)
    client.ping()
    server._kill()
    started = time.monotonic()
    with pytest.raises(RedisUnavailable, match=r"unreachable for 1 s \(redis.outage_s is 1\)") as caught:
        client.ping()
    assert caught.value.expired and not caught.value.out_of_memory
    assert 1.0 <= time.monotonic() - started < 5.0
    started = time.monotonic()
    with pytest.raises(RedisUnavailable):
        client.get("x")
    assert time.monotonic() - started < 1.5  # one attempt, no more waiting


def test_a_worker_style_call_tries_once_and_says_so(server):
    client = connect(server.url, password=server.password, policy=QUICK)
    server._kill()
    with pytest.raises(RedisUnavailable) as caught:
        client.call(lambda c: c.ping(), wait=False)
    assert not caught.value.expired  # a transient failure: the caller buffers and goes on


def test_the_drivers_call_gives_none_while_redis_is_away_and_stops_past_the_limit(server):
    policy = OutagePolicy(outage_s=1.0, backoff_base_s=0.01, backoff_cap_s=0.1, connect_timeout_s=0.5)
    client = connect(server.url, password=server.password, policy=policy)
    assert client.try_once(client.ping) is True
    server._kill()
    # Tried once: a waiting call would end in RedisUnavailable, never in None.
    assert client.try_once(client.ping) is None
    time.sleep(1.1)
    with pytest.raises(RedisUnavailable) as caught:
        client.try_once(client.ping)
    assert caught.value.expired  # the driver's loop stops the run on it


def test_loading_an_aof_is_waited_for(tmp_path):
    # A plain-command AOF (no RDB preamble, which Redis 6.2 loads without answering
    # anyone) of 500,000 keys: the restarted server answers LOADING for about a
    # second, as a run's big AOF does.
    server = EmbeddedRedis(data_dir=tmp_path / "redis", extra_config=["aof-use-rdb-preamble no"]).start()
    try:
        raw = server.client()
        raw.execute_command("DEBUG", "POPULATE", 500_000, "tengen:{t}:k", 10)
        raw.bgrewriteaof()  # POPULATE bypasses the AOF: rewrite it from memory
        time.sleep(0.2)
        while raw.info("persistence")["aof_rewrite_in_progress"]:
            time.sleep(0.05)
        lines: list[str] = []
        client = connect(server.url, password=server.password, policy=QUICK, log=lines.append)
        server._kill()
        server._requested_port = server.port
        server._spawn(server._executable or redis_executable(), server.port)  # no waiting for PING
        out = _in_thread(lambda: client.get("tengen:{t}:k:499999"))
        out[0].join(timeout=60)
        assert out[1]["result"].startswith(b"value:4999")  # values cut to 10 bytes
        # Refused until it listens, then LOADING until the data is in: waited through both.
        assert isinstance(client.last_error, redis.exceptions.BusyLoadingError), client.last_error
        assert len(lines) == 2 and "answering again" in lines[1], lines
    finally:
        server.stop()


def test_a_full_redis_is_waited_for_and_reported_as_full(server):
    raw = server.client()
    raw.config_set("maxmemory", raw.info("memory")["used_memory"] + 200_000)
    lines: list[str] = []
    client = connect(server.url, password=server.password, policy=QUICK, log=lines.append)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for i in range(1000):  # fill it up with the plain client
            raw.set(f"tengen:{{t}}:fill:{i}", b"x" * 10_000)

    # Someone frees memory (the registry prunes old blobs) a second later.
    def free():
        time.sleep(1.0)
        raw.config_set("maxmemory", 0)

    freer = threading.Thread(target=free)
    freer.start()
    client.set("tengen:{t}:after", b"y" * 10_000)
    freer.join()
    assert "out of memory" in lines[0] and "answering again" in lines[1]

    raw.config_set("maxmemory", raw.info("memory")["used_memory"] + 1000)
    short = connect(server.url, password=server.password,
                    policy=OutagePolicy(outage_s=0.5, backoff_base_s=0.01, backoff_cap_s=0.1))
    with pytest.raises(RedisUnavailable, match="full for") as caught:
        short.set("tengen:{t}:more", b"z" * 100_000)
    assert caught.value.out_of_memory and caught.value.expired


def test_a_wrong_password_is_not_an_outage(server):
    client = connect(server.url, password="not-the-password", policy=QUICK)
    started = time.monotonic()
    with pytest.raises(redis.AuthenticationError):
        client.ping()
    assert time.monotonic() - started < 1.0
