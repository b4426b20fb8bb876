"""Thin Ray actors around the plain classes: each builds its class from the run's
config inside its own process, wires it to Redis (stream, registry) and the
inference server, and records metrics. No training or search logic lives here.

Each actor takes the run's config as its JSON dump (``TengenConfig.model_dump(mode="json")``,
made once by the driver) and parses it itself, not as the ``TengenConfig``: Ray would
pickle the model across, and a pydantic model comes out of pickle without its checks
being run again, while some of them are about the machine that loads the config and
must run on the actor's node: the memory budget that the preallocated searches and the
replay window must fit (``TengenConfig._fits_in_memory``: that node's memory, or its
``TENGEN_MEMORY_BUDGET_BYTES``) and whether the node's installation can open
``storage`` (its fsspec backend, s3fs or gcsfs, installed there). Nothing is read from
Redis here: only Ray carries the dict.

The Redis password reaches the actors as an argument that the driver put in Ray's
object store (``ray.put``), never through ``runtime_env`` (which Ray's dashboard and
``ray list actors --detail`` show) nor a command line. Every Redis client rides out an
outage of up to ``redis.outage_s`` (cluster/redis_client.py) and logs to the actor's
log; a self-play worker keeps its finished games meanwhile and plays on.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tengen.cluster.metrics import RunMetrics
from tengen.cluster.outbox import GameOutbox
from tengen.cluster.redis_client import OutagePolicy, RedisUnavailable, ResilientRedis
from tengen.cluster.redis_server import connect
from tengen.cluster.registry import ModelRegistry
from tengen.cluster.status_board import StatusBoard
from tengen.cluster.stream import SampleStream
from tengen.cluster.supervision import describe_error
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import TengenConfig, parse_config, stream_maxlen
from tengen.workers.packed_planes import pack_planes
from tengen.workers.selfplay_worker import AllGamesRefused, WorkerStats

if TYPE_CHECKING:  # the learner's and the gatekeeper's modules load TensorFlow: only where they run
    from tengen.learner.learner import LearnerStats, LearnerStep
    from tengen.run.records import Total
    from tengen.workers.gatekeeper import GatingResult
    from tengen.workers.strength import StrengthResult

__all__ = ["ActorSetup", "SelfPlayActor", "SelfPlayReport", "LearnerActor", "GatekeeperActor", "StrengthActor",
           "ServerFailed", "ServerLost", "redis_for"]

_Stats = TypeVar("_Stats", bound="LearnerStats")


@dataclass(frozen=True)
class ActorSetup:
    """What the driver starts every actor of a run with (the first arguments of each
    actor below): the config's JSON dump, the run's id, and its Redis."""

    config: dict[str, Any]
    run_id: str
    redis_url: str
    redis_password: str | None

    def redis(self) -> tuple[str, Any]:
        """The Redis URL and the password for a new actor: the password travels in the
        object store only (never in runtime_env, which Ray's dashboard shows), put
        anew for each actor, since one ObjectRef shared by every actor's creation was
        once found freed under a live run ("owner is unknown") after workers came and went."""
        return self.redis_url, ray.put(self.redis_password)

    @staticmethod
    def beside_driver() -> dict[str, Any]:
        """Ray options for a part that asks for no CPU (the gatekeeper, the strength
        evaluator): the driver's node, which lives as long as the run does while spot
        nodes come and go, and where Ray would otherwise put it by chance (a self-play
        node, lost with it); anywhere else if that node cannot take it."""
        node = ray.get_runtime_context().get_node_id()
        return {"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True)}


class ServerLost(RuntimeError):
    """The inference server stopped answering a worker (it died, or hangs)."""


class ServerFailed(ServerLost):
    """The inference server raised on a worker's leaves (a model call that failed its
    batch): the server's failure, not the worker's."""


def redis_for(config: TengenConfig, url: str, password: str | None, *, component: str) -> ResilientRedis:
    """The run's Redis client for ``component``: its outages go to the actor's log."""
    return connect(url, password=password, policy=OutagePolicy(outage_s=config.redis.outage_s),
                   log=lambda line: print(f"{component}: {line}", flush=True))


def _decoder(config: TengenConfig):
    return game_decoder(config.game.make())


class SelfPlayReport(WorkerStats):
    """What ``SelfPlayActor.run_for`` returns to the driver (and puts on the status
    board): the worker's counters and the actor's own state."""

    worker: str  # the worker's id, ``w003``
    incarnation: str  # this actor's process of it, ``w003.1f2e9a``: its games' ids start with it
    server_lost: str | None  # the actor id of an inference server that stopped answering (or raised)
    server_error: str | None  # what it raised, one line (None: it stopped answering)
    games_waiting: int  # finished games held in the outbox while Redis is away
    node: str  # the Ray node it runs on


#: the self-play counters recorded as metrics, by the counter's name in WorkerStats
_COUNTER_METRICS: tuple[tuple[Total, str], ...] = (
    ("games", "tengen_selfplay_games_total"), ("positions", "tengen_selfplay_positions_total"),
    ("evaluations", "tengen_selfplay_evaluations_total"), ("cache_hits", "tengen_selfplay_cache_hits_total"),
    ("moves", "tengen_selfplay_moves_total"))


class SelfPlayActor:
    """A SelfPlayWorker whose leaves go to an InferenceServer actor and whose games go
    to the run's sample stream, through an outbox that holds them while Redis is away.

    Its games are named ``<worker id>.<incarnation>:<n>``: a replacement worker with
    the same id is another incarnation, so the learner never takes its games for
    repeats of the old one's.
    """

    def __init__(self, config: dict[str, Any], run_id: str, redis_url: str, password: str | None, server,
                 worker_id: str, seed: int, model_version: int):
        from tengen.workers.selfplay_worker import SelfPlayWorker

        self.config = parse_config(config)
        self.worker_id = worker_id
        self.incarnation = f"{worker_id}.{secrets.token_hex(3)}"
        client = redis_for(self.config, redis_url, password, component=f"worker {worker_id}")
        self.stream = SampleStream(client, run_id, maxlen=stream_maxlen(self.config))
        self.outbox = GameOutbox(self.stream.add_many, capacity=self.config.cluster.worker_buffer_games,
                                 log=lambda line: print(f"worker {worker_id}: {line}", flush=True))
        self.metrics = RunMetrics(run_id)
        self.status = StatusBoard(client, run_id)
        self.server = server
        self._games = 0
        self._last: dict[Total, int] = {"games": 0, "positions": 0, "evaluations": 0, "cache_hits": 0, "moves": 0}
        self.worker = SelfPlayWorker(
            game=self.config.game.make(), selfplay=self.config.selfplay_settings(),
            submit=self._submit, resolve=self._resolve, sink=self._send,
            seed=seed, games=self.config.cluster.games_per_worker, model_version=model_version,
            cache_positions=self.config.selfplay.cache_positions,
        )

    def _submit(self, planes):
        # packed, a go9 leaf batch is an eighth of its bytes and travels inside the call
        return self.server.evaluate.remote(pack_planes(planes))

    def _resolve(self, ref):
        try:
            return ray.get(ref, timeout=self.config.cluster.evaluation_timeout_s)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
            raise ServerLost(f"inference server lost ({type(e).__name__})") from e
        except ray.exceptions.RayTaskError as e:
            raise ServerFailed(f"it raised on a batch: {describe_error(e)}") from e

    def _send(self, record) -> None:
        record.game_id = f"{self.incarnation}:{self._games}"
        self._games += 1
        self.outbox.put(encode_game(record, worker_id=self.worker_id))
        self.metrics.observe("tengen_selfplay_game_length_moves", record.length)

    def set_model_version(self, version: int) -> None:
        self.worker.set_model_version(version)

    def set_server(self, server) -> None:
        """The worker's (new) inference server; leaves lost with the old one go to it."""
        self.server = server

    def server_id(self) -> str:
        return self.server._actor_id.hex()

    def run_for(self, seconds: float) -> SelfPlayReport:
        """Play for about ``seconds``; returns counters since the start, with
        ``server_lost`` (the actor id of a server that stopped answering or raised) or
        None, and ``server_error`` (what it raised) or None."""
        lost = error = None
        refused = self.worker.games_refused
        try:
            stats = self.worker.run_for(seconds)
        except AllGamesRefused:
            self.outbox.flush()  # what earlier chunks left waiting goes before this actor is replaced
            raise
        except ServerLost as e:
            lost = self.server_id()
            error = str(e) if isinstance(e, ServerFailed) else None
            stats = self.worker.stats()
            # Until the driver sends a new server, a call to the old one fails at once:
            # report now, but do not spin.
            time.sleep(min(1.0, seconds))
        refusals = self.worker.refusals_since(refused)
        if refusals:
            print(f"worker {self.worker_id}: {refusals}", flush=True)
        self.outbox.flush()
        for key, name in _COUNTER_METRICS:
            self.metrics.inc(name, stats[key] - self._last[key], worker=self.worker_id)
            self._last[key] = stats[key]
        report: SelfPlayReport = {**stats, "worker": self.worker_id, "incarnation": self.incarnation,
                                  "server_lost": lost, "server_error": error, "games_waiting": len(self.outbox),
                                  "node": ray.get_runtime_context().get_node_id()}
        try:  # the status is a courtesy: not worth a wait during an outage
            self.status.set_status(f"worker:{self.worker_id}", dict(report), wait=False)
        except RedisUnavailable as e:
            if e.expired:
                raise
        return report


