"""The strength evaluator of the single-process run, in a child process of its own.

A thread would not do: TensorFlow runs a model's ops on its own thread pool, started
by the first op at the main job's priority, and numba's search holds the GIL in
stretches. So ``StrengthProcess`` starts a child (multiprocessing's ``spawn``: the
parent has TensorFlow loaded, which does not survive a fork) that first puts itself
at ``evaluation.nice`` (19 by default) with TensorFlow held to
ceil(``evaluation.cpu_share``) threads (workers/strength.py's ``low_priority``: every
thread it starts after inherits the nice value), then builds a ``StrengthEvaluator`` and answers one request at a time
over a pipe: ``(version, blob)`` in, the ``StrengthResult`` (or the error it raised,
as text) out. Its ``CpuShare`` sleeps off what it used past its share; at nice 19 it
gets what the main job leaves of the cores, and no more than its share of an idle one.

The parent never waits for it: ``ask`` sends, ``poll`` takes an answer when there is
one. A child that dies, or takes longer than ``evaluation.deadline_s``, is stopped,
and the evaluation is cut off (run/loop.py asks for it again after the interval; a
new child starts with the next request). A daemon child is stopped with its parent,
and one whose parent was killed reads the end of the pipe and exits.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from tengen.run.config import TengenConfig
    from tengen.workers.strength import StrengthResult

__all__ = ["StrengthProcess", "EvaluationFailed"]


class EvaluationFailed(RuntimeError):
    """The evaluation did not finish: the child raised, died or missed its deadline."""


def _serve(config_json: dict[str, Any], conn: Connection) -> None:
    """The child: low priority first (before the backend starts a thread), then one
    evaluation per request until the pipe closes or a None comes."""
    from tengen.engine.backend_start import held_native_stderr, quiet_asked, start_backend
    from tengen.workers.strength import low_priority

    evaluation = config_json.get("evaluation", {})
    # The child shares the terminal of a quiet ``tengen train``: the backend, which
    # low_priority starts after the nice value, says nothing on it. (KERAS_BACKEND is
    # the run's: the driver chose it before starting this child.)
    # The whole set-up is held, the evaluator's network built and compiled too: the
    # backend may speak at its first ops as well as at its import (a CI run once showed
    # TensorFlow's start-up from a quiet single-process run).
    with held_native_stderr() if quiet_asked() else contextlib.nullcontext():
        pace = low_priority(float(evaluation.get("cpu_share", 0.5)), nice=int(evaluation.get("nice", 19)))
        start_backend(config_json.get("network", {}).get("backend"), strict=False, quiet=False)
        from tengen.run.config import parse_config
        from tengen.workers.strength import StrengthEvaluator

        config = parse_config(config_json)
        evaluator = StrengthEvaluator(game=config.game.make(), options=config.strength_options(),
                                      network=config.network_spec(), pace=pace)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        version, blob = request
        try:
            conn.send(("result", evaluator.evaluate(version, blob)))
        except Exception as e:  # the parent logs it and asks again later
            conn.send(("error", f"{type(e).__name__}: {e}"))


class StrengthProcess:
    """A child process that measures model versions (module docstring); ``clock`` times
    the deadline."""

    def __init__(self, config: TengenConfig, *, clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.clock = clock
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Connection | None = None
        #: the version being measured and when it was asked for (None: idle)
        self.asked: tuple[int, float] | None = None

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(self.config.model_dump(mode="json"), child),
                                        daemon=True, name="tengen-strength")
        process.start()
        child.close()
        self._process, self._conn = process, parent

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def ask(self, version: int, blob: bytes) -> None:
        """Measure ``version`` (its weights ``blob``); the answer comes through ``poll``."""
        if self.asked is not None:
            raise RuntimeError("one evaluation at a time")
        if self._process is None or not self._process.is_alive():
            self._start()
        assert self._conn is not None
        self._conn.send((version, blob))
        self.asked = (version, self.clock())

    def poll(self) -> StrengthResult | None:
        """The answer to the request in flight when it has come (None: not yet, or none
        asked for); ``EvaluationFailed`` when the child raised, died or is past
        ``evaluation.deadline_s`` (then it is stopped)."""
        if self.asked is None or self._conn is None:
            return None
        try:
            ready = self._conn.poll()
        except (EOFError, OSError):
            ready = False
        if ready:
            try:
                kind, value = self._conn.recv()
            except (EOFError, OSError):
                self._failed("the evaluator's process died")
            self.asked = None
            if kind == "error":
                raise EvaluationFailed(f"the evaluator raised {value}")
            return value
        if not self._process.is_alive():
            self._failed(f"the evaluator's process died (exit code {self._process.exitcode})")
        deadline = self.config.evaluation.deadline_s
        if self.clock() - self.asked[1] > deadline:
            self._failed(f"no answer in {deadline:.0f} s (evaluation.deadline_s)")
        return None

    def _failed(self, why: str) -> NoReturn:
        self.asked = None
        self.close()
        raise EvaluationFailed(why)

    def close(self) -> None:
        """Stop the child now (an evaluation in flight is dropped)."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        self.asked = None
        if conn is not None:
            conn.close()
        if process is not None:
            process.terminate()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join(timeout=10)
