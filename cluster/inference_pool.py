"""The run's inference servers: one per GPU, placed on its node, or one on the CPU
when the cluster has no GPU; and which self-play worker sends its leaves to which.

A server that dies on a live node (or stops answering) is restarted in its place with
the current weights, and its workers stay with it (``restart``); they send the leaves
they were waiting for again. The driver calls ``sync()`` every few seconds. A GPU node that joined the cluster
(an autoscaler's new spot instance, say) gets a server per GPU and the driver starts
``workers_per_gpu`` workers next to each; a node that went away takes its servers
with it, and their workers are returned so that the driver can drop them. If the
last server goes, a CPU server stands in so the run never stalls, until a GPU server
runs again (``retire_stand_in``: an autoscaler's replacement joined); a CPU server of
a cluster that never had a GPU is the run's own, and stays.

The learner may share one GPU with a server: on a cluster with a single GPU both
get half of it (TensorFlow grows its memory on demand in both); with two or more,
the learner's node has one server fewer. Where the learner is comes from the driver
each time it starts one (``learner_at``: the node cluster/placement.py planned for
it); a server started or restarted on a node gets what that node has left beside
the learner and the other servers there, and a server whose share no longer fits
beside a learner that moved in is restarted with what is left (or, with nothing left,
dropped), so that no server is pinned to a node where it can never run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tengen.cluster.metrics import RunMetrics
from tengen.cluster.placement import CPU, GPU, MIN_GPU_SHARE, Starting, gpu_left, server_gpu_shares
from tengen.engine.network_spec import NetworkSpec
from tengen.workers.inference_server import InferenceServer

__all__ = ["InferencePool", "CPU_SERVER", "INLINE_ANSWER_BYTES", "alive_gpu_nodes", "server_options"]

#: the key of the CPU server (GPU servers are keyed ``gpu:<node id>:<index>``)
CPU_SERVER = "cpu"

#: the largest answer a server returns inside its reply to the worker, not through the
#: object store. Ray's own bound is 100 KiB; a go19 answer to a worker's round (a
#: policy of 362 floats a leaf) is over it, and a put, a location lookup and a fetch
#: cost more than the model's share of the call on a fast GPU (bench/pipeline_ceiling.py).
#: Ray reads the bound in the process that returns the object: the server's.
INLINE_ANSWER_BYTES = 1 << 20


def server_options(gpus: float, *, inline_answer_bytes: int = INLINE_ANSWER_BYTES) -> dict[str, Any]:
    """The Ray options of an inference server with a share of ``gpus`` (0: the CPU server)."""
    return {"num_cpus": 0 if gpus else 1, "num_gpus": gpus, "max_concurrency": 1000,
            "runtime_env": {"env_vars": {"RAY_max_direct_call_object_size": str(inline_answer_bytes)}}}


def alive_gpu_nodes() -> dict[str, int]:
    """node id -> whole GPUs, for every alive node that has any."""
    return {node["NodeID"]: int(node["Resources"].get("GPU", 0)) for node in ray.nodes()
            if node.get("Alive") and int(node["Resources"].get("GPU", 0)) > 0}


@dataclass
class _Server:
    handle: Any
    node: str | None  # None: the CPU server, wherever Ray put it
    gpus: float  # its GPU share (0: the CPU server)
    workers: set[str] = field(default_factory=set)


class InferencePool:
    """The servers by key and which worker uses which. ``starting`` (cluster/placement.py)
    is told of every server started, and of each that answers, so that one that Ray
    does not place is reported; None: nothing is told. ``score_utility``: what every
    server adds to its values (``InferenceServer``'s, ``mcts.score_utility``)."""

    def __init__(self, *, run: str, network: NetworkSpec, max_batch: int, batch_timeout_ms: float,
                 cpu_model_calls: int, starting: Starting | None = None, score_utility: float = 0.0):
        self.run = run
        self.network = network
        self.score_utility = score_utility
        self.max_batch = max_batch
        self.batch_timeout_ms = batch_timeout_ms
        self.cpu_model_calls = cpu_model_calls
        self.starting = starting
        self.servers: dict[str, _Server] = {}
        self._worker_server: dict[str, str] = {}
        self._weights: tuple[bytes, int] | None = None
        #: where the learner is (None: no GPU node) and its GPU share, as the driver last placed it
        self._learner: tuple[str | None, float] = (None, 0.0)
        #: whether the CPU server stands in for GPU servers that went
        self.stand_in = False

    # -- servers ----------------------------------------------------------------------
    def start(self, blob: bytes, version: int) -> list[str]:
        """The first servers: one per GPU (beside the learner, ``learner_at`` first), or
        the CPU server. Returns their keys."""
        self._weights = (blob, version)
        added = self.sync()[0]
        self.stand_in = False  # a CPU server at the start is the run's own: it stands in for no GPU
        if not self.servers:
            added.append(self._start_server(CPU_SERVER, node=None, gpus=0.0))
        return added

    def learner_at(self, node: str | None, gpus: float) -> tuple[list[str], list[str]]:
        """The learner now goes to ``node`` with ``gpus`` of its GPUs (None: no GPU node).
        A server there whose share no longer fits beside it is restarted with what is
        left, or dropped when less than half a GPU is left. Returns ``(servers
        restarted, workers whose server was dropped)``."""
        self._learner = (node, gpus)
        if node is None or not gpus or self._weights is None:
            return [], []
        total = alive_gpu_nodes().get(node, 0)
        kept: list[float] = []
        restarted: list[str] = []
        orphans: list[str] = []
        for key in sorted(k for k, s in self.servers.items() if s.node == node):
            server = self.servers[key]
            room = gpu_left(total, gpus, kept)
            if server.gpus <= room + 1e-6:
                kept.append(server.gpus)
            elif room >= MIN_GPU_SHARE:
                self._replace(key, gpus=room)
                kept.append(room)
                restarted.append(key)
            else:
                orphans.extend(self._drop(key, kill=True))
        if not self.servers:  # (its workers need one)
            self._stand_in()
        return restarted, orphans

    def sync(self) -> tuple[list[str], list[str]]:
        """Start servers on GPU nodes that joined, forget those on nodes that left.

        Returns ``(new server keys, workers whose server is gone)``."""
        nodes = alive_gpu_nodes()
        orphans: list[str] = []
        for key in [k for k, s in self.servers.items() if s.node is not None and s.node not in nodes]:
            orphans.extend(self._drop(key))
        served = {s.node for s in self.servers.values()}
        added: list[str] = []
        for node, gpus in sorted(nodes.items()):
            if node in served:
                continue
            shares = server_gpu_shares(gpus, self._learner_gpus(node))
            added.extend(self._start_server(f"gpu:{node}:{i}", node=node, gpus=share) for i, share in enumerate(shares))
        if not self.servers:
            added.append(self._stand_in())
        return added, orphans

    def _stand_in(self) -> str:
        """The CPU server, standing in for the GPU servers that went."""
        self.stand_in = True
        return self._start_server(CPU_SERVER, node=None, gpus=0.0)

    def retire_stand_in(self) -> list[str] | None:
        """The CPU server stopped once a GPU server runs again, when it stood in for the
        lost ones (its CPU goes back to self-play). Returns its workers, to attach to
        the GPU servers; None when no stand-in was retired."""
        if not self.stand_in or CPU_SERVER not in self.servers:
            return None
        if not any(key != CPU_SERVER for key in self.running()):  # answered: its workers need no wait
            return None
        self.stand_in = False
        return self._drop(CPU_SERVER, kill=True)

    def restart(self, key: str) -> Any | None:
        """A new server in place of ``key``'s, which died or stopped answering: on the
        same node while that node lives (None when it does not: ``sync`` drops the
        server), with the current weights; its workers stay attached. Returns the new
        handle, for the workers."""
        server = self.servers[key]
        if server.node is None:
            return self._replace(key, gpus=0.0)
        total = alive_gpu_nodes().get(server.node)
        if total is None:
            return None
        # What its node has left beside the learner and the others there: at least what
        # it had, since learner_at keeps the learner and the servers within the node's GPUs.
        others = [s.gpus for k, s in self.servers.items() if s.node == server.node and k != key]
        return self._replace(key, gpus=gpu_left(total, self._learner_gpus(server.node), others))

    def _replace(self, key: str, *, gpus: float) -> Any:
        """A new server in place of ``key``'s, with ``gpus``; its workers stay attached."""
        server = self.servers[key]
        try:
            ray.kill(server.handle)  # a hung one must not linger on its GPU
        except ValueError:
            pass
        workers = set(server.workers)
        self._start_server(key, node=server.node, gpus=gpus)
        self.servers[key].workers = workers
        return self.servers[key].handle

    def handle(self, key: str) -> Any:
        return self.servers[key].handle

    def handle_id(self, key: str) -> str:
        """The Ray actor id of ``key``'s server now (a worker names the one it lost)."""
        return self.servers[key].handle._actor_id.hex()

    def _learner_gpus(self, node: str) -> float:
        """The learner's GPU share on ``node`` (0 when it is elsewhere)."""
        learner_node, learner_gpus = self._learner
        return learner_gpus if node == learner_node else 0.0

    def gpus_held(self) -> dict[str, float]:
        """The GPUs the servers hold (or will, once Ray places them), per node."""
        held: dict[str, float] = {}
        for server in self.servers.values():
            if server.node is not None:
                held[server.node] = held.get(server.node, 0.0) + server.gpus
        return held

    def running(self) -> list[str]:
        """The keys of the servers that answered since they were (re)started."""
        if self.starting is None:
            return list(self.servers)
        return [key for key in self.servers if not self.starting.waits(f"inference {key}")]

    def lost(self, key: str) -> list[str]:
        """A server that stopped answering: drop it (a CPU server replaces the last
        one); returns its workers."""
        orphans = self._drop(key)
        if not self.servers:
            self._stand_in()
        return orphans

    def _start_server(self, key: str, *, node: str | None, gpus: float) -> str:
        assert self._weights is not None, "start() first"
        blob, version = self._weights
        options = server_options(gpus)
        if node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        handle = ray.remote(InferenceServer).options(**options).remote(
            network=self.network, weights=blob, version=version, max_batch=self.max_batch,
            batch_timeout_ms=self.batch_timeout_ms, clients=1, model_calls=1 if gpus else self.cpu_model_calls,
            metrics=RunMetrics(self.run), score_utility=self.score_utility)
        self.servers[key] = _Server(handle, node, gpus)
        if self.starting is not None:
            self.starting.started(f"inference {key}", handle, {GPU: gpus} if gpus else {CPU: 1.0}, node)
        return key

    def _drop(self, key: str, *, kill: bool = False) -> list[str]:
        server = self.servers.pop(key)
        if self.starting is not None:
            self.starting.forget(f"inference {key}")
        if kill:
            try:
                ray.kill(server.handle)
            except ValueError:
                pass
        for wid in server.workers:
            self._worker_server.pop(wid, None)
        return sorted(server.workers)

    # -- workers ----------------------------------------------------------------------
    def attach(self, worker_id: str, key: str | None = None) -> tuple[Any, str | None]:
        """Give a worker a server (``key``, or the one with fewest workers); returns the
        server's handle and the node the worker should run on (None: anywhere)."""
        if key is None:
            key = min(self.servers, key=lambda k: (len(self.servers[k].workers), k))
        server = self.servers[key]
        server.workers.add(worker_id)
        self._worker_server[worker_id] = key
        return server.handle, server.node

    def detach(self, worker_id: str) -> None:
        key = self._worker_server.pop(worker_id, None)
        if key in self.servers:
            self.servers[key].workers.discard(worker_id)

    def server_of(self, worker_id: str) -> str | None:
        return self._worker_server.get(worker_id)

    def update_clients(self) -> None:
        """Each server flushes a batch once all its workers have sent one."""
        for server in self.servers.values():
            server.handle.set_clients.remote(max(1, len(server.workers)))

    # -- every server at once ---------------------------------------------------------
    def send_weights(self, blob: bytes, sha256: str, version: int) -> dict[str, Any]:
        """Hot-swap every server to ``version`` without waiting: the load call in flight
        of each server, by key, for the caller to wait on with the rest of what it waits
        for (a server started later gets these weights from the start)."""
        self._weights = (blob, version)
        return {key: s.handle.load_weights.remote(blob, sha256, version) for key, s in self.servers.items()}

    def stats(self, *, timeout_s: float = 2.0) -> tuple[dict, dict[str, BaseException]]:
        """Merged stats of the servers that answer within ``timeout_s`` (sums, batch
        size weighted by model calls) and the servers that died or raised, by key, with
        Ray's error. A
        server that is slow to answer is not dead: it may still be starting on a busy
        node, or busy; its workers' own timeouts catch one that hangs."""
        refs = {key: s.handle.stats.remote() for key, s in self.servers.items()}
        ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
        merged: dict[str, float] = {"servers": 0, "evaluations": 0, "batches": 0}
        weighted = 0.0
        failed: dict[str, BaseException] = {}
        for key, ref in refs.items():
            try:
                one = ray.get(ref, timeout=0)
            except ray.exceptions.GetTimeoutError:
                continue  # not yet: asked again at the next sync
            except ray.exceptions.RayError as e:
                failed[key] = e
                continue
            if self.starting is not None:
                self.starting.running(f"inference {key}")  # it answers: it runs
            merged["servers"] += 1
            merged["evaluations"] += one.get("evaluations", 0)
            merged["batches"] += one.get("batches", 0)
            weighted += one.get("mean_batch_size", 0.0) * one.get("batches", 0)
        merged["mean_batch_size"] = weighted / merged["batches"] if merged["batches"] else 0.0
        return merged, failed
