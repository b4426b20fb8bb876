"""Where the run's parts have room on the nodes alive.

Ray places an actor on a node where what it asks for is free; which node to prefer is
decided here, from what the nodes alive have now (``nodes_alive``: each node's total
and free CPUs and GPUs, Ray's view):

- a self-play worker goes next to its inference server only when that node has a free
  CPU now (``Room.near``); otherwise Ray spreads it over the nodes with room. A soft
  affinity to a busy node is a wait, not a fallback: Ray leaves a node only when it is
  gone or can never hold the actor, so workers sent to a GPU node whose CPUs the
  learner holds would wait there for good.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import ray

__all__ = ["CPU", "GPU", "WORKER_ASK", "NodeRoom", "Room", "fits", "nodes_alive"]

CPU = "CPU"
GPU = "GPU"
#: what a self-play worker asks for
WORKER_ASK: Mapping[str, float] = {CPU: 1.0}
#: resource amounts are sums of halves and wholes; compared with this much slack
_EPS = 1e-6


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


class Room:
    """The free CPUs and GPUs of ``nodes`` as one pass of placements takes them (Ray's
    own view lags the actors just created)."""

    def __init__(self, nodes: Mapping[str, NodeRoom]):
        self.nodes = dict(nodes)
        self._free = {node: dict(room.free) for node, room in nodes.items()}

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
