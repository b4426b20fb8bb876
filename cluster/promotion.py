"""From a candidate to the best model on every server: the gatekeeper's matches, and
what a promotion does in a Ray run.

The driver (cluster/driver.py) keeps the run going; this is the part of it that
takes the loop's next candidate to the gatekeeper actor, hands the match's result to
the loop (run/loop.py: the ladder, ``best/``, ``models/``, ``gating.jsonl``, the
registry pruned), and pushes a promoted model out (push, don't poll): its weights,
fetched once from the registry, to every inference server (hash-checked, not waited
on: the loads come back through the driver's loop, and a server that fails to load
them, or does not answer within ``LOAD_DEADLINE_S``, is restarted with them) and its version to every self-play
worker, for the samples it records from then on. A gatekeeper lost mid-match, or
hung (its match past 3x the longest so far, cluster/deadlines.py), is replaced after
the Supervisor's pause and the match is played again. At the end of a
run the best model is saved and the registry pruned once more, without waiting out
an outage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray

from tengen.cluster.actors import ActorSetup, GatekeeperActor
from tengen.cluster.deadlines import Deadlines, Hung, match_deadline_s
from tengen.cluster.fleet import Fleet
from tengen.cluster.redis_client import RedisUnavailable, ResilientRedis
from tengen.cluster.supervision import Supervisor, node_lost
from tengen.run.config import TengenConfig
from tengen.run.loop import TrainingLoop
from tengen.run.run_dir import version_id

if TYPE_CHECKING:
    from tengen.workers.gatekeeper import GatingResult

__all__ = ["Promotion"]

#: a server loads a model within this (the blob is megabytes, the swap waits for one batch)
LOAD_DEADLINE_S = 120.0


class Promotion:
    """The gatekeeper actor and its match in flight (``match``, a Ray reference, None
    between matches), and the pushes of promoted models to ``fleet``."""

    def __init__(self, config: TengenConfig, setup: ActorSetup, supervisor: Supervisor, loop: TrainingLoop,
                 fleet: Fleet, *, client: ResilientRedis, deadlines: Deadlines, log: Callable[[str], None]):
        self.config = config
        self.setup = setup
        self.supervisor = supervisor
        self.loop = loop
        self.fleet = fleet
        self.client = client
        self.log = log
        self.deadlines = deadlines
        self.gatekeeper: Any = None
        self.match: Any = None
        self._candidate = -1  # the one in the match in flight
        self._match_sent = 0.0
        #: the newest promotion's loads in flight (server key by reference), and its version
        self._loading: dict[Any, str] = {}
        self._loading_version = 0
        self._longest_match_s = 0.0  # the longest match so far: the next one's deadline

    def start_gatekeeper(self) -> None:
        url, password = self.setup.redis()
        self.gatekeeper = ray.remote(GatekeeperActor).options(**self.setup.beside_driver()).remote(
            self.setup.config, self.setup.run_id, url, password, self.config.seed + 1)

    def next_match(self) -> None:
        """Start a match for the loop's next candidate, unless one is in flight."""
        if self.match is None and self.gatekeeper is not None:
            candidate = self.loop.next_match()
            if candidate is not None:
                self._candidate = candidate
                self.match = self.gatekeeper.gate.remote(candidate, self.loop.best_version)
                self._match_sent = self.deadlines.clock()
                self.deadlines.sent("gatekeeper", self.match, "gate",
                                    match_deadline_s(self.config, self._longest_match_s), self._hung)

    def match_done(self) -> None:
        """The match in flight came back: the loop takes its result, and a promotion is
        pushed; a lost gatekeeper is replaced, and the match played again."""
        ref, self.match = self.match, None
        try:
            result: GatingResult = ray.get(ref)
        except ray.exceptions.RayError as e:
            self._lost(e)
            return
        self._longest_match_s = max(self._longest_match_s, self.deadlines.clock() - self._match_sent)
        self.supervisor.succeeded("gatekeeper")
        promoted = self.loop.gated(result)
        if promoted is not None:
            self.push(promoted)

    def _hung(self, ref: Any, error: Hung) -> None:
        """The match past its deadline: the gatekeeper is stopped and replaced like a lost one."""
        if ref is self.match:
            self.match = None
            self._lost(error)

    def _lost(self, error: BaseException) -> None:
        """A new gatekeeper plays the match again (or a newer candidate's)."""
        self.loop.match_cut_off(self._candidate)
        self.supervisor.replace("gatekeeper", error, self.start_gatekeeper, lost=self.gatekeeper)
        self.gatekeeper = None

    def push(self, version: int) -> None:
        """A promoted model to every inference server (hash-checked), without waiting:
        the loads come back through the driver's loop (``load_done``), each due within
        ``LOAD_DEADLINE_S``; once every server answered, its version goes to every
        worker, for the samples they record from then on."""
        from tengen.engine.network import blob_sha256

        blob, _ = self.loop.registry.fetch(version)
        sent = self.fleet.pool.send_weights(blob, blob_sha256(blob), version)
        self._loading = {ref: key for key, ref in sent.items()}
        self._loading_version = version
        for key, ref in sent.items():
            self.deadlines.sent(f"inference {key} load", ref, "load_weights", LOAD_DEADLINE_S, self._load_hung)
        if not sent:
            self.fleet.set_model_version(version)

    def refs(self) -> list[Any]:
        """What the driver waits for here: the match and the loads in flight."""
        return ([self.match] if self.match is not None else []) + list(self._loading)

    def load_done(self, ref: Any) -> bool:
        """Whether ``ref`` was a load of the newest promotion (and is now taken): a server
        that failed to load it is restarted (with it: a server started later gets these
        weights from the start)."""
        key = self._loading.pop(ref, None)
        if key is None:
            return False
        try:
            ray.get(ref)
        except ray.exceptions.RayError as e:
            self._load_failed(key, e)
        self._loaded_if_all()
        return True

    def _load_hung(self, ref: Any, error: Hung) -> None:
        key = self._loading.pop(ref, None)
        if key is not None:
            self._load_failed(key, error)
            self._loaded_if_all()

    def _load_failed(self, key: str, error: BaseException) -> None:
        if key in self.fleet.pool.servers:
            self.fleet.server_lost(key, RuntimeError(f"it failed to load {version_id(self._loading_version)}: "
                                                     f"{type(error).__name__}"), node_gone=node_lost(error))

    def _loaded_if_all(self) -> None:
        if not self._loading:
            self.fleet.set_model_version(self._loading_version)

    def finish(self) -> None:
        """The best model saved and the registry pruned, once each: a stop must not wait
        out an outage (Kubernetes kills after its grace period)."""
        try:
            with self.client.impatient():
                self.loop.on_disk(self.loop.save_best, stop=False)
                # The learner's last steps may have published candidates no report showed.
                self.loop.prune_registry()
        except RedisUnavailable:
            self.log("the best model stays as saved at its promotion (Redis is away)")
