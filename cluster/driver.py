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
  its servers and their workers with it;
- a part that Ray has not placed within ``cluster.start_timeout_s`` (no node has room
  for it) is reported in the status and the log with the reason and started again,
  placed anew from the nodes alive, once per that many seconds (cluster/placement.py);
  the learner comes first: while it cannot be placed no worker starts and running
  workers are stopped one at a time to free a CPU for it, and once it runs the worker
  count is held again (a server that cannot be placed comes next).

The driver itself is not replaced: a lost head node is restarted from outside with
``tengen train --resume`` (deploy/). A status line goes to the terminal every few
seconds and ``RUN_DIR/status.json`` is rewritten with it; ``tengen status`` reads
that file, or Redis while the run lives.

``ClusterRun`` keeps the run's lifecycle: Redis (and the thread that restarts an
embedded one) and Ray started and stopped, the learner, the main loop that waits on
what the actors send back, the stop on a request, a signal or an error, and the
final checkpoint and report. It holds the rest, a concern each: the self-play
workers and inference servers (``Fleet``, cluster/fleet.py), the gatekeeper and what
a promotion does (``Promotion``, cluster/promotion.py), and the reports
(``Reporting``, cluster/reporting.py); the training loop's decisions are run/loop.py's.
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
import redis
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tengen.cluster.actors import ActorSetup, LearnerActor
from tengen.cluster.deadlines import Deadlines, Hung, learner_deadline_s
from tengen.cluster.fleet import Fleet
from tengen.cluster.keys import RunKeys
from tengen.cluster.lease import DriverLease, LeaseLost
from tengen.cluster.metrics import RunMetrics
from tengen.cluster.placement import (
    LearnerPlan,
    Starting,
    actor_states,
    explain,
    explain_text,
    nodes_alive,
    plan_learner,
)
from tengen.cluster.promotion import Promotion
from tengen.cluster.redis_client import OutagePolicy, RedisUnavailable, ResilientRedis
from tengen.cluster.redis_server import (
    HOST,
    PASSWORD_ENV,
    USERNAME_ENV,
    DamagedAofError,
    EmbeddedRedis,
    EmbeddedRedisError,
    connect,
    resolve_password,
)
from tengen.cluster.registry import ModelRegistry
from tengen.cluster.reporting import Reporting
from tengen.cluster.status_board import StatusBoard
from tengen.cluster.stream import SampleStream
from tengen.cluster.strength import Strength
from tengen.cluster.supervision import CrashLoop, Supervisor, kill_actor
from tengen.engine.backend import use_backend
from tengen.learner.storage import LocalStorage
from tengen.run.config import TengenConfig, stream_maxlen
from tengen.run.loop import TrainingLoop, stop_on_sigterm
from tengen.run.outage import ResilientStorage, StorageUnavailable
from tengen.run.run_dir import RunDir, RunDirError, version_id
from tengen.run.run_log import RunLog
from tengen.run.wording import counted

if TYPE_CHECKING:
    from tengen.learner.learner import LearnerStats, LearnerStep

__all__ = ["ClusterRun", "RunStartError"]

#: the seconds of training each learner step asks for: the driver hears from it that often
LEARNER_STEP_S = 1.0
#: how long a run waits at its start for its Redis to answer (later, redis.outage_s)
FIRST_CONTACT_S = 30.0
#: how often a learner placed without a GPU (none was alive) looks for one that joined
GPU_LOOK_EVERY_S = 30.0


