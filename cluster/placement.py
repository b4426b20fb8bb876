"""Where the run's parts have room on the nodes alive, and which of them wait for it.

Ray places an actor on a node where what it asks for is free; what to ask for and
which node to prefer is decided here, from what the nodes alive have now
(``nodes_alive``: each node's total and free CPUs and GPUs, Ray's view) and from what
the run itself holds (its servers' GPU shares, the parts it started that Ray has not
placed yet):

- a self-play worker goes next to its inference server only when that node has a free
  CPU now (``Room.near``); otherwise Ray spreads it over the nodes with room. A soft
  affinity to a busy node is a wait, not a fallback: Ray leaves a node only when it is
  gone or can never hold the actor, so workers sent to a GPU node whose CPUs the
  learner holds would wait there for good;
- the learner's GPU share comes from the GPUs alive now (``learner_gpu_share``), on a
  node where that much GPU is left beside the run's servers, and it is pinned there so
  that the servers' shares leave it room (``plan_learner``); when the servers hold
  every GPU, one of them gives up half of its GPU for it (the learner is not elastic);
- a GPU server gets what its node has left beside the learner and the run's other
  servers there (``server_gpu_shares``, ``gpu_left``), never a whole GPU pinned to a node
  that cannot hold it.

``Starting`` keeps the parts that the run started and that do not run yet (a worker
runs once its first chunk came back, a server once it answered, the learner once its
first step came back), since when, and what they ask for. One that has waited past the
bound (``cluster.start_timeout_s``) is reported with the reason (``explain``: Ray's
state of the actor, what it asks for, what the nodes have free), said in the log once,
and, while Ray has not placed it, tried again once per bound (the driver does it,
cluster/driver.py); the learner and the servers are given room by stopping workers
(cluster/fleet.py). Its clock is an argument, so that its tests own it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ray

from tengen.run.wording import counted

__all__ = ["CPU", "GPU", "MIN_GPU_SHARE", "WORKER_ASK", "ActorState", "LearnerPlan", "NodeRoom", "Room",
           "Starting", "Waiting", "actor_states", "describe_free", "explain", "explain_text", "fits", "gpu_left",
           "learner_gpu_share", "nodes_alive", "plan_learner", "server_gpu_shares"]

CPU = "CPU"
GPU = "GPU"
#: what a self-play worker asks for
WORKER_ASK: Mapping[str, float] = {CPU: 1.0}
#: the least GPU a server or the learner is given (half of one): a node with less left
#: beside the others gets no server
MIN_GPU_SHARE = 0.5
#: resource amounts are sums of halves and wholes; compared with this much slack
_EPS = 1e-6


def learner_gpu_share(total_gpus: float) -> float:
    """The learner's GPU request among ``total_gpus`` GPUs alive: none on a CPU cluster,
    half of the only GPU, or a whole one when there are several."""
    if total_gpus <= 0:
        return 0.0
    return MIN_GPU_SHARE if total_gpus < 2 else 1.0


def fits(ask: Mapping[str, float], resources: Mapping[str, float]) -> bool:
    """Whether ``resources`` hold all of ``ask``."""
    return all(amount <= resources.get(name, 0.0) + _EPS for name, amount in ask.items() if amount > 0)


@dataclass(frozen=True)
class NodeRoom:
    """One node alive: its address (what reports show) and its CPUs and GPUs, in all
    and free now."""

    address: str
    total: Mapping[str, float]
    free: Mapping[str, float]


def nodes_alive() -> dict[str, NodeRoom]:
    """Every alive node by Ray node id, with its total and free CPUs and GPUs (Ray's
    view: an actor created a moment ago may not be counted yet)."""
    from ray._private import state  # a DeveloperAPI: the free resources of each node

    free = state.available_resources_per_node()
    out = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        nid = node["NodeID"]
        total = node.get("Resources", {})
        out[nid] = NodeRoom(address=node.get("NodeManagerAddress") or nid[:8],
                            total={name: float(total.get(name, 0.0)) for name in (CPU, GPU)},
                            free={name: float(free.get(nid, {}).get(name, 0.0)) for name in (CPU, GPU)})
    return out


def describe_free(nodes: Mapping[str, NodeRoom]) -> dict[str, dict[str, float]]:
    """What each node has free, by address: ``{"10.0.0.3": {"CPU": 0.0, "GPU": 0.5}}``."""
    return {room.address: {name: round(amount, 2) for name, amount in room.free.items()
                           if amount or room.total.get(name)}
            for _, room in sorted(nodes.items(), key=lambda item: item[1].address)}


class Room:
    """The free CPUs and GPUs of ``nodes`` as one pass of placements takes them: Ray's
    own view lags the actors just created, and the parts the run started that Ray has
    not placed yet (``reserved``: their node and what they ask for) will take theirs."""

    def __init__(self, nodes: Mapping[str, NodeRoom], reserved: Iterable[tuple[str | None, Mapping[str, float]]] = ()):
        self.nodes = dict(nodes)
        self._free = {node: dict(room.free) for node, room in nodes.items()}
        for node, ask in reserved:
            if node is not None and node in self._free:
                self.take(node, ask)

    def free(self, node: str) -> dict[str, float]:
        return dict(self._free.get(node, {}))

    def take(self, node: str, ask: Mapping[str, float]) -> None:
        free = self._free[node]
        for name, amount in ask.items():
            free[name] = max(0.0, free.get(name, 0.0) - amount)

    def near(self, node: str | None, ask: Mapping[str, float] = WORKER_ASK) -> str | None:
        """``node`` when it is alive and has ``ask`` free now (taken from this room), else
        None: the part goes wherever Ray finds room."""
        if node is None or node not in self._free or not fits(ask, self._free[node]):
            return None
        self.take(node, ask)
        return node


# -- GPU shares ------------------------------------------------------------------------------

def server_gpu_shares(gpus: float, learner: float) -> list[float]:
    """The GPU shares of the servers for a node with ``gpus`` GPUs beside a learner that
    holds ``learner`` of them: one per whole GPU left, and one on the part of a GPU the
    learner shares (half of it), none on less."""
    left = gpus - learner
    whole = int(left + _EPS)
    shares = [1.0] * whole
    if left - whole >= MIN_GPU_SHARE - _EPS:
        shares.append(round(left - whole, 3))
    return shares


def gpu_left(gpus: float, learner: float, servers: Iterable[float]) -> float:
    """What a node with ``gpus`` GPUs has left beside the learner's share there and the
    shares of the servers there: at most a whole GPU, the most one server takes."""
    return max(0.0, min(1.0, gpus - learner - sum(servers)))


@dataclass(frozen=True)
class LearnerPlan:
    """Where the learner goes: ``node`` (None: any node with a free CPU; it asks for no
    GPU) and its GPU share; ``make_room``: a server on ``node`` must give up ``gpus`` of
    its GPU first (the servers hold every GPU)."""

    node: str | None
    gpus: float
    make_room: bool = False

    @property
    def ask(self) -> dict[str, float]:
        return {CPU: 1.0, GPU: self.gpus} if self.gpus else {CPU: 1.0}


def plan_learner(nodes: Mapping[str, NodeRoom], servers: Mapping[str, float]) -> LearnerPlan:
    """The learner's node and GPU share among ``nodes`` (those alive), where the run's
    inference servers hold ``servers`` GPUs per node: its share from the GPUs alive, on
    the node with most of that left beside the servers (one with a free CPU first, then
    by node id); half a GPU when no node has a whole one left; when the servers hold
    every GPU, half of one, which a server gives up (the GPU node with a free CPU and
    most GPUs first)."""
    gpu_nodes = {node: room for node, room in nodes.items() if room.total.get(GPU, 0.0) > 0}
    share = learner_gpu_share(sum(room.total[GPU] for room in gpu_nodes.values()))
    if not share:
        return LearnerPlan(None, 0.0)

    def left(node: str) -> float:
        return gpu_nodes[node].total[GPU] - servers.get(node, 0.0)

    def cpu_free(node: str) -> bool:
        return gpu_nodes[node].free.get(CPU, 0.0) >= 1.0 - _EPS

    for wanted in dict.fromkeys((share, MIN_GPU_SHARE)):
        room = [node for node in gpu_nodes if left(node) >= wanted - _EPS]
        if room:
            return LearnerPlan(max(room, key=lambda n: (cpu_free(n), left(n), n)), wanted)
    node = max(gpu_nodes, key=lambda n: (cpu_free(n), gpu_nodes[n].total[GPU], n))
    return LearnerPlan(node, MIN_GPU_SHARE, make_room=True)


# -- parts that wait for room ----------------------------------------------------------------

@dataclass
class Waiting:
    """A part started and not yet running: its actor, what it asks for, the node it is
    pinned to (None: any), since when this try waits, since when it waits at all, how
    many tries, and whether its wait was said in the log."""

    part: str
    handle: Any
    asks: dict[str, float]
    node: str | None
    since: float
    first: float
    tries: int = 1
    said: bool = False
    #: the last report of its wait (``explain``), once it waited past the bound
    report: dict[str, Any] | None = field(default=None)


#: the order of the waiting parts, and in which they are given room: the learner first
#: (not elastic), then the servers (their workers need them), then the workers
_PRIORITY = ("learner", "inference ", "worker ")


def _priority(part: str) -> tuple[int, str]:
    return next((i for i, prefix in enumerate(_PRIORITY) if part.startswith(prefix)), len(_PRIORITY)), part


class Starting:
    """The parts started and not yet running, by name (``learner``, ``inference cpu``,
    ``worker w003``); ``bound_s``: how long one may wait before it is reported and tried
    again; ``log``: where a part whose wait was said is said to run; ``clock``:
    monotonic seconds."""

    def __init__(self, *, bound_s: float, log: Callable[[str], None] = lambda line: None,
                 clock: Callable[[], float] = time.monotonic):
        self.bound_s = bound_s
        self.log = log
        self.clock = clock
        self._parts: dict[str, Waiting] = {}

    def started(self, part: str, handle: Any, asks: Mapping[str, float], node: str | None = None) -> None:
        """A new actor for ``part`` (a retry keeps the time its wait began and counts on)."""
        now = self.clock()
        before = self._parts.get(part)
        self._parts[part] = Waiting(part, handle, {k: v for k, v in asks.items() if v}, node, since=now,
                                    first=before.first if before else now, tries=before.tries + 1 if before else 1,
                                    said=before.said if before else False)

    def running(self, part: str) -> Waiting | None:
        """``part`` runs: no longer waiting (said in the log if its wait was). Returns
        its record if it was waiting."""
        waiting = self._parts.pop(part, None)
        if waiting is not None and waiting.said:
            self.log(f"{part} runs, {self.clock() - waiting.first:.0f} s after it was first started "
                     f"({counted(waiting.tries, 'try', 'tries')})")
        return waiting

    def forget(self, part: str) -> None:
        """A part the run stopped before it ran."""
        self._parts.pop(part, None)

    def waits(self, part: str) -> bool:
        return part in self._parts

    def get(self, part: str) -> Waiting | None:
        return self._parts.get(part)

    def waiting(self, prefix: str = "") -> list[Waiting]:
        """The waiting parts whose name starts with ``prefix``, the learner first."""
        return sorted((w for w in self._parts.values() if w.part.startswith(prefix)), key=lambda w: _priority(w.part))

    def late(self) -> list[Waiting]:
        """The parts that have waited ``bound_s`` or more since they were first started,
        the learner first, then the servers, then the workers."""
        now = self.clock()
        return [w for w in self.waiting() if now - w.first >= self.bound_s]

    def retry_due(self, waiting: Waiting) -> bool:
        """Whether ``waiting``'s present try has waited ``bound_s`` or more."""
        return self.clock() - waiting.since >= self.bound_s

    def reserved(self) -> list[tuple[str | None, dict[str, float]]]:
        """(node, ask) of every waiting part pinned to a node: room it will take there."""
        return [(w.node, w.asks) for w in self._parts.values() if w.node is not None]

    def report(self) -> list[dict[str, Any]]:
        """The reports of the parts that waited past the bound (their last ``explain``)."""
        return [w.report for w in self.waiting() if w.report is not None]


