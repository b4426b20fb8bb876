"""From a candidate to the best model on every server: the gatekeeper's matches, and
what a promotion does in a Ray run.

The driver (cluster/driver.py) keeps the run going; this is the part of it that
takes the loop's next candidate to the gatekeeper actor, hands the match's result to
the loop (run/loop.py: the ladder, ``best/``, ``models/``, ``gating.jsonl``, the
registry pruned), and pushes a promoted model out (push, don't poll): its weights,
fetched once from the registry, to every inference server (hash-checked; a server
that fails to load them is restarted with them) and its version to every self-play
worker, for the samples it records from then on. A gatekeeper lost mid-match is
replaced after the Supervisor's pause and the match is played again. At the end of a
run the best model is saved and the registry pruned once more, without waiting out
an outage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray

from tengen.cluster.actors import ActorSetup, GatekeeperActor
from tengen.cluster.fleet import Fleet
from tengen.cluster.redis_client import RedisUnavailable, ResilientRedis
from tengen.cluster.supervision import Supervisor
from tengen.run.config import TengenConfig
from tengen.run.loop import TrainingLoop
from tengen.run.run_dir import version_id

if TYPE_CHECKING:
    from tengen.workers.gatekeeper import GatingResult

__all__ = ["Promotion"]


class Promotion:
    """The gatekeeper actor and its match in flight (``match``, a Ray reference, None
    between matches), and the pushes of promoted models to ``fleet``."""

    def __init__(self, config: TengenConfig, setup: ActorSetup, supervisor: Supervisor, loop: TrainingLoop,
                 fleet: Fleet, *, client: ResilientRedis, log: Callable[[str], None]):
        self.config = config
        self.setup = setup
        self.supervisor = supervisor
        self.loop = loop
        self.fleet = fleet
        self.client = client
        self.log = log
        self.gatekeeper: Any = None
        self.match: Any = None
        self._candidate = -1  # the one in the match in flight

    def start_gatekeeper(self) -> None:
        url, password = self.setup.redis()
        self.gatekeeper = ray.remote(GatekeeperActor).options(num_cpus=0).remote(
            self.setup.config, self.setup.run_id, url, password, self.config.seed + 1)

    def next_match(self) -> None:
        """Start a match for the loop's next candidate, unless one is in flight."""
        if self.match is None and self.gatekeeper is not None:
            candidate = self.loop.next_match()
            if candidate is not None:
                self._candidate = candidate
                self.match = self.gatekeeper.gate.remote(candidate, self.loop.best_version)

    def match_done(self) -> None:
        """The match in flight came back: the loop takes its result, and a promotion is
        pushed; a lost gatekeeper is replaced, and the match played again."""
        ref, self.match = self.match, None
        try:
            result: GatingResult = ray.get(ref)
        except ray.exceptions.RayError as e:
            # A new gatekeeper plays the match again (or a newer candidate's).
            self.loop.match_cut_off(self._candidate)
            self.supervisor.replace("gatekeeper", e, self.start_gatekeeper, lost=self.gatekeeper)
            self.gatekeeper = None
            return
        self.supervisor.succeeded("gatekeeper")
        promoted = self.loop.gated(result)
        if promoted is not None:
            self.push(promoted)

    def push(self, version: int) -> None:
        """A promoted model to every inference server (hash-checked) and its version to
        every worker, for the samples they record from now on."""
        from tengen.engine.network import blob_sha256

        blob, _ = self.loop.registry.fetch(version)
        for key in self.fleet.pool.load_weights(blob, blob_sha256(blob), version):
            # A server started later gets these weights from the start.
            self.fleet.server_lost(key, RuntimeError(f"it failed to load {version_id(version)}"))
        self.fleet.set_model_version(version)

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