class LearnerActor:
    """The Learner reading the run's stream and publishing to its registry.

    Its checkpoints go to ``storage`` (the config's URL), or without one (the default)
    to the driver: they are held here (``HeldStorage``, starting from ``held``, what
    the driver kept of an earlier learner) and handed over with the step or the
    checkpoint call that wrote them (``checkpoint_files``), for the driver to keep in
    the run directory on its own node, whatever node this learner runs on."""

    def __init__(self, config: dict[str, Any], run_id: str, redis_url: str, password: str | None,
                 storage: str | None, seed: int, held: dict[str, bytes] | None = None):
        from tengen.engine.backend import share_gpu_memory
        from tengen.learner.learner import Learner
        from tengen.learner.storage import HeldStorage, open_storage
        from tengen.run.outage import ResilientStorage

        share_gpu_memory()
        self.config = parse_config(config)
        self._said: list[str] = []
        client = redis_for(self.config, redis_url, password, component="learner")
        self.stream = SampleStream(client, run_id, maxlen=stream_maxlen(self.config))
        self.registry = ModelRegistry(client, run_id)
        self.metrics = RunMetrics(run_id)
        self.learner = Learner(
            game=self.config.game.make(), network=self.config.network_spec(), options=self.config.learner_options(),
            source=self.stream, registry=self.registry, decode=_decoder(self.config),
            storage=HeldStorage(held) if storage is None else ResilientStorage(
                lambda: open_storage(storage), url=storage, outage_s=self.config.storage_outage_s,
                log=self._say),
            seed=seed,
        )
        self._steps = self.learner.trainer.step
        self._read = self.learner.positions_read
        self._clock = time.monotonic()

    def step(self, seconds: float, best_version: int) -> LearnerStep:
        stats = self.learner.step(seconds=seconds, best_version=best_version, until_step=self.config.stop.steps)
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
        m.set("tengen_stream_trimmed_unread_entries", stats["trimmed_unread"])
        m.set("tengen_redis_memory_bytes", self.stream.client.info("memory")["used_memory"])
        stats["bad_entries"] = self.stream.bad_entries
        return self._hand_over(stats)

    def checkpoint(self) -> LearnerStats:
        """Checkpoint now; returns the learner's stats as of the checkpoint."""
        self.learner.checkpoint()
        return self._hand_over(self.learner.stats())

    def _hand_over(self, stats: _Stats) -> _Stats:
        """``stats`` with the checkpoints written since the last call, for the driver to
        keep, and the lines said since, for the run's log."""
        take_written = getattr(self.learner.storage, "take_written", None)
        if take_written is not None and (written := take_written()):
            stats["checkpoint_files"] = written
        if self._said:
            stats["said"], self._said = self._said, []
        return stats

    def _say(self, line: str) -> None:
        """A line for the run's log: the driver writes it when this call returns (the
        actor's own output stays on its node: the driver does not forward it)."""
        line = f"learner: {line}"
        print(line, flush=True)
        self._said.append(line)


