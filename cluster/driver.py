"""The distributed run: Redis, Ray, the actors, and the loop that keeps them busy.

``ClusterRun(config, run_dir).run()`` connects to Ray (``ray.address`` or a local Ray)
and to Redis (``redis.url`` or an embedded server in the run directory), publishes
the initial network as version 000000, starts the inference servers (one per GPU, or
one on the CPU; see cluster/inference_pool.py), the self-play workers, the learner
and the gatekeeper, then loops: workers play in chunks, the learner trains and
publishes candidates, the newest candidate is gated against the best, and a promotion
is pushed to the inference servers (weights, hash-checked) and to the workers (the
version their samples carry). It stops on the config's stop section, ``minutes``,
Ctrl-C or SIGTERM, and leaves the best model in ``RUN_DIR/best`` (every promoted one
in ``RUN_DIR/models``). A run directory that already holds a run is continued: the
embedded Redis replays its AOF (stream, registry, ladder) and the learner restores
its checkpoint (``tengen train`` asks for ``--resume`` first, so that this never
happens by accident).

Faults are normal on a cluster of spot nodes, and the driver is where they end:

- an actor that dies or raises is replaced (cluster/supervision.py: a growing pause
  between tries, and a crash loop stops the run with its error); the run holds its
  self-play worker count; an inference server that dies is restarted and keeps its
  workers, which send their waiting leaves again; a gatekeeper lost mid-match has
  the match played again; a new learner resumes from its checkpoint and the stream;
- Redis may go away for up to ``redis.outage_s`` (every client waits for it, workers
  keep their games); the embedded server, if it dies, is restarted on its AOF; past
  the limit the run stops, after a final checkpoint, saying that Redis was away;
- GPU nodes that join get servers and workers of their own; a node that leaves takes
  its servers and their workers with it.

The driver itself is not replaced: a lost head node is restarted from outside with
``tengen train --resume`` (deploy/). A status line goes to the terminal every few
seconds and ``RUN_DIR/status.json`` is rewritten with it; ``tengen status`` reads
that file, or Redis while the run lives.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tengen.cluster.actors import GatekeeperActor, LearnerActor, SelfPlayActor, SelfPlayReport
from tengen.cluster.inference_pool import CPU_SERVER, InferencePool, learner_gpu_share
from tengen.cluster.keys import RunKeys
from tengen.cluster.metrics import RunMetrics
from tengen.cluster.redis_client import OutagePolicy, RedisUnavailable, ResilientRedis
from tengen.cluster.redis_server import HOST, EmbeddedRedis, EmbeddedRedisError, connect, resolve_password
from tengen.cluster.registry import ModelRegistry
from tengen.cluster.status_board import StatusBoard, memory_by_part
from tengen.cluster.stream import SampleStream
from tengen.cluster.supervision import CrashLoop, Supervisor, root_cause
from tengen.run.config import TengenConfig, stream_maxlen
from tengen.run.loop import TrainingLoop, stop_on_sigterm
from tengen.run.run_dir import RunDir, RunDirError, version_id

if TYPE_CHECKING:
    from tengen.learner.learner import LearnerStep
    from tengen.workers.gatekeeper import GatingResult

__all__ = ["ClusterRun"]

_REPORT_S = 5.0
_MEMORY_REPORT_S = 30.0


class ClusterRun:
    def __init__(self, config: TengenConfig, run_dir: str | Path, *, address: str | None = None,
                 redis_url: str | None = None, minutes: float | None = None, workers: int | None = None,
                 resume: bool = False, log: Callable[[str], None] = print):
        # The arguments are overrides of the config's keys: folded in, so that the run
        # directory's config.yaml is what the run used (and --resume uses it again).
        config = self.config = config.with_changes({"ray.address": address, "redis.url": redis_url,
                                                    "stop.minutes": minutes, "cluster.workers": workers})
        self.run_dir = Path(run_dir)
        self.files = RunDir(self.run_dir)
        self.run_id = ""  # from run.json, once run() has made or read it
        self.address = config.ray.address
        self.redis_url = config.redis.url
        self.requested_workers = config.cluster.workers
        self.resume = resume
        self._print = log
        self.game = config.game.make()
        self.redis: EmbeddedRedis | None = None
        self.client: ResilientRedis | None = None
        #: the training loop's state and decisions (run/loop.py), once run() made it
        self.loop: TrainingLoop | None = None
        self.server_stats: dict = {}
        self.supervisor = Supervisor(failures=config.cluster.crash_loop_failures,
                                     window_s=config.cluster.crash_loop_s, log=self.log)
        #: why the run was asked to stop (SIGTERM, a program's request), None while it runs
        self._stop_requested: str | None = None
        #: set by the thread that keeps the embedded Redis when it gave up
        self._redis_failure: CrashLoop | None = None
        #: the learner actor's handle while the run lives (tests kill it to check recovery)
        self.learner: Any = None
        self.gatekeeper: Any = None
        self.pool: InferencePool | None = None
        #: the self-play worker actors and their chunk in flight, by worker id
        self.workers: dict[str, Any] = {}
        self.worker_refs: dict[str, Any] = {}
        self.target_workers = 0
        self._next_worker = 0
        self._worker_starts: dict[str, int] = {}
        self._applied_scale: int | None = None
        #: parts to start again once their pause is over: name -> (when, how)
        self._due: dict[str, tuple[float, Callable[[], None]]] = {}
        self._learner_ref: Any = None
        self._gate_ref: Any = None
        self._candidate = -1  # the one in the match in flight

    # -- start-up ---------------------------------------------------------------------
    def _start_redis(self) -> tuple[str, str | None]:
        files = self.files
        if self.redis_url:
            # `tengen status` and `tengen scale` find the run's Redis here (a --redis URL
            # is not in the config file); its password stays in the environment.
            files.write_private(files.connection, json.dumps({"url": self.redis_url}).encode())
            return self.redis_url, resolve_password()
        # On a Ray cluster, workers on other nodes must reach it: bind the node's address
        # too (the password guards it). Locally, loopback only.
        host = ray.util.get_node_ip_address() if self.address else HOST
        maxmemory = self.config.redis.maxmemory_mb
        self.redis = EmbeddedRedis(data_dir=files.redis, host=host,
                                   maxmemory_bytes=(maxmemory << 20) if maxmemory else _default_maxmemory())
        self.redis.start()
        if self.redis.stopped_orphan:
            self.log(f"stopped the Redis (pid {self.redis.stopped_orphan}) that a dead driver left on {files.redis}")
        # `tengen status` reads the live run with these; readable by the owner only.
        files.write_private(files.connection,
                            json.dumps({"url": self.redis.url, "password": self.redis.password}).encode())
        return self.redis.url, self.redis.password

    def _start_ray(self) -> None:
        env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}}  # no secret here: Ray shows runtime_env to anyone
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

    def _refuse_a_taken_run_id(self, redis_url: str, password: str | None) -> None:
        """A new run must not write into another run's keys (before Ray starts: it is
        a usage error, not a fault)."""
        keys = RunKeys(self.run_id)
        client = connect(redis_url, password=password, policy=OutagePolicy(outage_s=self.config.redis.outage_s))
        taken = client.exists(keys.best, keys.models, keys.samples)
        client.close()
        if taken:
            raise RunDirError(f"the Redis at {self.redis_url or 'the run directory'} already holds a run with id "
                              f"{self.run_id!r}: resume it with --resume, or start in another --run-dir")

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
        files = self.files
        files.path.mkdir(parents=True, exist_ok=True)
        self.run_id = files.create_identity()
        files.config.write_text(self.config.to_yaml())
        self._log_file = open(files.log, "a", encoding="utf-8")  # noqa: SIM115
        restore: Callable[[], None] = lambda: None  # noqa: E731
        keeper_stop = threading.Event()
        keeper: threading.Thread | None = None
        try:
            redis_url, password = self._start_redis()
            try:
                if not self.resume:
                    self._refuse_a_taken_run_id(redis_url, password)
                if self.redis is not None:
                    keeper = threading.Thread(target=self._keep_redis, args=(keeper_stop,), name="redis-keeper",
                                              daemon=True)
                    keeper.start()
                self._start_ray()
                # After ray.init, whose core worker installs a SIGTERM handler that exits at once.
                restore = stop_on_sigterm(self.request_stop)
                try:
                    return self._loop(redis_url, password)
                finally:
                    ray.shutdown()
            finally:
                keeper_stop.set()
                if keeper is not None:
                    keeper.join()
                if self.redis:
                    self.redis.stop()  # last: the final checkpoint and save needed it
        finally:
            restore()
            self._log_file.close()

    def _loop(self, redis_url: str, password: str | None) -> dict:
        cfg = self.config
        client = self.client = connect(redis_url, password=password,
                                       policy=OutagePolicy(outage_s=cfg.redis.outage_s), log=self.log)
        registry = ModelRegistry(client, self.run_id)
        stream = SampleStream(client, self.run_id, maxlen=stream_maxlen(cfg))
        status = StatusBoard(client, self.run_id)
        metrics = RunMetrics(self.run_id)
        loop = self.loop = TrainingLoop(cfg, self.files, registry, log=self.log, metrics=metrics)
        best = loop.begin(resume=self.resume)
        blob, _ = registry.fetch(best)
        self._config_dict = cfg.model_dump(mode="json")
        self._redis = (redis_url, password)
        gpus = learner_gpu_share(ray.cluster_resources().get("GPU", 0))
        self._start_learner()
        learner_node = ray.get(self.learner.node_id.remote(), timeout=300) if gpus else None
        pool = self.pool = InferencePool(run=self.run_id, network=cfg.network_spec(), max_batch=cfg.cluster.max_batch,
                                         batch_timeout_ms=cfg.cluster.batch_timeout_ms,
                                         cpu_model_calls=cfg.cluster.cpu_server_model_calls)
        first_servers = pool.start(blob, best, learner_node=learner_node, learner_gpus=gpus)
        self._start_gatekeeper()
        if self.requested_workers or first_servers == [CPU_SERVER]:
            self._add_workers(self._worker_count())
        else:
            for key in first_servers:
                self._add_workers(cfg.cluster.workers_per_gpu, server=key)
        pool.update_clients()
        self.log(f"run {self.run_id}: {self.game.name}, {len(self.workers)} self-play workers, "
                 f"{len(pool.servers)} inference servers, redis {redis_url}, ray {self.address or 'local'}; "
                 f"best {version_id(best)}"
                 + (", resumed" if self.resume else "")
                 + " (the first games wait for the search kernels to compile: up to a minute on a fresh install)")

        last_status = time.monotonic()
        last_memory = 0.0
        memory: dict = {}
        try:
            while not (loop.should_stop() or self._stop_requested):
                if self._redis_failure is not None:
                    raise self._redis_failure
                self._start_due()
                for ref in self._wait():
                    self._dispatch(ref)
                if self._gate_ref is None and self.gatekeeper is not None:
                    candidate = loop.next_match()
                    if candidate is not None:
                        self._candidate = candidate
                        self._gate_ref = self.gatekeeper.gate.remote(candidate, loop.best_version)
                wanted = self._try_redis(status.desired_workers)
                if wanted and wanted != self._applied_scale:
                    # A request applies once: GPU nodes that join later add workers on top.
                    self._applied_scale = wanted
                    self._scale(wanted)
                if time.monotonic() - last_status >= _REPORT_S:
                    last_status = time.monotonic()
                    self._sync_pool()
                    self._hold_workers()
                    metrics.set("tengen_workers_alive", len(self.workers))
                    if time.monotonic() - last_memory >= _MEMORY_REPORT_S:
                        last_memory = time.monotonic()
                        memory = self._try_redis(lambda: memory_by_part(client, self.run_id)) or memory
                    self._report(stream, status, memory)
        except KeyboardInterrupt:
            self.log("interrupted: stopping cleanly")
        except (CrashLoop, RedisUnavailable) as e:
            loop.error = str(e)
            self.log(f"stopping: {e}")
        if self._stop_requested:
            self.log(f"{self._stop_requested}: stopping cleanly")
        return self._finish(stream, status, memory)

    def request_stop(self, why: str = "asked to stop") -> None:
        """Stop at the loop's next pass, cleanly (SIGTERM, or a program that runs the
        run in a thread)."""
        self._stop_requested = self._stop_requested or why

    def _finish(self, stream: SampleStream, status: StatusBoard, memory: dict) -> dict:
        """The final checkpoint (to storage, not Redis: it works when Redis is gone),
        the best model saved, the last report."""
        assert self.loop is not None and self.client is not None
        if self.learner is not None:
            try:
                # Queued behind the step in flight: the stats of what the checkpoint holds.
                self.loop.learner_stats = ray.get(self.learner.checkpoint.remote(), timeout=120)
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as e:
                self.log(f"final learner checkpoint failed ({type(e).__name__}); the last one stands")
        # Once each: a stop must not wait out an outage (Kubernetes kills after its grace period).
        try:
            with self.client.impatient():
                self.loop.save_best()
                # The learner's last steps may have published candidates no report showed.
                self.loop.prune_registry()
        except RedisUnavailable:
            self.log("the best model stays as saved at its promotion (Redis is away)")
        try:
            with self.client.impatient():
                memory = memory_by_part(self.client, self.run_id)
                self._report(stream, status, memory, final=True)
        except RedisUnavailable:
            self._report(stream, status, memory, redis=False, final=True)  # status.json at least
        return self.loop.summary()

    # -- what came back ---------------------------------------------------------------
    def _wait(self, timeout_s: float = 1.0) -> list:
        """What came back: the first within ``timeout_s``, with all that are ready then."""
        refs = list(self.worker_refs.values()) + [r for r in (self._learner_ref, self._gate_ref) if r is not None]
        if not refs:
            time.sleep(timeout_s)
            return []
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return ready

    def _dispatch(self, ref: Any) -> None:
        assert self.loop is not None
        if ref is self._learner_ref:
            self._learner_ref = None
            try:
                stats: LearnerStep = ray.get(ref)
            except ray.exceptions.RayError as e:
                self._failed("learner", e, self._start_learner, lost=self.learner)
                self.learner = None
                return
            self.supervisor.succeeded("learner")
            self.loop.learner_reported(stats)
            self._learner_ref = self.learner.step.remote(1.0, self.loop.best_version)
        elif ref is self._gate_ref:
            self._gate_ref = None
            try:
                result: GatingResult = ray.get(ref)
            except ray.exceptions.RayError as e:
                # A new gatekeeper plays the match again (or a newer candidate's).
                self.loop.match_cut_off(self._candidate)
                self._failed("gatekeeper", e, self._start_gatekeeper, lost=self.gatekeeper)
                self.gatekeeper = None
                return
            self.supervisor.succeeded("gatekeeper")
            promoted = self.loop.gated(result)
            if promoted is not None:
                self._push_best(promoted)
        else:
            wid = next((w for w, r in self.worker_refs.items() if r is ref), None)
            if wid is not None:  # else dropped since the wait
                self._worker_back(wid, ref)

    def _worker_back(self, wid: str, ref: Any) -> None:
        assert self.pool is not None
        try:
            stats: SelfPlayReport = ray.get(ref)
        except ray.exceptions.RayError as e:
            # Its node went away, or it was killed, or it raised: a new one takes its place.
            self._drop_worker(wid, keep_slot=True)
            self._failed(f"worker {wid}", e, lambda: self._start_worker(wid))
            return
        self.supervisor.succeeded(f"worker {wid}")
        assert self.loop is not None
        self.loop.worker_reported(wid, stats["incarnation"], stats)
        worker = self.workers[wid]
        lost = stats.get("server_lost")
        key = self.pool.server_of(wid)
        if lost is not None and key is not None:
            # Each of its workers reports the same death: it counts once.
            if self.pool.handle_id(key) == lost and f"inference {key}" not in self._due:
                self._server_lost(key, RuntimeError(f"it stopped answering {wid} (actor {lost[:8]})"))
            if key in self.pool.servers:
                worker.set_server.remote(self.pool.handle(key))
        self.worker_refs[wid] = worker.run_for.remote(self.config.cluster.worker_chunk_seconds)

    def _failed(self, name: str, error: BaseException, restart: Callable[[], None], *, lost: Any = None) -> None:
        """``name`` failed: stop the run if Redis is gone for good, else replace it
        after the supervisor's pause (a crash loop raises)."""
        cause = root_cause(error)
        if isinstance(cause, RedisUnavailable) and cause.expired:
            raise cause
        what = "lost" if isinstance(error, ray.exceptions.RayActorError) else "failed"
        delay = self.supervisor.failed(name, error, what=what)
        if lost is not None:
            _kill(lost)
        self._due[name] = (time.monotonic() + delay, restart)

    def _start_due(self) -> None:
        now = time.monotonic()
        for name, (when, start) in list(self._due.items()):
            if when <= now:
                del self._due[name]
                start()

    def _redis_args(self) -> tuple[str, Any]:
        """The Redis URL and the password for a new actor: the password travels in the
        object store only (never in runtime_env, which Ray's dashboard shows), put
        anew for each actor, since one ObjectRef shared by every actor's creation was
        once found freed under a live run ("owner is unknown") after workers came and went."""
        url, password = self._redis
        return url, ray.put(password)

    # -- the parts ----------------------------------------------------------------------
    def _start_gatekeeper(self) -> None:
        url, password = self._redis_args()
        self.gatekeeper = ray.remote(GatekeeperActor).options(num_cpus=0).remote(
            self._config_dict, self.run_id, url, password, self.config.seed + 1)

    def _start_learner(self) -> None:
        url, password = self._redis_args()
        storage = self.config.storage or str(self.files.learner)
        gpus = learner_gpu_share(ray.cluster_resources().get("GPU", 0))
        # A new learner resumes from its checkpoint and the stream.
        self.learner = ray.remote(LearnerActor).options(num_cpus=1, num_gpus=gpus).remote(
            self._config_dict, self.run_id, url, password, storage, self.config.seed)
        assert self.loop is not None
        self._learner_ref = self.learner.step.remote(1.0, self.loop.best_version)

    def _add_workers(self, count: int, server: str | None = None) -> None:
        """``count`` more workers for the run to hold (on ``server``, or the least
        loaded each time)."""
        self.target_workers += count
        self._start_new_workers(count, server)

    def _start_new_workers(self, count: int, server: str | None = None) -> None:
        for _ in range(count):
            index, self._next_worker = self._next_worker, self._next_worker + 1
            self._start_worker(f"w{index:03d}", server)

    def _start_worker(self, wid: str, server: str | None = None) -> None:
        assert self.pool is not None
        if wid in self.workers:
            return
        handle, node = self.pool.attach(wid, server)
        # Next to their GPU server when it has one; else SPREAD: workers go to
        # different nodes first, so losing a node loses few.
        placement: Any = (NodeAffinitySchedulingStrategy(node, soft=True) if node else "SPREAD")
        url, password = self._redis_args()
        # A replacement plays other games than the worker it replaces.
        starts = self._worker_starts[wid] = self._worker_starts.get(wid, 0) + 1
        seed = (self.config.seed * 1000 + int(wid[1:])) * 1000 + starts - 1
        worker: Any = ray.remote(SelfPlayActor).options(num_cpus=1, scheduling_strategy=placement).remote(
            self._config_dict, self.run_id, url, password, handle, wid, seed, self._best_version())
        self.workers[wid] = worker
        self.worker_refs[wid] = worker.run_for.remote(self.config.cluster.worker_chunk_seconds)
        self.pool.update_clients()

    def _drop_worker(self, wid: str, *, keep_slot: bool = False) -> None:
        """Stop and forget a worker (``keep_slot``: a replacement will take its id)."""
        assert self.pool is not None
        handle = self.workers.pop(wid, None)
        self.worker_refs.pop(wid, None)
        self.pool.detach(wid)
        if not keep_slot:
            self._due.pop(f"worker {wid}", None)
            self.supervisor.forget(f"worker {wid}")
        if handle is not None:
            _kill(handle)  # a no-op for a dead actor; stops a live one whose server is gone

    def _hold_workers(self) -> None:
        """Start workers until the run has as many as it should (lost ones are
        replaced by their own pause; this covers anything else that went missing)."""
        waiting = sum(1 for name in self._due if name.startswith("worker "))
        missing = self.target_workers - len(self.workers) - waiting
        if missing > 0:
            self._start_new_workers(missing)

    def _server_lost(self, key: str, error: BaseException) -> None:
        """An inference server on a live node died or stopped answering: a new one, with
        its workers, after the supervisor's pause."""
        assert self.pool is not None
        delay = self.supervisor.failed(f"inference {key}", error, what="lost")

        def restart() -> None:
            assert self.pool is not None
            if key not in self.pool.servers:
                return  # its node went meanwhile
            handle = self.pool.restart(key)
            if handle is None:
                return  # its node is gone: the next sync drops it with its workers
            for wid in self.pool.servers[key].workers:
                if wid in self.workers:
                    self.workers[wid].set_server.remote(handle)
            self.pool.update_clients()
            self.log(f"inference server {key} restarted with {len(self.pool.servers[key].workers)} workers")

        if delay:
            self._due[f"inference {key}"] = (time.monotonic() + delay, restart)
        else:
            restart()

    def _sync_pool(self) -> None:
        """Servers (and their workers) for GPU nodes that joined; drop what left; restart
        servers that stopped answering."""
        assert self.pool is not None
        before = set(self.pool.servers)
        added, orphans = self.pool.sync()
        self.server_stats, failed = self.pool.stats()
        for key in failed:
            if key in self.pool.servers and f"inference {key}" not in self._due:
                self._server_lost(key, RuntimeError("its stats call failed"))
        # The workers of a server whose node left were placed for that GPU: they go too.
        for wid in orphans:
            self._drop_worker(wid)
        self.target_workers -= len(orphans)
        for key in added:
            if key.startswith("gpu:"):
                self._add_workers(self.config.cluster.workers_per_gpu, server=key)
        if self.target_workers < 1:  # the last GPU node went: carry on on the CPU server
            self._add_workers(self._worker_count() - self.target_workers)
        gone = before - set(self.pool.servers)
        if added or gone:
            self.log(f"inference servers: {len(self.pool.servers)} (+{len(added)} -{len(gone)}), "
                     f"self-play workers: {len(self.workers)} (-{len(orphans)} with a lost server)")
        self.pool.update_clients()

    def _scale(self, wanted: int) -> None:
        if self.target_workers < wanted:
            self._add_workers(wanted - self.target_workers)
        while self.target_workers > wanted:
            wid = sorted(set(self.workers) | {n.split(" ", 1)[1] for n in self._due if n.startswith("worker ")})[-1]
            self._drop_worker(wid)
            self.target_workers -= 1
        assert self.pool is not None
        self.pool.update_clients()
        self.log(f"scaled to {self.target_workers} self-play workers")

    def _push_best(self, version: int) -> None:
        """A promoted model to every inference server (hash-checked) and its version to
        every worker, for the samples they record from now on."""
        from tengen.engine.network import blob_sha256

        assert self.pool is not None and self.loop is not None
        blob, _ = self.loop.registry.fetch(version)
        for key in self.pool.load_weights(blob, blob_sha256(blob), version):
            # A server started later gets these weights from the start.
            self._server_lost(key, RuntimeError(f"it failed to load {version_id(version)}"))
        for w in self.workers.values():
            w.set_model_version.remote(version)

    def _best_version(self) -> int:
        return self.loop.best_version if self.loop is not None else 0

    # -- Redis --------------------------------------------------------------------------
    def _keep_redis(self, stop: threading.Event) -> None:
        """A thread of its own: the embedded server back on its port and AOF whenever it
        dies, even while the driver's loop waits on Redis (the run's clients wait for
        it meanwhile). A server that keeps dying is a crash loop the loop stops on."""
        assert self.redis is not None
        while not stop.wait(0.5):
            if self.redis.running:
                continue
            died = RuntimeError(f"redis-server exited; log tail:\n{self.redis.log_tail(5)}")
            try:
                self.supervisor.failed("redis", died, what="died")
            except CrashLoop as e:
                self._redis_failure = e
                return
            try:
                self.redis.restart()
            except EmbeddedRedisError as e:
                self.log(f"the run's Redis did not start again: {e}")
                continue
            self.log(f"the run's Redis is back on port {self.redis.port} with its AOF")
            self.supervisor.succeeded("redis")

    def _try_redis(self, op: Callable[[], Any]) -> Any:
        """``op()`` with its commands tried once, or None while Redis is away (the
        driver has workers to keep busy meanwhile); past ``redis.outage_s`` the
        RedisUnavailable stops the run."""
        assert self.client is not None
        try:
            with self.client.impatient():
                return op()
        except RedisUnavailable as e:
            if e.expired:
                raise
            return None

    # -- the run's state ------------------------------------------------------------------
    def _report(self, stream: SampleStream, status: StatusBoard, memory: dict, *, redis: bool = True,
                final: bool = False) -> None:
        """The loop's status line with what this wiring adds (workers, servers, Redis),
        also on the run's status board while Redis answers; the run directory's sample
        of games is read from the stream then too."""
        assert self.loop is not None
        if redis:
            loop = self.loop
            self._try_redis(lambda: loop.keep_games(stream))
        line = self.loop.report(
            final=final, mean_batch=round(self.server_stats.get("mean_batch_size", 0.0), 1), workers=len(self.workers),
            target_workers=self.target_workers, inference_servers=len(self.pool.servers) if self.pool else 0,
            stream_length=self._try_redis(stream.length) if redis else None,
            redis_outage_s=round(self.client.outage_seconds, 1) if self.client else 0.0,
            redis_memory=memory, components=self.supervisor.report())
        if redis:
            self._try_redis(lambda: status.set_status("driver", line.to_json(), wait=False))

    def log(self, line: str) -> None:
        self._print(line)
        log_file = getattr(self, "_log_file", None)
        if log_file is not None and not log_file.closed:
            log_file.write(line + "\n")
            log_file.flush()


def _kill(handle: Any) -> None:
    try:
        ray.kill(handle)
    except (ValueError, ray.exceptions.RayError):
        pass  # gone already


def _default_maxmemory() -> int:
    """A quarter of this machine's memory, at least 256 MiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return max(256 << 20, total // 4)
