"""Thin Ray actors around the plain classes: each builds its class from the run's
config inside its own process, wires it to Redis (stream, registry) and the
inference server, and records metrics. No training or search logic lives here.

The Redis password reaches the actors through the ``TENGEN_REDIS_PASSWORD``
environment variable of their runtime environment, never as an argument.
"""

from __future__ import annotations

import os
import time

import ray

from cluster.codec import encode_game, game_decoder
from cluster.config import TengenConfig, parse_config
from cluster.metrics import RunMetrics
from cluster.redis_server import connect
from cluster.transport import ModelRegistry, SampleStream, StatusBoard

__all__ = ["SelfPlayActor", "LearnerActor", "GatekeeperActor", "stream_maxlen"]

PASSWORD_ENV = "TENGEN_REDIS_PASSWORD"


def stream_maxlen(config: TengenConfig) -> int:
    """The stream's MAXLEN (in games) that holds about ``replay_window`` positions.

    A game records about half its board in moves, times the share of full searches;
    erring long keeps a little more than the window, never less.
    """
    height, width = config.game.make().board_shape
    positions_per_game = max(1.0, height * width / 2 * config.selfplay.full_search_fraction)
    return max(100, int(config.train.replay_window / positions_per_game))


def _redis(url: str):
    return connect(url, password=os.environ.get(PASSWORD_ENV))


def _decoder(config: TengenConfig):
    return game_decoder(config.game.make())


class SelfPlayActor:
    """A SelfPlayWorker whose leaves go to an InferenceServer actor and whose games go
    to the run's sample stream."""

    def __init__(self, config: dict, run_id: str, redis_url: str, server, worker_id: str, seed: int,
                 model_version: int):
        from workers.selfplay_worker import SelfPlayWorker

        self.config = parse_config(config)
        self.worker_id = worker_id
        self.stream = SampleStream(_redis(redis_url), run_id, maxlen=stream_maxlen(self.config))
        self.metrics = RunMetrics(run_id)
        self.status = StatusBoard(self.stream.client, run_id)
        self.server = server
        self._last = {"games": 0, "positions": 0, "evaluations": 0, "moves": 0}
        self.worker = SelfPlayWorker(
            game=self.config.game.make(), selfplay=self.config.selfplay_kwargs(),
            submit=lambda planes: self.server.evaluate.remote(planes), resolve=ray.get, sink=self._send,
            seed=seed, games=self.config.cluster.games_per_worker, model_version=model_version,
        )

    def _send(self, record) -> None:
        self.stream.add(encode_game(record, worker_id=self.worker_id))
        self.metrics.observe("tengen_selfplay_game_length_moves", record.length)

    def set_model_version(self, version: int) -> None:
        self.worker.set_model_version(version)

    def set_server(self, server) -> None:
        self.server = server

    def run_for(self, seconds: float) -> dict:
        stats = self.worker.run_for(seconds)
        for key, name in (("games", "tengen_selfplay_games_total"), ("positions", "tengen_selfplay_positions_total"),
                          ("evaluations", "tengen_selfplay_evaluations_total"),
                          ("moves", "tengen_selfplay_moves_total")):
            self.metrics.inc(name, stats[key] - self._last[key], worker=self.worker_id)
            self._last[key] = stats[key]
        self.status.set_status(f"worker:{self.worker_id}", {**stats, "node": ray.get_runtime_context().get_node_id()})
        return {**stats, "worker": self.worker_id}


class LearnerActor:
    """The Learner reading the run's stream and publishing to its registry."""

    def __init__(self, config: dict, run_id: str, redis_url: str, storage: str, seed: int):
        from engine.network import share_gpu_memory
        from learner.learner import Learner

        share_gpu_memory()
        self.config = parse_config(config)
        client = _redis(redis_url)
        self.stream = SampleStream(client, run_id, maxlen=stream_maxlen(self.config))
        self.registry = ModelRegistry(client, run_id)
        self.metrics = RunMetrics(run_id)
        train = self.config.train
        self.learner = Learner(
            game=self.config.game.make(), network=self.config.network_kwargs(), source=self.stream,
            registry=self.registry, decode=_decoder(self.config), storage=storage, seed=seed,
            batch_size=train.batch_size, optimizer=train.optimizer, learning_rate=self.config.learning_rate(),
            momentum=train.momentum,
            replay_window=train.replay_window, min_positions=train.min_positions, max_reuse=train.max_reuse,
            candidate_every=train.candidate_every,
        )
        self._steps = self.learner.trainer.step
        self._read = self.learner.positions_read
        self._clock = time.monotonic()

    def node_id(self) -> str:
        """The Ray node this learner runs on (its GPU may be shared with a server)."""
        return ray.get_runtime_context().get_node_id()

    def step(self, seconds: float, best_version: int) -> dict:
        stats = self.learner.step(seconds=seconds, best_version=best_version)
        now = time.monotonic()
        m = self.metrics
        m.inc("tengen_learner_steps_total", stats["step"] - self._steps)
        m.set("tengen_learner_positions_per_second", (stats["positions_read"] - self._read) / (now - self._clock))
        self._steps, self._read, self._clock = stats["step"], stats["positions_read"], now
        for part, value in stats["losses"].items():
            if part != "learning_rate":
                m.set("tengen_learner_loss", value, part=part)
        m.set("tengen_learner_reuse_ratio", stats["reuse"])
        m.set("tengen_replay_window_positions", stats["window"])
        m.set("tengen_sample_age_versions", stats["sample_age_versions"])
        m.set("tengen_stream_length_entries", self.stream.length())
        m.set("tengen_stream_lag_entries", self.stream.lag("learner"))
        m.set("tengen_redis_memory_bytes", self.stream.client.info("memory")["used_memory"])
        stats["bad_entries"] = self.stream.bad_entries
        return stats

    def checkpoint(self) -> None:
        self.learner.checkpoint()


class GatekeeperActor:
    """The Gatekeeper, with the run's registry and rule."""

    def __init__(self, config: dict, run_id: str, redis_url: str, seed: int):
        from workers.gatekeeper import Gatekeeper

        self.config = parse_config(config)
        self.registry = ModelRegistry(_redis(redis_url), run_id)
        self.metrics = RunMetrics(run_id)
        g, mcts = self.config.gating, self.config.mcts
        self.gatekeeper = Gatekeeper(
            game=self.config.game.make(), network=self.config.network_kwargs(), registry=self.registry,
            rule=self.config.gating_rule_kwargs(),
            simulations=g.simulations or mcts.simulations, games_in_flight=g.games_in_flight,
            temperature_moves=g.temperature_moves, c_puct=mcts.c_puct, fpu_reduction=mcts.fpu_reduction,
            leaves_per_round=mcts.leaves_per_round, seed=seed,
        )

    def gate(self, candidate: int, best: int) -> dict:
        result = self.gatekeeper.gate(candidate, best)
        m = self.metrics
        games = result["wins"] + result["draws"] + result["losses"]
        m.inc("tengen_gating_games_total", games)
        if games:
            m.set("tengen_gating_score", (result["wins"] + 0.5 * result["draws"]) / games)
        if result["llr"] is not None:
            m.set("tengen_gating_llr", result["llr"])
        if result["decision"] == "promote":
            m.inc("tengen_gating_promotions_total")
        return result
