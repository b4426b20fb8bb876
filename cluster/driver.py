"""The distributed run: Redis, Ray, the actors, and the loop that keeps them busy.

``ClusterRun(config, run_dir).run()`` connects to Ray (``ray.address`` or a local Ray)
and to Redis (``redis.url`` or an embedded server in the run directory), publishes
the initial network as version 000000, starts the inference servers (one per GPU, or
one on the CPU; see cluster/inference_pool.py), the self-play workers, the learner
and the gatekeeper, then loops: workers play in chunks, the learner trains and
publishes candidates, the newest candidate is gated against the best, and a promotion
is pushed to the inference servers (weights, hash-checked) and to the workers (the
version their samples carry). GPU nodes that join get servers and workers of their
own; a node that leaves takes its actors with it and the run goes on. It stops on the
config's stop section, ``minutes``, or Ctrl-C, and leaves the best model in
``RUN_DIR/best``. A run directory that already holds a run is continued: the
embedded Redis replays its AOF (stream, registry, ladder) and the learner restores
its checkpoint (``tengen train`` asks for ``--resume`` first, so that this never
happens by accident; ``resume`` only marks it in the log).

A status line goes to the terminal every few seconds and ``RUN_DIR/status.json`` is
rewritten with it; ``tengen status`` reads that file, or Redis while the run lives.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cluster.actors import PASSWORD_ENV, GatekeeperActor, LearnerActor, SelfPlayActor, stream_maxlen
from cluster.config import TengenConfig
from cluster.inference_pool import CPU_SERVER, InferencePool, learner_gpu_share
from cluster.metrics import RunMetrics
from cluster.redis_server import HOST, EmbeddedRedis, connect
from cluster.single_process import model_version_id
from cluster.transport import ModelRegistry, SampleStream, StatusBoard
from engine.network import build_network, save_weights_file, weights_from_bytes, weights_to_bytes, write_atomically

__all__ = ["ClusterRun", "run_id_for"]


def run_id_for(run_dir: str | Path) -> str:
    """The run's namespace in Redis and in metric labels: the run directory's name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", Path(run_dir).resolve().name)