class GatekeeperActor:
    """The Gatekeeper, with the run's registry and rule."""

    def __init__(self, config: dict[str, Any], run_id: str, redis_url: str, password: str | None, seed: int):
        from tengen.workers.gatekeeper import Gatekeeper

        self.config = parse_config(config)
        self.registry = ModelRegistry(redis_for(self.config, redis_url, password, component="gatekeeper"), run_id)
        self.metrics = RunMetrics(run_id)
        self.gatekeeper = Gatekeeper(game=self.config.game.make(), network=self.config.network_spec(),
                                     registry=self.registry, options=self.config.gating_options(), seed=seed)

    def gate(self, candidate: int, best: int) -> GatingResult:
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


class StrengthActor:
    """The strength evaluator (workers/strength.py), at ``evaluation.nice`` (19) and held to
    ``evaluation.cpu_share`` (it asks Ray for no CPU: nice and pace bound it): the driver hands it a version and
    its weights, fetched from the registry when it asked, so it needs no Redis."""

    def __init__(self, config: dict[str, Any]):
        from tengen.workers.strength import StrengthEvaluator, low_priority

        evaluation = config.get("evaluation", {})  # before TensorFlow starts: its threads inherit the nice value
        pace = low_priority(float(evaluation.get("cpu_share", 0.5)), nice=int(evaluation.get("nice", 19)))
        self.config = parse_config(config)
        self.evaluator = StrengthEvaluator(game=self.config.game.make(), options=self.config.strength_options(),
                                           network=self.config.network_spec(), pace=pace)

    def evaluate(self, version: int, blob: bytes) -> StrengthResult:
        return self.evaluator.evaluate(version, blob)
