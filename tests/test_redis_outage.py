"""The run's Redis clients ride out real outages of the real server: killed with
SIGKILL and restarted on its AOF, loading its data set, refusing writes when full;
and they stop, with a message that says so, once an outage lasts past its limit.

The server's faults are real; the time an outage lasts is the client's clock's, which
the tests that check its limit move themselves (tests/fake_clock.py): they assert
what the client did (how it waited, when it gave up), never how long the machine took.
A fault is undone once the client is seen waiting on it, not after a guessed sleep."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest
import redis
from fake_clock import FakeClock

from tengen.cluster.redis_client import OutagePolicy, RedisUnavailable, ResilientRedis
from tengen.cluster.redis_server import EmbeddedRedis, connect
from tengen.testing.waiting import wait_for

QUICK = OutagePolicy(outage_s=30.0, backoff_base_s=0.01, backoff_cap_s=0.2, socket_timeout_s=2.0,
                     connect_timeout_s=1.0)
#: how long a real server may take to do what a test waits for (a shared, slow machine)
PATIENCE_S = 60


@pytest.fixture
def server(tmp_path, each_redis_kind):
    with EmbeddedRedis(data_dir=tmp_path / "redis") as s:
        yield s


def _on_clock(server: EmbeddedRedis, policy: OutagePolicy, clock: FakeClock, **kwargs) -> ResilientRedis:
    """A client of ``server`` as ``connect`` makes it, whose outages are measured and
    waited out on ``clock``."""
    raw = connect(server.url, password=server.password, policy=policy).raw
    return ResilientRedis(raw, policy=policy, clock=clock, sleep=clock.sleep, rng=random.Random(0), **kwargs)


def _until(condition: Callable[[], object], what: str) -> None:
    wait_for(condition, timeout_s=PATIENCE_S, every_s=0.01, what=what)


def _on_disk(raw: redis.Redis) -> None:
    """The server's AOF rewritten from memory and synced to disk, so that what it holds
    outlives a SIGKILL (appendfsync everysec alone gives no moment to wait for)."""
    raw.bgrewriteaof()
    _until(lambda: not any(raw.info("persistence")[k] for k in ("aof_rewrite_in_progress",
                                                                 "aof_rewrite_scheduled")),
           "the AOF rewritten")


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    """Run ``fn`` in a thread; its result or error lands in the returned dict."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except Exception as e:
            out["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _outage(server: EmbeddedRedis, client: ResilientRedis, fn) -> dict:
    """SIGKILL the server, call ``fn`` while it is down, restart the server on its port
    and AOF once ``client`` has failed and waits (from this thread: the kernel stops a
    server whose starting thread exits), and return what ``fn`` gave."""
    assert client.last_error is None
    server._kill()
    thread, out = _in_thread(fn)
    _until(lambda: client.last_error is not None or not thread.is_alive(), "the command failing on the dead server")
    server.restart()
    thread.join(timeout=PATIENCE_S)
    return out


def test_a_command_waits_through_a_restart_and_logs_the_outage_once(server):
    lines: list[str] = []
    client = connect(server.url, password=server.password, policy=QUICK, log=lines.append)
    client.set("tengen:{t}:before", "kept")
    _on_disk(server.client())
    # Issued while nothing listens: retried with backoff until the server is back.
    out = _outage(server, client, lambda: client.get("tengen:{t}:before"))
    assert out["result"] == b"kept", out
    assert isinstance(client.last_error, redis.ConnectionError)  # it failed, then waited
    assert client.outage_seconds == 0.0
    assert len(lines) == 2, lines
    assert "unreachable" in lines[0] and "retrying" in lines[0]
    assert "answering again after" in lines[1]


def test_a_pipeline_is_replayed_whole_after_a_restart(server):
    client = connect(server.url, password=server.password, policy=QUICK)
    pipe = client.pipeline(transaction=True)
    pipe.set("tengen:{t}:a", 1)
    pipe.incr("tengen:{t}:a")
    assert _outage(server, client, pipe.execute)["result"] == [True, 2]
    assert client.get("tengen:{t}:a") == b"2"


def test_past_outage_s_every_command_fails_at_once_with_the_reason(server):
    clock = FakeClock()
    policy = OutagePolicy(outage_s=1.0, backoff_base_s=0.01, backoff_cap_s=0.1, connect_timeout_s=0.5)
    client = _on_clock(server, policy, clock)
    client.ping()
    server._kill()
    with pytest.raises(RedisUnavailable, match=r"unreachable for 1 s \(redis.outage_s is 1\)") as caught:
        client.ping()
    assert caught.value.expired and not caught.value.out_of_memory
    # Backoff with jitter, each pause under the cap, the last cut to the limit: the
    # command waited out exactly outage_s on its clock, then gave up.
    waits = len(clock.sleeps)
    assert waits > 10 and all(0 <= s <= 0.1 for s in clock.sleeps), clock.sleeps
    assert sum(clock.sleeps) == pytest.approx(1.0) and caught.value.seconds == pytest.approx(1.0)
    with pytest.raises(RedisUnavailable, match="unreachable for 1 s") as again:
        client.get("x")
    assert again.value.expired and len(clock.sleeps) == waits  # one attempt, no more waiting


def test_a_worker_style_call_tries_once_and_says_so(server):
    clock = FakeClock()
    client = _on_clock(server, QUICK, clock)
    server._kill()
    with pytest.raises(RedisUnavailable) as caught:
        client.call(lambda c: c.ping(), wait=False)
    assert not caught.value.expired  # a transient failure: the caller buffers and goes on
    assert clock.sleeps == []  # and did not wait


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


def test_loading_an_aof_is_waited_for(tmp_path, each_redis_kind):
    # A plain-command AOF (no RDB preamble, which Redis 6.2 loads without answering
    # anyone) of 500,000 keys: the restarted server answers LOADING for about a
    # second, as a run's big AOF does. Redis 7 takes DEBUG only when told to.
    debug = ["enable-debug-command local"] if each_redis_kind == "debian-7" else []
    server = EmbeddedRedis(data_dir=tmp_path / "redis", extra_config=["aof-use-rdb-preamble no", *debug]).start()
    try:
        raw = server.client()
        raw.execute_command("DEBUG", "POPULATE", 500_000, "tengen:{t}:k", 10)
        _on_disk(raw)  # POPULATE bypasses the AOF: rewrite it from memory
        lines: list[str] = []
        client = connect(server.url, password=server.password, policy=QUICK, log=lines.append)
        server._kill()
        server._requested_port = server.port
        server._spawn(server.binary.path, server.port)  # no waiting for PING
        out = _in_thread(lambda: client.get("tengen:{t}:k:499999"))
        out[0].join(timeout=PATIENCE_S)
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

    # Someone frees memory (the registry prunes old blobs) while the write waits.
    writer, out = _in_thread(lambda: client.set("tengen:{t}:after", b"y" * 10_000))
    _until(lambda: lines or not writer.is_alive(), "the write refused")
    raw.config_set("maxmemory", 0)
    writer.join(timeout=PATIENCE_S)
    assert out == {"result": True}, out
    assert "out of memory" in lines[0] and "answering again" in lines[1], lines

    raw.config_set("maxmemory", raw.info("memory")["used_memory"] + 1000)
    clock = FakeClock()
    short = _on_clock(server, OutagePolicy(outage_s=0.5, backoff_base_s=0.01, backoff_cap_s=0.1), clock)
    with pytest.raises(RedisUnavailable, match="full for") as caught:
        short.set("tengen:{t}:more", b"z" * 100_000)
    assert caught.value.out_of_memory and caught.value.expired
    assert sum(clock.sleeps) == pytest.approx(0.5)


def test_a_wrong_password_is_not_an_outage(server):
    clock = FakeClock()
    raw = connect(server.url, password="not-the-password", policy=QUICK).raw
    client = ResilientRedis(raw, policy=QUICK, clock=clock, sleep=clock.sleep)
    with pytest.raises(redis.AuthenticationError):
        client.ping()
    assert clock.sleeps == [] and client.last_error is None  # no waiting, no outage


def test_a_redis_that_cannot_write_its_aof_is_an_outage_however_the_refusal_comes():
    # As Redis 6.2 words it on a full disk (seen on the cluster bed), for a command, a
    # pipeline's command and a script's call.
    from tengen.cluster.redis_client import is_transient

    for message in ("MISCONF Errors writing to the AOF file: No space left on device",
                    "Command # 1 (HSET tengen:{run}:decisions 000018-000016 {...}) of pipeline caused error: MISCONF "
                    "Errors writing to the AOF file: No space left on device",
                    "Error running script (call to f_3c47): @user_script:1: @user_script: 1: -MISCONF Errors writing "
                    "to the AOF file: No space left on device"):
        assert is_transient(redis.ResponseError(message)), message
    assert not is_transient(redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"))