class ClusterRun:
    def __init__(self, config: TengenConfig, run_dir: str | Path, *, address: str | None = None,
                 redis_url: str | None = None, minutes: float | None = None, workers: int | None = None,
                 resume: bool = False, log: Callable[[str], None] = print):
        self.config = config
        self.run_dir = Path(run_dir)
        self.run_id = run_id_for(self.run_dir)
        self.address = address or config.ray.address
        self.redis_url = redis_url or config.redis.url
        self.minutes = minutes if minutes is not None else config.stop.minutes
        self.requested_workers = workers or config.cluster.workers
        self.resume = resume
        self._print = log
        self.game = config.game.make()
        self.redis: EmbeddedRedis | None = None
        self.best_version = 0
        self.promotions = 0
        self.last_gating: dict | None = None
        self.learner_stats: dict = {}
        self.worker_stats: dict[str, dict] = {}
        self.server_stats: dict = {}
        self._last_totals: tuple[dict, float] = ({}, time.monotonic())
        #: the learner actor's handle while the run lives (tests kill it to check recovery)
        self.learner: Any = None
        self.pool: InferencePool | None = None
        #: the self-play worker actors and their chunk in flight, by worker id
        self.workers: dict[str, Any] = {}
        self.worker_refs: dict[str, Any] = {}
        self._next_worker = 0
        self._applied_scale: int | None = None
        self._failed_servers: set[str] = set()

    # -- start-up ---------------------------------------------------------------------
    def _start_redis(self) -> tuple[str, str | None]:
        if self.redis_url:
            # `tengen status` and `tengen scale` find the run's Redis here (a --redis URL
            # is not in the config file); its password stays in the environment.
            (self.run_dir / "redis").mkdir(exist_ok=True)
            write_atomically(self.run_dir / "redis" / "connection.json", json.dumps({"url": self.redis_url}).encode())
            return self.redis_url, os.environ.get(PASSWORD_ENV)
        # On a Ray cluster, workers on other nodes must reach it: bind the node's address
        # too (the password guards it). Locally, loopback only.
        host = ray.util.get_node_ip_address() if self.address else HOST
        self.redis = EmbeddedRedis(data_dir=self.run_dir / "redis", host=host)
        self.redis.start()
        # `tengen status` reads the live run with these; readable by the owner only.
        secret = self.run_dir / "redis" / "connection.json"
        secret.write_text(json.dumps({"url": self.redis.url, "password": self.redis.password}))
        secret.chmod(0o600)
        return self.redis.url, self.redis.password

    def _start_ray(self, password: str | None) -> None:
        env = {"env_vars": {PASSWORD_ENV: password or "", "TF_CPP_MIN_LOG_LEVEL": "2"}}
        if self.address:
            ray.init(address=self.address, runtime_env=env, log_to_driver=False)
        else:
            # Logical CPUs only decide what may be scheduled. On one machine every actor
            # should run (and share the cores as the OS schedules them): scaling up or
            # replacing a lost learner must never wait for a free "CPU".
            cpus = (os.cpu_count() or 2) + 32
            # address="local": without it Ray joins any `ray start` cluster on this machine.
            ray.init(address="local", num_cpus=cpus, runtime_env=env, include_dashboard=False,
                     log_to_driver=False, _metrics_export_port=self.config.ray.metrics_export_port)

    def _publish_initial(self, registry: ModelRegistry) -> int:
        best = registry.best_version()
        if best is not None:
            return best  # a resumed run keeps its ladder
        model = build_network(**self.config.network_kwargs())
        registry.publish(0, weights_to_bytes(model, metadata={"version": 0}), {"step": 0, "game": self.game.name})
        registry.promote(0, elo=0.0, result={"initial": True})
        return 0

    def _worker_count(self) -> int:
        if self.requested_workers:
            return self.requested_workers
        cpus = int(ray.cluster_resources().get("CPU", 2))
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus:
            return max(1, min(cpus - 2, gpus * self.config.cluster.workers_per_gpu))
        if self.address:  # a CPU cluster: a CPU each, after the server and the learner
            return max(1, cpus - 2)
        # Locally (logical CPUs are padded, see _start_ray): leave a core to the
        # inference server and the learner.
        return max(1, (os.cpu_count() or 2) - 1)

    # -- the run ----------------------------------------------------------------------
    def run(self) -> dict:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(self.config.to_yaml())
        self._log_file = open(self.run_dir / "log.txt", "a", encoding="utf-8")  # noqa: SIM115
        redis_url, password = self._start_redis()
        try:
            self._start_ray(password)
            try:
                return self._loop(redis_url, password)
            finally:
                ray.shutdown()
        finally:
            if self.redis:
                self.redis.stop()
            self._log_file.close()

    def _loop(self, redis_url: str, password: str | None) -> dict:
        cfg = self.config
        client = connect(redis_url, password=password)
        registry = ModelRegistry(client, self.run_id)
        stream = SampleStream(client, self.run_id, maxlen=stream_maxlen(cfg))
        status = StatusBoard(client, self.run_id)
        metrics = RunMetrics(self.run_id)
        self.best_version = self._publish_initial(registry)
        blob, _ = registry.fetch(self.best_version)
        config_dict = cfg.model_dump(mode="json")
        storage = cfg.storage or str(self.run_dir / "learner")
        gpus = learner_gpu_share(ray.cluster_resources().get("GPU", 0))
        # Actor handles are typed Any: Ray's stubs type remote methods as plain callables.
        learner = self.learner = self._start_learner(config_dict, redis_url, storage, gpus)
        learner_node = ray.get(learner.node_id.remote()) if gpus else None
        pool = self.pool = InferencePool(run=self.run_id, network=cfg.network_kwargs(), max_batch=cfg.cluster.max_batch,
                                         batch_timeout_ms=cfg.cluster.batch_timeout_ms)
        first_servers = pool.start(blob, self.best_version, learner_node=learner_node, learner_gpus=gpus)
        gatekeeper = self._start_gatekeeper(config_dict, redis_url)
        chunk = cfg.cluster.worker_chunk_seconds
        workers, worker_refs = self.workers, self.worker_refs
        start_workers = functools.partial(self._start_workers, config_dict, redis_url, chunk)
        if self.requested_workers or first_servers == [CPU_SERVER]:
            start_workers(self._worker_count())
        else:
            for key in first_servers:
                start_workers(cfg.cluster.workers_per_gpu, server=key)
        pool.update_clients()
        self.log(f"run {self.run_id}: {self.game.name}, {len(workers)} self-play workers, "
                 f"{len(pool.servers)} inference servers, redis {redis_url}, ray {self.address or 'local'}; "
                 f"best {model_version_id(self.best_version)}"
                 + (", resumed" if self.resume else "")
                 + " (the first games wait for the search kernels to compile: up to a minute on a fresh install)")

        learner_ref = learner.step.remote(1.0, self.best_version)
        gate_ref: Any = None
        pending_candidates: list[int] = []
        candidate = -1  # the one in the match in flight
        start = last_status = time.monotonic()
        metrics.set("tengen_best_version", self.best_version)
        try:
            while not self._should_stop(start):
                refs = list(worker_refs.values()) + [learner_ref] + ([gate_ref] if gate_ref else [])
                ready, _ = ray.wait(refs, num_returns=1, timeout=1.0)
                for ref in ready:
                    if ref is learner_ref:
                        try:
                            self.learner_stats = ray.get(ref)
                            pending_candidates.extend(self.learner_stats["published"])
                        except ray.exceptions.RayActorError:
                            # A new learner resumes from its checkpoint and the stream.
                            self.log("learner lost: starting a new one from its checkpoint")
                            gpus = learner_gpu_share(ray.cluster_resources().get("GPU", 0))
                            learner = self.learner = self._start_learner(config_dict, redis_url, storage, gpus)
                        learner_ref = learner.step.remote(1.0, self.best_version)
                    elif ref is gate_ref:
                        gate_ref = None
                        try:
                            result: dict = ray.get(ref)
                        except ray.exceptions.RayActorError:
                            # Its node went away mid-match: a new one plays the match again
                            # (or a newer candidate's, if one came meanwhile).
                            self.log("gatekeeper lost: starting a new one")
                            gatekeeper = self._start_gatekeeper(config_dict, redis_url)
                            pending_candidates.insert(0, candidate)
                            continue
                        self.last_gating = result
                        self.log(f"gating {model_version_id(result['candidate'])} vs "
                                 f"{model_version_id(result['best'])}: {result['wins']}-{result['draws']}-"
                                 f"{result['losses']}, Elo {result['elo']:+.0f} -> {result['decision']}")
                        if result["decision"] == "promote":
                            self._promote(result["candidate"], registry, metrics)
                    else:
                        wid = next((w for w, r in worker_refs.items() if r is ref), None)
                        if wid is None:  # dropped since the wait
                            continue
                        try:
                            self.worker_stats[wid] = ray.get(ref)
                            worker_refs[wid] = workers[wid].run_for.remote(chunk)
                        except ray.exceptions.RayError as e:
                            # Its node (or its server's) went away: the run goes on with the others.
                            why = "" if isinstance(e, ray.exceptions.RayActorError) else f" ({type(e).__name__})"
                            self._drop_worker(wid)
                            self.log(f"worker {wid} lost{why}; {len(workers)} left")
                if gate_ref is None and pending_candidates:
                    # Only the newest candidate is worth a match.
                    candidate = pending_candidates[-1]
                    pending_candidates.clear()
                    gate_ref = gatekeeper.gate.remote(candidate, self.best_version)
                wanted = status.desired_workers()
                if wanted and wanted != self._applied_scale:
                    # A request applies once: GPU nodes that join later add workers on top.
                    self._applied_scale = wanted
                    self._scale(wanted, start_workers)
                if time.monotonic() - last_status >= 5.0:
                    last_status = time.monotonic()
                    self._sync_pool(start_workers)
                    metrics.set("tengen_workers_alive", len(workers))
                    self._report(start, stream, status)
        except KeyboardInterrupt:
            self.log("interrupted: stopping cleanly")
        try:
            ray.get(learner.checkpoint.remote(), timeout=120)
        except (ray.exceptions.RayError, TimeoutError) as e:
            self.log(f"final learner checkpoint failed ({type(e).__name__}); the last one stands")
        self._save_best(registry)
        summary = {"best": model_version_id(self.best_version), "promotions": self.promotions,
                   "steps": self.learner_stats.get("step", 0),
                   "games": sum(s.get("games", 0) for s in self.worker_stats.values()),
                   "minutes": (time.monotonic() - start) / 60}
        self.log("done: " + json.dumps(summary))
        return summary

    def _start_gatekeeper(self, config_dict: dict, redis_url: str) -> Any:
        return ray.remote(GatekeeperActor).options(num_cpus=0).remote(
            config_dict, self.run_id, redis_url, self.config.seed + 1)

    def _start_learner(self, config_dict: dict, redis_url: str, storage: str, gpus: float) -> Any:
        return ray.remote(LearnerActor).options(num_cpus=1, num_gpus=gpus).remote(
            config_dict, self.run_id, redis_url, storage, self.config.seed)

    def _start_workers(self, config_dict: dict, redis_url: str, chunk: float, count: int,
                       server: str | None = None) -> None:
        """Start ``count`` workers on ``server`` (default: the least loaded each time)."""
        assert self.pool is not None
        for _ in range(count):
            index, self._next_worker = self._next_worker, self._next_worker + 1
            wid = f"w{index:03d}"
            handle, node = self.pool.attach(wid, server)
            # Next to their GPU server when it has one; else SPREAD: workers go to
            # different nodes first, so losing a node loses few.
            placement: Any = (NodeAffinitySchedulingStrategy(node, soft=True) if node else "SPREAD")
            worker: Any = ray.remote(SelfPlayActor).options(num_cpus=1, scheduling_strategy=placement).remote(
                config_dict, self.run_id, redis_url, handle, wid, self.config.seed * 1000 + index,
                self.best_version)
            self.workers[wid] = worker
            self.worker_refs[wid] = worker.run_for.remote(chunk)

    def _drop_worker(self, wid: str) -> None:
        assert self.pool is not None
        handle = self.workers.pop(wid, None)
        self.worker_refs.pop(wid, None)
        self.worker_stats.pop(wid, None)
        self.pool.detach(wid)
        if handle is not None:
            ray.kill(handle)  # a no-op for a dead actor; stops a live one whose server is gone

    def _sync_pool(self, start_workers: Callable[..., None]) -> None:
        """Servers (and their workers) for GPU nodes that joined; drop what left."""
        assert self.pool is not None
        before = set(self.pool.servers)
        added, orphans = self.pool.sync()
        self.server_stats, failed = self.pool.stats()
        for key in self._failed_servers.union(failed).intersection(self.pool.servers):
            orphans += self.pool.lost(key)
        self._failed_servers.clear()
        for wid in orphans:
            self._drop_worker(wid)
        for key in added:
            if key.startswith("gpu:"):
                start_workers(self.config.cluster.workers_per_gpu, server=key)
        if not self.workers:  # the last GPU node went: carry on on the CPU server
            start_workers(self._worker_count())
        gone = before - set(self.pool.servers)
        if added or gone:
            self.log(f"inference servers: {len(self.pool.servers)} (+{len(added)} -{len(gone)}), "
                     f"self-play workers: {len(self.workers)} (-{len(orphans)} with a lost server)")
        self.pool.update_clients()

    def _scale(self, wanted: int, start_workers: Callable[..., None]) -> None:
        if len(self.workers) < wanted:
            start_workers(wanted - len(self.workers))
        while len(self.workers) > wanted:
            self._drop_worker(sorted(self.workers)[-1])
        assert self.pool is not None
        self.pool.update_clients()
        self.log(f"scaled to {len(self.workers)} self-play workers")

    def _promote(self, version: int, registry, metrics) -> None:
        blob, meta = registry.fetch(version)
        from engine.network import blob_sha256

        assert self.pool is not None
        # A server that failed to load is gone with its node: the next sync drops it.
        self._failed_servers.update(self.pool.load_weights(blob, blob_sha256(blob), version))
        for w in self.workers.values():
            w.set_model_version.remote(version)
        self.best_version = version
        self.promotions += 1
        ladder = registry.ladder()
        metrics.set("tengen_best_version", version)
        if ladder and ladder[-1].get("elo") is not None:
            metrics.set("tengen_best_elo", ladder[-1]["elo"])
        self._save_best(registry)
        self.log(f"promoted {model_version_id(version)}")

    def _save_best(self, registry) -> None:
        blob, _ = registry.fetch(self.best_version)
        best = self.run_dir / "best"
        best.mkdir(exist_ok=True)
        model = build_network(**self.config.network_kwargs())
        weights_from_bytes(model, blob)  # checks the blob against the config before it lands
        save_weights_file(model, best / "model.safetensors",
                          metadata={"version": model_version_id(self.best_version), "game": self.game.name})
        (best / "config.yaml").write_text(self.config.to_yaml())
        write_atomically(self.run_dir / "ladder.json", json.dumps(registry.ladder(), indent=2).encode())

    def _should_stop(self, start: float) -> bool:
        stop = self.config.stop
        if self.minutes is not None and time.monotonic() - start >= self.minutes * 60:
            return True
        if stop.steps is not None and self.learner_stats.get("step", 0) >= stop.steps:
            return True
        return stop.promotions is not None and self.promotions >= stop.promotions

    def _report(self, start: float, stream: SampleStream, status: StatusBoard) -> None:
        """Rates over the last interval (start-up and slow phases do not dilute them)
        and totals since the start."""
        now = time.monotonic()
        elapsed = now - start
        totals = {key: sum(s.get(key, 0) for s in self.worker_stats.values())
                  for key in ("games", "positions", "evaluations", "moves")}
        before, then = self._last_totals
        interval = max(now - then, 1e-9)
        rate = {key: (totals[key] - before.get(key, 0)) / interval for key in totals}
        self._last_totals = (totals, now)
        losses = self.learner_stats.get("losses", {})
        gating = self.last_gating
        line = {
            "elapsed_s": round(elapsed, 1), "games": totals["games"], "games_per_s": round(rate["games"], 2),
            "moves_per_s": round(rate["moves"], 1), "positions_per_s": round(rate["positions"], 1),
            "evaluations_per_s": round(rate["evaluations"]),
            "mean_batch": round(self.server_stats.get("mean_batch_size", 0.0), 1),
            "learner_step": self.learner_stats.get("step", 0),
            "loss": round(losses.get("loss", float("nan")), 3) if losses else None,
            "window": self.learner_stats.get("window", 0), "window_capacity": self.config.train.replay_window,
            "best": model_version_id(self.best_version), "promotions": self.promotions,
            "last_gating": gating, "workers": len(self.worker_stats),
            "inference_servers": len(self.pool.servers) if self.pool else 0, "stream_length": stream.length(),
            "bad_entries": self.learner_stats.get("bad_entries", 0),
        }
        write_atomically(self.run_dir / "status.json", json.dumps(line, indent=2).encode())
        status.set_status("driver", line)
        gate = (f"{gating['wins']}-{gating['draws']}-{gating['losses']} {gating['decision']}" if gating else "-")
        self.log(f"{elapsed:6.0f}s games {line['games']} ({line['games_per_s']}/s) moves/s {line['moves_per_s']} "
                 f"pos/s {line['positions_per_s']} "
                 f"eval/s {line['evaluations_per_s']} batch {line['mean_batch']} step {line['learner_step']} "
                 f"loss {line['loss']} window {line['window']}/{line['window_capacity']} best {line['best']} "
                 f"gate {gate}")

    def log(self, line: str) -> None:
        self._print(line)
        self._log_file.write(line + "\n")
        self._log_file.flush()

