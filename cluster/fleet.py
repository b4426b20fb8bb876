"""The run's fleet: its self-play workers and the inference servers they send leaves to.

The driver (cluster/driver.py) keeps the run going; this is the part of it that keeps
the run's workers and servers at strength, apart from the run's lifecycle, its
promotions (cluster/promotion.py) and its reports (cluster/reporting.py). It starts
the first servers (cluster/inference_pool.py: one per GPU, or one on the CPU) and
workers for them, takes each worker's chunk of games back and starts its next,
replaces a worker that dies or raises and a server that dies or stops answering
after the Supervisor's pause (cluster/supervision.py), holds the worker count the run
should have (``tengen scale`` changes it once per request), and keeps the servers in
step with the cluster's GPU nodes: a node that joins gets servers and workers of its
own, a node that leaves takes its servers with it, and the workers started for their
GPUs (the others, the run's own count, go to the servers left).

Where a worker runs is cluster/placement.py's: next to its server when that node has
a free CPU now, else wherever Ray finds room. A worker runs once its first chunk came
back; until then it is one of the parts ``Starting`` keeps, and one that Ray has not
placed within ``cluster.start_timeout_s`` is started again, placed anew (``retry``),
as is a server that Ray has not placed. Workers are elastic, the learner and the
servers are not: while one of those cannot be placed (``make_room``), no worker is
started, the workers that do not run yet are stopped, and one running worker at a
time whose CPU makes room for it is stopped, each said in the log; once it runs, the
fleet holds its worker count again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tengen.cluster.actors import ActorSetup, SelfPlayActor, SelfPlayReport
from tengen.cluster.deadlines import Deadlines, Hung, worker_deadline_s
from tengen.cluster.inference_pool import CPU_SERVER, InferencePool
from tengen.cluster.placement import (
    CPU,
    WORKER_ASK,
    LearnerPlan,
    NodeRoom,
    Room,
    Starting,
    Waiting,
    fits,
    nodes_alive,
)
from tengen.cluster.supervision import Supervisor, kill_actor, node_lost
from tengen.run.config import TengenConfig
from tengen.run.loop import TrainingLoop
from tengen.run.wording import counted

__all__ = ["Fleet", "STOP_PAUSE_S"]

#: seconds between two workers stopped to make room for a part that waits: Ray gives
#: the freed CPU to what waits for it within a moment, and a part it placed is not
#: waiting any more
STOP_PAUSE_S = 15.0


class Fleet:
    """The self-play workers (by id, ``w003``) and the inference servers (``pool``).
    The workers' reports go to ``loop``, and a new worker's samples carry its best
    version. ``starting`` keeps the workers and servers that do not run yet; ``clock``:
    monotonic seconds."""

    def __init__(self, config: TengenConfig, setup: ActorSetup, supervisor: Supervisor, loop: TrainingLoop, *,
                 starting: Starting, log: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 deadlines: Deadlines | None = None):
        self.config = config
        self.setup = setup
        #: each worker's chunk in flight is due within its deadline (a worker still starting is exempt)
        self.deadlines = deadlines if deadlines is not None else Deadlines(exempt=starting.waits, clock=clock)
        self.supervisor = supervisor
        self.loop = loop
        self.starting = starting
        self.log = log
        self.clock = clock
        cluster = config.cluster
        self.pool = InferencePool(run=setup.run_id, network=config.network_spec(), max_batch=cluster.max_batch,
                                  batch_timeout_ms=cluster.batch_timeout_ms,
                                  cpu_model_calls=cluster.cpu_server_model_calls, starting=starting,
                                  score_utility=config.mcts.score_utility)
        #: the self-play worker actors and their chunk in flight, by worker id
        self.workers: dict[str, Any] = {}
        self.worker_refs: dict[str, Any] = {}
        #: the node each worker runs on, as its last chunk said
        self.worker_nodes: dict[str, str] = {}
        #: how many workers the run holds
        self.target_workers = 0
        #: of those, how many were added for each GPU server (``workers_per_gpu``): they go
        #: with it; the others are the run's own count (``cluster.workers``, ``tengen scale``)
        self._for_gpu: dict[str, int] = {}
        #: whether the count is the user's (``cluster.workers``, ``tengen scale``): GPU
        #: nodes that join then share the workers the run holds, rather than add
        #: ``workers_per_gpu`` each, so that a node and its replacement leave it as it was
        self._count_fixed = config.cluster.workers is not None
        #: the workers started to carry on on the CPU server that stands in for the
        #: GPU servers: they go when it is retired
        self._for_stand_in = 0
        #: the part the workers make room for (no worker starts meanwhile), None: none
        self.held_for: str | None = None
        #: the servers' merged stats, as of the last sync
        self.server_stats: dict = {}
        self._next_worker = 0
        self._worker_starts: dict[str, int] = {}
        self._applied_scale: int | None = None
        self._last_stop = float("-inf")
        self._no_room_said: str | None = None

    # -- the start ----------------------------------------------------------------------
    def start_servers(self, blob: bytes, version: int) -> list[str]:
        """The first inference servers, with the best model; returns their keys."""
        return self.pool.start(blob, version)

    def start_workers(self, first_servers: list[str]) -> None:
        """The first workers: the config's count (or as many as the cluster has room
        for) on the CPU server, else ``workers_per_gpu`` for each GPU server."""
        room = self._room()
        if self.config.cluster.workers or first_servers == [CPU_SERVER]:
            self._add_workers(self._worker_count(), room=room)
        else:
            for key in first_servers:
                self._add_workers(self.config.cluster.workers_per_gpu, server=key, room=room)
        self.pool.update_clients()

    def _worker_count(self) -> int:
        if self.config.cluster.workers:
            return self.config.cluster.workers
        cpus = int(ray.cluster_resources().get("CPU", 2))
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus:
            return max(1, min(cpus - 2, gpus * self.config.cluster.workers_per_gpu))
        if self.config.ray.address:  # a CPU cluster: a CPU each, after the server and the learner
            return max(1, cpus - 2)
        # Locally (logical CPUs are padded, see ClusterRun._start_ray): leave a core to
        # the inference server and the learner.
        return max(1, (os.cpu_count() or 2) - 1)

    def _room(self) -> Room:
        """The nodes' free CPUs and GPUs now, less what the parts Ray has not placed yet
        will take on the nodes they are pinned to."""
        return Room(nodes_alive(), self.starting.reserved())

    # -- the workers ----------------------------------------------------------------------
    def refs(self) -> list[Any]:
        """The chunks of games in flight."""
        return list(self.worker_refs.values())

    def running_workers(self) -> list[str]:
        """The workers that run: their first chunk came back (not those Ray has yet to place)."""
        return [wid for wid in self.workers if not self.starting.waits(f"worker {wid}")]

    def chunk_done(self, ref: Any) -> None:
        """A worker's chunk came back (``ref``): its report to the loop and its next
        chunk started, or, if it failed, the worker replaced after its pause. A server
        that the worker found dead or hung is restarted (it counts once, however many
        of its workers say so)."""
        wid = next((w for w, r in self.worker_refs.items() if r is ref), None)
        if wid is None:
            return  # dropped since the wait
        try:
            stats: SelfPlayReport = ray.get(ref)
        except ray.exceptions.RayError as e:
            # Its node went away, or it was killed, or it raised: a new one takes its place.
            self._drop_worker(wid, keep_slot=True)
            self.supervisor.replace(f"worker {wid}", e, lambda: self._start_worker(wid))
            return
        self.starting.running(f"worker {wid}")
        self.supervisor.succeeded(f"worker {wid}")
        self.loop.worker_reported(wid, stats["incarnation"], stats)
        if "node" in stats:
            self.worker_nodes[wid] = stats["node"]
        worker = self.workers[wid]
        lost = stats.get("server_lost")
        key = self.pool.server_of(wid)
        if lost is not None and key is not None:
            # Each of its workers reports the same death: it counts once.
            # A server that raised on a batch fails, not its workers: it counts against the
            # server (restarted; one that keeps raising stops the run as a crash loop).
            # One still starting (its process coming up, or waiting for room) is not lost
            # for not answering yet, within the bound on starting (``start_timeout_s``).
            waiting = self.starting.get(f"inference {key}")
            starting = (stats.get("server_error") is None and waiting is not None
                        and not self.starting.retry_due(waiting))
            if self.pool.handle_id(key) == lost and not starting:  # (server_lost counts it once)
                why = stats.get("server_error") or f"it stopped answering {wid}"
                self.server_lost(key, RuntimeError(f"{why} (actor {lost[:8]})"))
            if key in self.pool.servers:
                worker.set_server.remote(self.pool.handle(key))
        self._run_chunk(wid)

    def _run_chunk(self, wid: str) -> None:
        """The worker's next chunk of games, due within its deadline."""
        ref = self.worker_refs[wid] = self.workers[wid].run_for.remote(self.config.cluster.worker_chunk_seconds)
        self.deadlines.sent(f"worker {wid}", ref, "run_for", worker_deadline_s(self.config), self._chunk_hung)

    def _chunk_hung(self, ref: Any, error: Hung) -> None:
        """A chunk past its deadline: the worker is stopped and replaced like a lost one."""
        wid = next((w for w, r in self.worker_refs.items() if r is ref), None)
        if wid is not None:
            self._drop_worker(wid, keep_slot=True)
            self.supervisor.replace(f"worker {wid}", error, lambda: self._start_worker(wid))

    def set_model_version(self, version: int) -> None:
        """Every worker's samples carry ``version`` from now on."""
        for w in self.workers.values():
            w.set_model_version.remote(version)

    def _add_workers(self, count: int, server: str | None = None, room: Room | None = None) -> None:
        """``count`` more workers for the run to hold (on ``server``, or the least
        loaded each time; for a GPU server, they go when it goes)."""
        self.target_workers += count
        if server is not None and server != CPU_SERVER:
            self._for_gpu[server] = self._for_gpu.get(server, 0) + count
        self._start_new_workers(count, server, room)

    def _start_new_workers(self, count: int, server: str | None = None, room: Room | None = None) -> None:
        if self.held_for is not None:
            return  # the count is held again once the part the workers make room for runs
        room = room if room is not None else self._room()
        for _ in range(count):
            index, self._next_worker = self._next_worker, self._next_worker + 1
            self._start_worker(f"w{index:03d}", server, room)

    def _start_worker(self, wid: str, server: str | None = None, room: Room | None = None) -> None:
        if wid in self.workers or self.held_for is not None:
            return  # (held: ``hold_workers`` fills the slot once the room is no longer needed)
        handle, node = self.pool.attach(wid, server)
        # Next to its GPU server when that node has a free CPU now (spilling elsewhere if
        # another part takes it first); else wherever Ray finds room, spread over the
        # nodes, so that losing a node loses few. A soft affinity to a busy node would
        # be a wait: Ray leaves such a node only when it is gone or can never hold it.
        near = (room if room is not None else self._room()).near(node, WORKER_ASK) if node else None
        placement: Any = (NodeAffinitySchedulingStrategy(near, soft=True, _spill_on_unavailable=True)
                          if near else "SPREAD")
        url, password = self.setup.redis()
        # A replacement plays other games than the worker it replaces.
        starts = self._worker_starts[wid] = self._worker_starts.get(wid, 0) + 1
        seed = (self.config.seed * 1000 + int(wid[1:])) * 1000 + starts - 1
        worker: Any = ray.remote(SelfPlayActor).options(num_cpus=1, scheduling_strategy=placement).remote(
            self.setup.config, self.setup.run_id, url, password, handle, wid, seed, self.loop.best_version)
        self.workers[wid] = worker
        self._run_chunk(wid)
        self.starting.started(f"worker {wid}", worker, WORKER_ASK)
        self.pool.update_clients()

    def _drop_worker(self, wid: str, *, keep_slot: bool = False, keep_wait: bool = False) -> None:
        """Stop and forget a worker (``keep_slot``: a replacement will take its id;
        ``keep_wait``: a new try of it starts now, and its wait goes on)."""
        handle = self.workers.pop(wid, None)
        self.worker_refs.pop(wid, None)
        self.deadlines.forget(f"worker {wid}")
        self.worker_nodes.pop(wid, None)
        self.pool.detach(wid)
        if not keep_wait:
            self.starting.forget(f"worker {wid}")
        if not keep_slot:
            self.supervisor.forget(f"worker {wid}")
        if handle is not None:
            kill_actor(handle)  # a no-op for a dead actor; stops a live one whose server is gone

    def _waiting_workers(self) -> list[str]:
        """The ids of the workers whose replacement waits out its pause."""
        return [name.split(" ", 1)[1] for name in self.supervisor.waiting() if name.startswith("worker ")]

    def hold_workers(self) -> None:
        """Start workers until the run has as many as it should (lost ones are
        replaced by their own pause; this covers anything else that went missing, and
        the workers stopped to make room once it is no longer needed)."""
        missing = self.target_workers - len(self.workers) - len(self._waiting_workers())
        if missing > 0:
            self._start_new_workers(missing)

    def requested(self, wanted: int | None) -> None:
        """``tengen scale``'s request (None: none), applied once: from then on the run
        holds that many, whatever GPU nodes join."""
        if wanted and wanted != self._applied_scale:
            self._applied_scale = wanted
            self._count_fixed = True
            self._scale(wanted)

    def _scale(self, wanted: int) -> None:
        if self.target_workers < wanted:
            self._add_workers(wanted - self.target_workers)
        while self.target_workers > wanted:
            ids = sorted(set(self.workers) | set(self._waiting_workers()))
            if ids:
                self._drop_worker(ids[-1])
            self.target_workers -= 1
        self.pool.update_clients()
        self.log(f"scaled to {counted(self.target_workers, 'self-play worker')}")

    # -- parts that wait for room -------------------------------------------------------------
    def retry(self, waiting: Waiting) -> None:
        """A worker or server that Ray did not place within the bound: a new actor in its
        place, placed anew from the nodes alive (not counted as a failure)."""
        kind, name = waiting.part.split(" ", 1)
        if kind == "worker" and name in self.workers:
            self._drop_worker(name, keep_slot=True, keep_wait=self.held_for is None)
            self._start_worker(name)
        elif kind == "inference" and name in self.pool.servers:
            self._restart_server(name)

    def make_room(self, waiting: Waiting | None, nodes: Mapping[str, NodeRoom]) -> None:
        """``waiting``: the learner or a server that Ray has not placed within the bound
        (None: none any more). While one waits, no worker starts, the workers that do not
        run yet are stopped (they would take the room first), and every ``STOP_PAUSE_S``
        one running worker whose CPU makes room for it (on a node where what it asks
        for would then fit) is stopped, each said in the log; once nothing waits, the
        fleet holds its worker count again."""
        if waiting is None:
            if self.held_for is not None:
                self.log(f"{self.held_for} no longer waits for room: holding "
                         f"{counted(self.target_workers, 'self-play worker')} again")
                self.held_for = self._no_room_said = None
                self.hold_workers()
            return
        if self.held_for != waiting.part:
            self.held_for = waiting.part
            self.log(f"no new self-play workers while {waiting.part} waits for room")
        for starting in self.starting.waiting("worker "):
            wid = starting.part.split(" ", 1)[1]
            if wid in self.workers:
                self._drop_worker(wid)  # its slot is filled again once the room is no longer needed
        if self.clock() - self._last_stop < STOP_PAUSE_S:
            return
        if any(fits(waiting.asks, room.free) for node, room in nodes.items() if waiting.node in (None, node)):
            return  # there is room now (Ray's view lagged, or a part was stopped): Ray places it
        victim = self._worker_to_stop(waiting, nodes)
        if victim is None:
            if self._no_room_said != waiting.part:
                self._no_room_said = waiting.part
                self.log(f"no running self-play worker's CPU makes room for {waiting.part}, which asks for "
                         f"{waiting.asks}: none is stopped")
            return
        self._last_stop = self.clock()
        address = nodes[self.worker_nodes[victim]].address
        self._drop_worker(victim)
        self.pool.update_clients()
        self.log(f"stopped self-play worker {victim} on {address} to free a CPU for {waiting.part}, which has waited "
                 f"{self.clock() - waiting.first:.0f} s for {waiting.asks} (the learner and the servers come "
                 f"first; the run holds {self.target_workers} workers again once it runs)")

    def _worker_to_stop(self, waiting: Waiting, nodes: Mapping[str, NodeRoom]) -> str | None:
        """The newest running worker on a node where ``waiting``'s ask fits once that
        worker's CPU is free (on its pinned node only, if it has one), or None."""
        def makes_room(node: str | None) -> bool:
            if node is None or node not in nodes or (waiting.node is not None and node != waiting.node):
                return False
            free = dict(nodes[node].free)
            free[CPU] = free.get(CPU, 0.0) + 1.0
            return fits(waiting.asks, free)

        running = [wid for wid in self.running_workers() if makes_room(self.worker_nodes.get(wid))]
        return max(running) if running else None

    # -- the servers ----------------------------------------------------------------------
    def learner_at(self, plan: LearnerPlan) -> None:
        """The learner goes where ``plan`` says: the pool's record of it, and a server
        there whose GPU share no longer fits beside it restarted with what is left (its
        workers with it) or dropped (its workers go to the servers left)."""
        restarted, orphans = self.pool.learner_at(plan.node, plan.gpus)
        for key in restarted:
            self._tell_workers(key)
            self.log(f"inference server {key} restarted with {self.pool.servers[key].gpus:g} GPU beside the learner")
        if orphans:
            self._move_workers(orphans)

    def _move_workers(self, orphans: list[str]) -> None:
        """Workers whose server went while they run: to the servers left (the CPU
        server once there is no other)."""
        for wid in orphans:
            if wid in self.workers:
                handle, _ = self.pool.attach(wid)
                self.workers[wid].set_server.remote(handle)
        self.pool.update_clients()

    def _tell_workers(self, key: str) -> None:
        """``key``'s workers get its (new) handle."""
        handle = self.pool.handle(key)
        for wid in self.pool.servers[key].workers:
            if wid in self.workers:
                self.workers[wid].set_server.remote(handle)
        self.pool.update_clients()

    def _restart_server(self, key: str) -> bool:
        """A new server in place of ``key``'s, its workers told; False when its node is gone."""
        if self.pool.restart(key) is None:
            return False  # its node is gone: the next sync drops it with its workers
        self._tell_workers(key)
        return True

    def server_lost(self, key: str, error: BaseException, *, node_gone: bool | None = None) -> None:
        """An inference server on a live node died or stopped answering (or did not
        load a promoted model): a new one, with its workers, after the supervisor's
        pause. Counted once until that one starts (every worker and every push may
        say so meanwhile); ``node_gone``: as ``Supervisor.failed`` takes it."""
        if f"inference {key}" in self.supervisor.waiting():
            return
        delay = self.supervisor.failed(f"inference {key}", error, what="lost", node_gone=node_gone)

        def restart() -> None:
            if key not in self.pool.servers:
                return  # its node went meanwhile
            if self._restart_server(key):
                clients = len(self.pool.servers[key].workers)
                self.log(f"inference server {key} restarted with {counted(clients, 'worker')}")

        if delay:
            self.supervisor.schedule(f"inference {key}", delay, restart)
        else:
            restart()

    def _share_workers(self) -> None:
        """With a count of the user's, a server that runs and has fewer workers than
        the busiest by two or more (a GPU node joined) takes workers from it."""
        if not self._count_fixed:
            return
        running = set(self.pool.running())
        moved = 0
        while True:
            loads = {key: len(server.workers) for key, server in self.pool.servers.items() if key in running}
            if len(loads) < 2:
                break
            busiest, idlest = max(loads, key=lambda k: (loads[k], k)), min(loads, key=lambda k: (loads[k], k))
            if loads[busiest] - loads[idlest] < 2:
                break
            wid = sorted(self.pool.servers[busiest].workers)[-1]
            self.pool.detach(wid)
            handle, _ = self.pool.attach(wid, idlest)
            if wid in self.workers:
                self.workers[wid].set_server.remote(handle)
            moved += 1
        if moved:
            self.pool.update_clients()
            self.log(f"{moved} self-play workers moved to the inference servers with fewest")

    def _retire_stand_in(self) -> None:
        """A GPU server runs again: the CPU server that stood in is stopped, the workers
        started for it with it, and the rest go to the GPU servers."""
        orphans = self.pool.retire_stand_in()
        if orphans is None:
            return
        going = min(self._for_stand_in, len(orphans))
        self._for_stand_in = 0
        for wid in orphans[len(orphans) - going:]:
            self._drop_worker(wid)
        self.target_workers -= going
        self._move_workers(orphans[:len(orphans) - going])
        self.log(f"a GPU server runs again: the CPU inference server that stood in is stopped, "
                 f"{len(orphans) - going} of its workers moved to the GPU servers"
                 + (f", {going} started for it stopped" if going else ""))

    def sync(self) -> None:
        """Servers (and their workers) for GPU nodes that joined; drop what left; restart
        servers that stopped answering."""
        before = set(self.pool.servers)
        owners = {wid: self.pool.server_of(wid) for wid in self.workers}
        added, orphans = self.pool.sync()
        self.server_stats, failed = self.pool.stats()
        for key, error in failed.items():
            if key in self.pool.servers:
                self.server_lost(key, RuntimeError(f"its stats call failed: {type(error).__name__}"),
                                 node_gone=node_lost(error))
        # Of the workers of a server whose node left, those started for its GPU go too
        # (the newest); the others, the run's own count, run on with the servers left.
        stopped, moved = [], []
        for key in sorted(before - set(self.pool.servers)):
            wids = sorted(wid for wid in orphans if owners.get(wid) == key)
            going = min(self._for_gpu.pop(key, 0), len(wids))
            stopped += wids[len(wids) - going:]
            moved += wids[:len(wids) - going]
        for wid in stopped:
            self._drop_worker(wid)
        self.target_workers -= len(stopped)
        self._move_workers(moved)
        room = self._room() if added else None
        for key in added:
            if key.startswith("gpu:") and not self._count_fixed:
                self._add_workers(self.config.cluster.workers_per_gpu, server=key, room=room)
        self._retire_stand_in()
        self._share_workers()
        if self.target_workers < 1:  # the last GPU node went: carry on on the CPU server
            count = self._worker_count() - self.target_workers
            self._for_stand_in += count
            self._add_workers(count)
        gone = before - set(self.pool.servers)
        if added or gone:
            self.log(f"inference servers: {len(self.pool.servers)} (+{len(added)} -{len(gone)}), "
                     f"self-play workers: {len(self.workers)} (-{len(stopped)} with a lost server"
                     + (f", {len(moved)} moved to the servers left)" if moved else ")"))
        self.pool.update_clients()
