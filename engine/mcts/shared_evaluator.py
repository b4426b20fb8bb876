"""``SharedEvaluator``: one evaluator for searches on several threads, whose calls that
wait while the network is busy go to it as one batch.

A network call costs about the same for one leaf as for dozens, so searches that take
turns at the network waste it. Whoever calls first while the network is free runs the
batch of every call waiting then (its own included) and hands the next batch to the
first call that came meanwhile: no thread of its own, no timer, and a call alone never
waits for company.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from tengen.engine.mcts.evaluators import Evaluator

__all__ = ["SharedEvaluator"]


@dataclass
class _Call:
    planes: np.ndarray
    done: threading.Event = field(default_factory=threading.Event)
    runs_batch: bool = False  # woken to run the next batch, not with its answer
    answer: tuple[np.ndarray, np.ndarray] | None = None
    error: BaseException | None = None


class SharedEvaluator:
    """``evaluate`` (an ``Evaluator``) for callers on several threads at once.

    ``network_calls`` and ``rows`` count what reached ``evaluate``; ``busy`` says
    whether a batch is running and ``waiting`` how many calls are queued for the next.
    """

    def __init__(self, evaluate: Evaluator):
        self.evaluate = evaluate
        self.network_calls = 0
        self.rows = 0
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._busy = False

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._busy

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._queue)

    def __call__(self, planes: np.ndarray, /) -> tuple[np.ndarray, np.ndarray]:
        call = _Call(np.asarray(planes))
        with self._lock:
            self._queue.append(call)
            runs = not self._busy
            self._busy = True
        if not runs:
            call.done.wait()
            runs = call.runs_batch
        if runs:
            self._run_batch()
        if call.error is not None:
            raise call.error
        assert call.answer is not None
        return call.answer

    def _run_batch(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            planes = batch[0].planes if len(batch) == 1 else np.concatenate([c.planes for c in batch])
            policy, value = self.evaluate(planes)
            policy, value = np.asarray(policy), np.asarray(value).reshape(-1)
            self.network_calls += 1
            self.rows += len(planes)
            start = 0
            for call in batch:
                end = start + len(call.planes)
                call.answer = policy[start:end], value[start:end]
                start = end
        except BaseException as e:  # every call of the batch gets the network's error
            for call in batch:
                call.error = e
        with self._lock:
            if self._queue:
                # the first call that came while this batch ran runs the next one
                self._queue[0].runs_batch = True
                self._queue[0].done.set()
            else:
                self._busy = False
        for call in batch:
            call.done.set()
