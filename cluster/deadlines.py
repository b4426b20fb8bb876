"""Deadlines on the calls the driver waits for: a part that does not answer is hung.

A learner step, a worker's chunk of games and a gating match each come back within a
time its own cadence bounds: the call's own length (``learner.step``'s seconds, the
chunk's seconds, the longest match so far), plus the longest wait the part may sit
out on its own and come back from (an outage of Redis, of the checkpoint storage, a
worker's wait for a leaf evaluation), plus ``cluster.hang_grace_s``. A call past its
deadline is taken for a hung actor (a process stopped, deadlocked, or lost in a
partition that Ray has not noticed): its owner's ``on_hung`` stops it and has it
replaced like a failed one (cluster/supervision.py), so that a hang is a named,
counted failure, never a silent stop of training.

A part that Ray has not yet placed or that still starts is exempt (``exempt``): its
wait is the placement's (cluster/placement.py reports it past
``cluster.start_timeout_s``), not a hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray

from tengen.run.outage import CALL_TIMEOUT_S

if TYPE_CHECKING:
    from tengen.run.config import TengenConfig

__all__ = ["Deadlines", "Hung", "learner_deadline_s", "match_deadline_s", "strength_deadline_s",
           "worker_deadline_s"]

def worker_deadline_s(config: TengenConfig) -> float:
    """A worker's chunk: its seconds, a leaf's wait for a server that stopped answering,
    and Redis away while its outbox is full."""
    c = config.cluster
    return c.worker_chunk_seconds + c.evaluation_timeout_s + config.redis.outage_s + c.hang_grace_s


def learner_deadline_s(config: TengenConfig, step_s: float) -> float:
    """A learner step of ``step_s``: Redis away, and the checkpoint storage away (when
    the config names one: else the driver keeps the checkpoints)."""
    storage = config.storage_outage_s + CALL_TIMEOUT_S if config.storage is not None else 0.0
    return step_s + config.redis.outage_s + storage + config.cluster.hang_grace_s


def match_deadline_s(config: TengenConfig, longest_s: float) -> float:
    """A gating match, the longest so far having taken ``longest_s`` (0: none yet)."""
    c = config.cluster
    return max(3 * longest_s, c.match_deadline_s) + config.redis.outage_s + c.hang_grace_s


def strength_deadline_s(config: TengenConfig) -> float:
    """A strength evaluation: ``evaluation.deadline_s`` (it needs no Redis: the driver
    hands it the weights)."""
    return config.evaluation.deadline_s + config.cluster.hang_grace_s


class Hung(TimeoutError):
    """A call that did not come back within its deadline (the message says which, and
    how long it waited)."""


@dataclass
class _Call:
    ref: Any
    what: str  # the call, as the log names it: "step", "run_for", "gate"
    sent: float
    deadline_s: float
    on_hung: Callable[[Any, Hung], None]


class Deadlines:
    """The one call in flight of each part, with its deadline. ``check()`` (once per
    pass of the driver's loop) calls ``on_hung(ref, error)`` for each call past its
    deadline that has not come back, and forgets it; a new call of a part replaces its
    last one, so that nothing needs to be said when a call comes back."""

    def __init__(self, *, exempt: Callable[[str], bool] = lambda part: False,
                 clock: Callable[[], float] = time.monotonic,
                 ready: Callable[[list[Any]], set[Any]] | None = None):
        self._calls: dict[str, _Call] = {}
        self._exempt = exempt
        self.clock = clock
        self._ready = ready or _ready_now

    def sent(self, part: str, ref: Any, what: str, deadline_s: float, on_hung: Callable[[Any, Hung], None]) -> None:
        """``part`` made the call ``ref`` (``what``), due within ``deadline_s``."""
        self._calls[part] = _Call(ref, what, self.clock(), deadline_s, on_hung)

    def forget(self, part: str) -> None:
        """``part`` is gone (stopped or replaced): its call is no one's to wait for."""
        self._calls.pop(part, None)

    def overdue(self) -> list[str]:
        """The parts whose call is past its deadline now (exempt ones left out)."""
        now = self.clock()
        return [part for part, call in self._calls.items()
                if now - call.sent > call.deadline_s and not self._exempt(part)]

    def check(self) -> None:
        """Each call past its deadline that has not come back: handed to its owner as hung."""
        late = self.overdue()
        if not late:
            return
        answered = self._ready([self._calls[part].ref for part in late])
        now = self.clock()
        for part in late:
            call = self._calls.pop(part)
            if call.ref in answered:
                continue  # it came back just now: the loop dispatches it
            call.on_hung(call.ref, Hung(f"no answer to {call.what} in {now - call.sent:.0f} s "
                                        f"(its deadline is {call.deadline_s:.0f} s)"))


def _ready_now(refs: list[Any]) -> set[Any]:
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return set(ready)