@dataclass(frozen=True)
class ActorState:
    """What Ray says of an actor: its state (``PENDING_CREATION``, ``ALIVE``, ...) and
    whether it has a process (Ray found it room; its constructor may still run)."""

    state: str
    placed: bool

    @property
    def waits_for_room(self) -> bool:
        """Pending creation with no process: Ray has found no node with room for it."""
        return self.state == "PENDING_CREATION" and not self.placed


def actor_states(handles: Mapping[str, Any]) -> dict[str, ActorState]:
    """Ray's state of each actor in ``handles`` (by part), from the GCS: one call for
    all the actors pending creation, one more per other actor asked about."""
    from ray._private import state  # a DeveloperAPI: the GCS's actor table

    if not handles:
        return {}
    try:
        pending = state.actors(actor_state_name="PENDING_CREATION")
    except Exception:  # noqa: BLE001 - a report must not stop the run; said as UNKNOWN
        pending = None
    out = {}
    for part, handle in handles.items():
        actor_id = handle._actor_id.hex()
        info = pending.get(actor_id) if pending is not None else None
        if info is None:
            try:
                info = state.actors(actor_id) or {}
            except Exception:  # noqa: BLE001
                info = {}
        out[part] = ActorState(str(info.get("State", "UNKNOWN")), bool(info.get("Pid")))
    return out