class RunStartError(RuntimeError):
    """The run cannot start; the message says what is wrong and what to do."""


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
        self.resume = resume
        self._print = log
        self.game = config.game.make()
        self.redis: EmbeddedRedis | None = None
        self.client: ResilientRedis | None = None
        #: the training loop's state and decisions (run/loop.py), once run() made it
        self.loop: TrainingLoop | None = None
        #: the workers and servers, the gatekeeper and promotions, the reports: once run() made them
        self.fleet: Fleet | None = None
        self.promotion: Promotion | None = None
        self.strength: Strength | None = None
        self.reporting: Reporting | None = None
        self.supervisor = Supervisor(failures=config.cluster.crash_loop_failures,
                                     window_s=config.cluster.crash_loop_s, log=self.log)
        #: the parts started that do not run yet (cluster/placement.py)
        self.starting = Starting(bound_s=config.cluster.start_timeout_s, log=self.log)
        #: the calls in flight past their deadline are hung parts (a part still starting is the placement's)
        self.deadlines = Deadlines(exempt=self.starting.waits)
        #: why the run was asked to stop (SIGTERM, a program's request), None while it runs
        self._stop_requested: str | None = None
        #: set by the thread that keeps the embedded Redis when it gave up
        self._redis_failure: CrashLoop | None = None
        #: the learner actor's handle while the run lives (tests kill it to check recovery)
        self.learner: Any = None
        self._learner_ref: Any = None
        #: where the learner was last placed
        self._learner_plan: LearnerPlan | None = None
        self._gpu_looked = float("-inf")
        self._setup: ActorSetup | None = None
        self._log_file: RunLog | None = None
        #: this driver's hold on the run (cluster/lease.py), once run() took it
        self.lease: DriverLease | None = None
        #: the learner's checkpoints as this driver keeps them, and those the disk refused
        self._checkpoints = ResilientStorage(lambda: LocalStorage(self.files.learner), url=str(self.files.learner),
                                             outage_s=config.storage_outage_s, log=self.log)
        self._unkept: dict[str, bytes] = {}

    # -- start-up ---------------------------------------------------------------------
    def _start_redis(self) -> tuple[str, str | None]:
        files = self.files
        if self.redis_url:
            return self.redis_url, resolve_password()
        # On a Ray cluster, workers on other nodes must reach it: bind the node's address
        # too (the password guards it). Locally, loopback only.
        host = ray.util.get_node_ip_address() if self.address else HOST
        maxmemory = self.config.redis.maxmemory_mb
        self.redis = EmbeddedRedis(data_dir=files.redis, host=host,
                                   maxmemory_bytes=(maxmemory << 20) if maxmemory else _default_maxmemory())
        try:
            self.redis.start()
        except DamagedAofError as e:
            raise RunStartError(
                f"the run's Redis cannot load its append-only file in {files.redis} ({e.reason}): repair it with "
                f"`tengen repair-aof --run-dir {files.path}` (it keeps a copy and cuts the file where it is "
                "damaged), then resume") from None
        except EmbeddedRedisError as e:
            raise RunStartError(f"the run's Redis did not start: {str(e).splitlines()[0]} (its log: "
                                f"{self.redis.log_path})") from None
        if self.redis.stopped_orphan:
            self.log(f"stopped the Redis (pid {self.redis.stopped_orphan}) that a dead driver left on {files.redis}")
        return self.redis.url, self.redis.password

    def _record_connection(self, redis_url: str) -> None:
        """Where `tengen status`, `tengen scale` and `tengen serve` find the live run's
        Redis (owner-readable only): the embedded server's URL and password, or an
        external one's URL (not in the config file when it came from --redis; its
        password stays in the environment)."""
        connection = {"url": redis_url} if self.redis is None else {"url": self.redis.url,
                                                                      "password": self.redis.password,
                                                                      "server": self.redis.binary.describe()}
        self.files.write_private(self.files.connection, json.dumps(connection).encode())

    def _start_ray(self) -> None:
        # no secret here: Ray shows runtime_env to anyone. Every actor builds its network
        # on the run's backend (the command chose it: engine/backend.py).
        env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": use_backend(self.config.network.backend)}}
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

    def _first_contact(self, redis_url: str, password: str | None) -> None:
        """The run's Redis answers and takes its password, or the run does not start
        (``RunStartError``). A run waits ``redis.outage_s`` for a Redis that goes away
        later; at the start one that does not answer is more likely a wrong address, and
        a silent wait of 15 minutes was the answer to a typo."""
        wait_s = min(FIRST_CONTACT_S, self.config.redis.outage_s)
        client = connect(redis_url, password=password, policy=OutagePolicy(outage_s=wait_s))
        try:
            client.ping()
        except RedisUnavailable as e:
            cause = e.__cause__ or client.last_error or e
            raise RunStartError(
                f"cannot reach the Redis at {redis_url} within {wait_s:.0f} s ({type(cause).__name__}: {cause}): "
                "start it, correct --redis (redis.url), or leave both out for a Redis of the run's own") from None
        except (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError) as e:
            raise RunStartError(
                f"the Redis at {redis_url} refused tengen ({e}): set ${PASSWORD_ENV} (and ${USERNAME_ENV} for an "
                "ACL user) to what it expects") from None
        finally:
            client.close()

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

    # -- the run ----------------------------------------------------------------------
    def run(self) -> dict:
        files = self.files
        files.path.mkdir(parents=True, exist_ok=True)
        self.run_id = files.create_identity()
        restore: Callable[[], None] = lambda: None  # noqa: E731
        keeper_stop = threading.Event()
        keeper: threading.Thread | None = None
        try:
            redis_url, password = self._start_redis()
            try:
                self._first_contact(redis_url, password)
                if not self.resume:
                    self._refuse_a_taken_run_id(redis_url, password)
                # One driver per run, before it writes anything into the run directory (a
                # second one is a usage error, not a fault).
                self.lease = DriverLease(connect(redis_url, password=password,
                                                 policy=OutagePolicy(outage_s=self.config.redis.outage_s)),
                                         self.run_id).acquire()
                files.write(files.config, self.config.to_yaml().encode())
                run = self.config.run
                self._log_file = RunLog(files, max_bytes=int(run.log_mb * 2**20), keep=run.log_files)
                self._record_connection(redis_url)
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
            if self._log_file is not None:
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
        setup = self._setup = ActorSetup(cfg.model_dump(mode="json"), self.run_id, redis_url, password)
        fleet = self.fleet = Fleet(cfg, setup, self.supervisor, loop, starting=self.starting,
                                   deadlines=self.deadlines, log=self.log)
        promotion = self.promotion = Promotion(cfg, setup, self.supervisor, loop, fleet, client=client,
                                               deadlines=self.deadlines, log=self.log)
        strength = self.strength = Strength(cfg, setup, self.supervisor, loop, deadlines=self.deadlines,
                                            log=self.log)
        # The learner first: the servers get what its node has left beside it.
        self._start_learner()
        first_servers = fleet.start_servers(blob, best)
        promotion.start_gatekeeper()
        strength.start()
        fleet.start_workers(first_servers)
        workers, servers = len(fleet.workers), len(fleet.pool.servers)
        self.log(f"run {self.run_id}: {self.game.name}, {counted(workers, 'self-play worker')}, "
                 f"{counted(servers, 'inference server')}, redis {redis_url}"
                 + (f" ({self.redis.binary.describe()})" if self.redis is not None else "")
                 + f", ray {self.address or 'local'}; "
                 f"best {version_id(best)}"
                 + (", resumed" if self.resume else "")
                 + " (the first games wait for the search kernels to compile: up to a minute on a fresh install)")

        reporting = self.reporting = Reporting(loop, fleet, self.supervisor, run_id=self.run_id, client=client,
                                               stream=stream, status=status, metrics=metrics)
        try:
            while not (loop.should_stop() or self._stop_requested):
                if self._redis_failure is not None:
                    raise self._redis_failure
                if self.lease is not None:
                    self.lease.renew()
                self.supervisor.start_due()
                for ref in self._wait():
                    self._dispatch(ref)
                self.deadlines.check()
                promotion.next_match()
                strength.next()
                fleet.requested(client.try_once(status.desired_workers))
                if reporting.due():
                    fleet.sync()
                    self._place()
                    fleet.hold_workers()
                    reporting.report()
        except KeyboardInterrupt:
            self.log("interrupted: stopping cleanly")
        except (CrashLoop, RedisUnavailable, LeaseLost, StorageUnavailable) as e:
            loop.error = str(e)
            self.log(f"stopping: {e}")
        if self._stop_requested:
            self.log(f"{self._stop_requested}: stopping cleanly")
        return self._finish()

    def request_stop(self, why: str = "asked to stop") -> None:
        """Stop at the loop's next pass, cleanly (SIGTERM, or a program that runs the
        run in a thread)."""
        self._stop_requested = self._stop_requested or why

    def _finish(self) -> dict:
        """The final checkpoint (to storage, not Redis: it works when Redis is gone),
        the best model saved, the last report."""
        assert self.loop is not None and self.promotion is not None and self.reporting is not None
        if self.learner is not None and self.starting.waits("learner"):
            self.log("the learner never started: the last checkpoint stands")
        elif self.learner is not None:
            try:
                # Queued behind the step in flight: the stats of what the checkpoint holds.
                stats = ray.get(self.learner.checkpoint.remote(), timeout=120)
                for line in stats.pop("said", []):
                    self.log(line)
                self.loop.learner_stats = stats
                self._keep_checkpoints(stats)
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError, StorageUnavailable) as e:
                self.log(f"final learner checkpoint failed ({type(e).__name__}); the last one stands")
        self.promotion.finish()
        self.reporting.final()
        if self.lease is not None:
            self.lease.release()
        return self.loop.summary()

    # -- what came back ---------------------------------------------------------------
    def _wait(self, timeout_s: float = 1.0) -> list:
        """What came back: the first within ``timeout_s``, with all that are ready then."""
        assert self.fleet is not None and self.promotion is not None and self.strength is not None
        learner = [self._learner_ref] if self._learner_ref is not None else []
        refs = self.fleet.refs() + self.promotion.refs() + self.strength.refs() + learner
        if not refs:
            time.sleep(timeout_s)
            return []
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        return ready

    def _dispatch(self, ref: Any) -> None:
        assert self.loop is not None and self.fleet is not None and self.promotion is not None
        if ref is self._learner_ref:
            self._learner_ref = None
            try:
                stats: LearnerStep = ray.get(ref)
            except ray.exceptions.RayError as e:
                self.supervisor.replace("learner", e, self._start_learner, lost=self.learner)
                self.learner = None
                return
            self.starting.running("learner")
            self.supervisor.succeeded("learner")
            for line in stats.pop("said", []):
                self.log(line)
            self._keep_checkpoints(stats)
            self.loop.learner_reported(stats)
            if not self._learner_to_gpu():
                self._step_learner()
        elif ref is self.promotion.match:
            self.promotion.match_done()
        elif self.strength is not None and self.strength.done(ref):
            pass
        elif not self.promotion.load_done(ref):
            self.fleet.chunk_done(ref)

    def _start_learner(self) -> None:
        """A learner, placed from the nodes alive now (cluster/placement.py): its GPU
        share from the GPUs alive, pinned to a node with that much left beside the
        servers (one of them gives up half of its GPU when they hold every GPU), and
        the pool told where it is."""
        assert self._setup is not None and self.loop is not None and self.fleet is not None
        nodes = nodes_alive()
        plan = plan_learner(nodes, self.fleet.pool.gpus_held())
        before, self._learner_plan = self._learner_plan, plan
        if plan.make_room or (before is not None and before != plan):
            self.log(f"the learner goes to {nodes[plan.node].address} with {plan.gpus:g} GPU"
                     + (" (a server there gives up half of its GPU)" if plan.make_room else "")
                     if plan.node is not None else "the learner goes to any node with a free CPU (no GPU is alive)")
        self.fleet.learner_at(plan)
        url, password = self._setup.redis()
        # A new learner resumes from its checkpoint and the stream: the config's storage,
        # or by default the checkpoints this driver keeps in the run directory, handed to
        # it whatever node it lands on.
        storage = self.config.storage
        held = None if storage is not None else self._held_checkpoints()
        options: dict[str, Any] = {"num_cpus": 1, "num_gpus": plan.gpus}
        if plan.node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(plan.node, soft=False)
        self.learner = ray.remote(LearnerActor).options(**options).remote(
            self._setup.config, self.run_id, url, password, storage, self.config.seed, held)
        self.starting.started("learner", self.learner, plan.ask, plan.node)
        self._step_learner()

    def _step_learner(self) -> None:
        """The learner's next step, due within its deadline."""
        assert self.loop is not None
        ref = self._learner_ref = self.learner.step.remote(LEARNER_STEP_S, self.loop.best_version)
        self.deadlines.sent("learner", ref, "step", learner_deadline_s(self.config, LEARNER_STEP_S),
                            self._learner_hung)

    def _learner_to_gpu(self) -> bool:
        """A learner placed without a GPU, since none was alive (its GPU node lost), moves
        to one that joined since (the autoscaler's replacement): checkpointed between
        two steps and started again there, since a CPU learner on a GPU cluster would
        train at a fraction of its speed for the rest of the run. Looked at every
        ``GPU_LOOK_EVERY_S``; True when it moved."""
        assert self.fleet is not None
        plan, now = self._learner_plan, time.monotonic()
        if plan is None or plan.gpus > 0 or self.learner is None or now < self._gpu_looked + GPU_LOOK_EVERY_S:
            return False
        self._gpu_looked = now
        if plan_learner(nodes_alive(), self.fleet.pool.gpus_held()).gpus <= 0:
            return False
        try:
            stats = ray.get(self.learner.checkpoint.remote(), timeout=120)
            for line in stats.pop("said", []):
                self.log(line)
            self._keep_checkpoints(stats)
            self.log(f"a GPU is alive again: the learner moves to it from its checkpoint at step {stats['step']}")
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError, StorageUnavailable) as e:
            self.log(f"a GPU is alive again: the learner moves to it; its checkpoint failed ({type(e).__name__}), "
                     "the last one stands")
        kill_actor(self.learner)
        self.learner = None
        self._start_learner()
        return True

    def _learner_hung(self, ref: Any, error: Hung) -> None:
        """A step past its deadline: the learner is stopped and replaced like a lost one."""
        if ref is not self._learner_ref:
            return
        lost, self.learner, self._learner_ref = self.learner, None, None
        self.supervisor.replace("learner", error, self._start_learner, lost=lost)

    def _place(self) -> None:
        """The parts that have waited ``cluster.start_timeout_s`` or more since they were
        started: each reported (the status shows the reason, the log says it once), each
        that Ray has not placed tried again once per bound, placed anew, and the
        workers make room for the learner first, else for a server (cluster/fleet.py)."""
        assert self.fleet is not None
        late = self.starting.late()
        if not late:
            self.fleet.make_room(None, {})
            return
        nodes = nodes_alive()
        states = actor_states({w.part: w.handle for w in late})
        now = self.starting.clock()
        replacing = set(self.supervisor.waiting())
        blocking = None
        for waiting in late:
            state = states[waiting.part]
            waiting.report = explain(waiting, state, nodes, now)
            if not waiting.said:
                waiting.said = True
                self.log(explain_text(waiting.report) + ("; it is tried again every "
                                                         f"{self.starting.bound_s:g} s until it runs"
                                                         if state.waits_for_room else ""))
            # Only what waits for room is tried again (one that Ray placed runs its
            # constructor; one that died is replaced after its pause).
            if not state.waits_for_room or waiting.part in replacing:
                continue
            if blocking is None and not waiting.part.startswith("worker "):
                blocking = waiting  # not elastic: the workers make room for it
            if not self.starting.retry_due(waiting):
                continue
            if waiting.part == "learner":
                self._retry_learner()
            else:
                self.fleet.retry(waiting)
        # (a part tried again has a new record: what it asks for now)
        self.fleet.make_room(self.starting.get(blocking.part) if blocking is not None else None, nodes)

    def _retry_learner(self) -> None:
        """The learner that Ray has not placed: a new one, placed anew (not a failure:
        nothing failed)."""
        lost, self._learner_ref = self.learner, None  # its step never ran: nothing to wait for
        kill_actor(lost)
        self._start_learner()

    def _held_checkpoints(self) -> dict[str, bytes]:
        """The learner's checkpoints as this driver keeps them, by file name."""
        files = self.files.learner
        return {path.name: path.read_bytes() for path in sorted(files.glob("*.ckpt"))} if files.is_dir() else {}

    def _keep_checkpoints(self, stats: LearnerStats) -> None:
        """Write the checkpoints a learner handed over into the run directory (each
        atomically, in the order they were written: the previous before the newest).
        A disk that refuses them (full) is an outage: they wait here, the newest of each
        name, and are written at the next pass that can, until ``storage_outage_s``."""
        self._unkept.update(stats.pop("checkpoint_files", {}))
        for name in list(self._unkept):
            if not self._checkpoints.try_write(name, self._unkept[name]):
                return
            del self._unkept[name]

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

    def log(self, line: str) -> None:
        self._print(line)
        if self._log_file is not None:
            self._log_file.write(line)


def _default_maxmemory() -> int:
    """A quarter of this machine's memory, at least 256 MiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return max(256 << 20, total // 4)
