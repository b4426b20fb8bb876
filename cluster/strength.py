"""The strength evaluator of a Ray run: the actor, its one evaluation in flight, and
what comes back.

The loop (run/loop.py) says when the best model is due a measurement
(``next_evaluation``: the newest best, rate-limited by ``evaluation.min_interval_s``);
this hands it to a ``StrengthActor`` (cluster/actors.py: its process at nice 19 and
paced to ``evaluation.cpu_share``; on the driver's node with ``num_cpus`` 0 like the
gatekeeper, so that it never takes the place of a worker or of a learner that must be
placed again) with the
version's weights fetched from the registry now (a version promoted past by the time
the actor starts may be pruned from Redis later), and the loop records the result
when it comes back through the driver's wait (``done``). The call has a deadline
(``evaluation.deadline_s`` plus ``cluster.hang_grace_s``, cluster/deadlines.py); an
actor that dies, raises or hangs is replaced after the Supervisor's pause like the
gatekeeper, and the evaluation is cut off (asked for again after the interval); a
crash loop of it stops the measurements, not the run. The driver never waits on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray

from tengen.cluster.actors import ActorSetup, StrengthActor
from tengen.cluster.deadlines import Deadlines, Hung, strength_deadline_s
from tengen.cluster.supervision import CrashLoop, Supervisor, kill_actor
from tengen.run.config import TengenConfig
from tengen.run.loop import TrainingLoop

if TYPE_CHECKING:
    from tengen.workers.strength import StrengthResult

__all__ = ["Strength"]

#: the part's name in the supervisor, the deadlines and the status
PART = "strength"


class Strength:
    """The evaluator actor (None while it is replaced, or with ``evaluation.enabled``
    off) and its evaluation in flight (``ref``, a Ray reference, None between them)."""

    def __init__(self, config: TengenConfig, setup: ActorSetup, supervisor: Supervisor, loop: TrainingLoop, *,
                 deadlines: Deadlines, log: Callable[[str], None]):
        self.config = config
        self.setup = setup
        self.supervisor = supervisor
        self.loop = loop
        self.deadlines = deadlines
        self.log = log
        self.actor: Any = None
        self.ref: Any = None

    def start(self) -> None:
        """The evaluator actor, when the config measures strength."""
        if not self.config.evaluation.enabled:
            return
        self.actor = ray.remote(StrengthActor).options(**self.setup.beside_driver()).remote(
            self.setup.config)

    def next(self) -> None:
        """Ask for the loop's next evaluation, unless one is in flight."""
        if self.ref is not None or self.actor is None:
            return
        version = self.loop.next_evaluation()
        if version is None:
            return
        blob, _ = self.loop.registry.fetch(version)
        self.ref = self.actor.evaluate.remote(version, blob)
        self.deadlines.sent(PART, self.ref, "evaluate", strength_deadline_s(self.config), self._hung)

    def refs(self) -> list[Any]:
        """What the driver waits for here: the evaluation in flight."""
        return [self.ref] if self.ref is not None else []

    def done(self, ref: Any) -> bool:
        """Whether ``ref`` was the evaluation in flight (and is now taken): its result
        recorded by the loop, or a lost evaluator replaced."""
        if ref is not self.ref or ref is None:
            return False
        self.ref = None
        try:
            result: StrengthResult = ray.get(ref)
        except ray.exceptions.RayError as e:
            self._lost(e)
            return True
        self.supervisor.succeeded(PART)
        self.loop.evaluated(result)
        return True

    def _hung(self, ref: Any, error: Hung) -> None:
        if ref is self.ref:
            self.ref = None
            self._lost(error)

    def _lost(self, error: BaseException) -> None:
        """A new evaluator after the Supervisor's pause. A crash loop of the evaluator
        stops the measurements, not the training: it is logged, and the run goes on
        without them."""
        first = str(error).splitlines()[0] if str(error) else ""
        self.loop.evaluation_cut_off(f"{type(error).__name__}: {first}")
        lost, self.actor = self.actor, None
        try:
            self.supervisor.replace(PART, error, self.start, lost=lost)
        except CrashLoop as e:
            if lost is not None:
                kill_actor(lost)
            self.log(f"strength evaluations stop for the rest of the run: {e}")