def explain(waiting: Waiting, state: ActorState, nodes: Mapping[str, NodeRoom], now: float) -> dict[str, Any]:
    """Why ``waiting`` has not started, as the status reports it: Ray's state, what it
    asks for and where, what each node has free, and the reason in words."""
    asks = {name: round(amount, 2) for name, amount in waiting.asks.items()}
    where = [waiting.node] if waiting.node is not None else list(nodes)
    pinned = nodes[waiting.node].address if waiting.node is not None and waiting.node in nodes else None
    if state.state == "DEAD":
        why = "its actor died before it ran: the run replaces it"
    elif state.state == "ALIVE":
        why = "it is up; its first report (a chunk of games, a step, an answer) has not come back yet"
    elif state.placed:
        why = "Ray placed it: its process is starting"
    elif state.state != "PENDING_CREATION":
        why = f"Ray says {state.state}"
    elif waiting.node is not None and waiting.node not in nodes:
        why = "the node it is pinned to is gone"
    elif not any(fits(asks, nodes[node].total) for node in where if node in nodes):
        why = (f"no node alive {'there ' if pinned else ''}can ever hold {asks}: it waits for a node to join "
               "(an autoscaler adds one)")
    elif not any(fits(asks, nodes[node].free) for node in where if node in nodes):
        why = f"no node alive {'there ' if pinned else ''}has {asks} free: the run's other parts hold them"
    else:
        why = "room is free now: Ray has not placed it yet"
    return {"part": waiting.part, "waited_s": round(now - waiting.first, 1), "tries": waiting.tries,
            "state": state.state, "asks": asks, "node": pinned or (waiting.node[:8] if waiting.node else None),
            "free": describe_free(nodes), "why": why}


def explain_text(report: Mapping[str, Any]) -> str:
    """One log line of an ``explain`` report."""
    free = ", ".join(f"{address} " + " ".join(f"{name} {amount:g}" for name, amount in room.items())
                     for address, room in report["free"].items())
    where = f" on {report['node']}" if report["node"] else ""
    return (f"{report['part']} has not started in {report['waited_s']:.0f} s: Ray says {report['state']}; "
            f"it asks for {report['asks']}{where}; free: {free or 'nothing'}; {report['why']}")
