"""A self-play worker's games through a Redis outage: kept in order while the real
server is down, all in the stream once it is back; and its leaves, lost with a dead
inference server, sent again to the next one."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fake_clock import FakeClock

from tengen.cluster.outbox import GameOutbox
from tengen.cluster.redis_client import OutagePolicy, RedisUnavailable, ResilientRedis
from tengen.cluster.redis_server import EmbeddedRedis, connect
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import parse_config
from tengen.workers.selfplay_worker import SelfPlayWorker

GAME = make_game("tictactoe")
DECODE = game_decoder(GAME)
QUICK = OutagePolicy(outage_s=20.0, backoff_base_s=0.01, backoff_cap_s=0.2, connect_timeout_s=0.5)


def _on_clock(server: EmbeddedRedis, policy: OutagePolicy, clock: FakeClock) -> ResilientRedis:
    """A client of ``server`` whose outages are measured and waited out on ``clock``."""
    raw = connect(server.url, password=server.password, policy=policy).raw
    return ResilientRedis(raw, policy=policy, clock=clock, sleep=clock.sleep)


@pytest.fixture(scope="module")
def blobs():
    settings = SelfPlaySettings(search=SearchSettings(simulations=8))
    games = SelfPlay(GAME, games=8, seed=0, settings=settings).play(uniform_evaluator(9), games=12)
    return [encode_game(g, worker_id="w000") for g in games]


def test_games_wait_out_an_outage_in_order(tmp_path, blobs):
    with EmbeddedRedis(data_dir=tmp_path / "redis") as server:
        clock = FakeClock()
        stream = SampleStream(_on_clock(server, QUICK, clock), "run", maxlen=1000)
        outbox = GameOutbox(stream.add_many, capacity=100)
        for blob in blobs[:3]:
            outbox.put(blob)
        assert len(outbox) == 0 and stream.length() == 3
        server._kill()
        for blob in blobs[3:9]:
            outbox.put(blob)  # the worker plays on: nothing waits for Redis
        assert clock.sleeps == [], "a put waited out the outage"
        assert len(outbox) == 6
        server.restart()
        deadline = time.monotonic() + 60  # the outbox's own pause between tries is real time
        while outbox.flush() and time.monotonic() < deadline:
            time.sleep(0.1)
        for blob in blobs[9:]:
            outbox.put(blob)
        assert len(outbox) == 0 and outbox.sent == len(blobs)
        stored = [r.moves.tolist() for r in stream.replay(DECODE)]
        assert stored == [DECODE(b).moves.tolist() for b in blobs]  # all of them, in order


def test_a_full_outbox_waits_for_redis_and_gives_up_past_outage_s(tmp_path, blobs):
    with EmbeddedRedis(data_dir=tmp_path / "redis") as server:
        policy = OutagePolicy(outage_s=1.0, backoff_base_s=0.01, backoff_cap_s=0.1, connect_timeout_s=0.5)
        clock = FakeClock()
        stream = SampleStream(_on_clock(server, policy, clock), "run", maxlen=1000)
        outbox = GameOutbox(stream.add_many, capacity=3)
        server._kill()
        outbox.put(blobs[0])
        outbox.put(blobs[1])
        assert clock.sleeps == []
        with pytest.raises(RedisUnavailable, match="unreachable for 1 s") as caught:
            outbox.put(blobs[2])  # the third fills it: the worker waits, then stops
        assert caught.value.expired and len(outbox) == 3  # nothing thrown away
        assert sum(clock.sleeps) == pytest.approx(1.0)  # it waited out outage_s, on the client's clock


class _Server:
    """An evaluator a test can break: a stand-in for an inference server that dies."""

    def __init__(self):
        self.evaluate = uniform_evaluator(GAME.num_actions)
        self.dead = False
        self.received: list[np.ndarray] = []

    def submit(self, planes):
        self.received.append(planes)
        return planes

    def resolve(self, planes):
        if self.dead:
            raise ConnectionError("the server is gone")
        return self.evaluate(planes)


def test_leaves_lost_with_a_server_go_to_the_next_one():
    games = []
    servers = [_Server()]
    settings = parse_config({"game": {"name": "tictactoe"}, "mcts": {"simulations": 8, "leaves_per_round": 2}})
    worker = SelfPlayWorker(game=GAME, selfplay=settings.selfplay_settings(),
                            submit=lambda p: servers[-1].submit(p), resolve=lambda h: servers[-1].resolve(h),
                            sink=games.append, seed=1, games=4)
    worker.run_for(0.2)
    servers[-1].dead = True
    with pytest.raises(ConnectionError):
        worker.run_for(0.2)
    waiting = [flight.sent for flight in worker._in_flight if flight is not None and len(flight.sent)]
    assert waiting and all(flight.handle is None for flight in worker._in_flight if flight), "the lost leaves are kept"
    servers.append(_Server())  # the driver's replacement
    worker.run_for(0.5)
    # The new server got exactly the leaves the old one lost, first.
    assert len(servers[-1].received) > len(waiting)
    for lost, resent in zip(waiting, servers[-1].received, strict=False):
        assert np.array_equal(lost, resent)
    assert worker.stats()["games"] == len(games) > 0
