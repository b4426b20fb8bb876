"""SelfPlayWorker: G concurrent self-play games fed by a shared inference server.

A plain class; the cluster makes it a Ray actor (one CPU each). Its games are split
into two halves, each a ``SelfPlay``: while the server evaluates one half's leaves,
the worker does the tree work of the other, so neither side waits for the other
(the design's two half-batches in flight). Finished games go to ``sink(record)``.

``submit(planes) -> handle`` and ``resolve(handle) -> (policy, value)`` are how it
reaches the server: ``server.evaluate.remote`` and ``ray.get`` inside Ray (the handle
an ObjectRef), a direct call in one process (the handle the planes themselves); the
worker is generic in the handle's type, which only the pair knows. When ``resolve``
raises (the server is gone), ``run_for`` passes the error on and keeps the leaves it
was waiting for; the next ``run_for`` sends them again through ``submit``, which by
then reaches another server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Generic, TypedDict, TypeVar

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.selfplay import GameRecord, SelfPlay, SelfPlaySettings

__all__ = ["SelfPlayWorker", "WorkerStats"]

#: what ``submit`` returns for a batch of leaves and ``resolve`` takes back
Handle = TypeVar("Handle")


class WorkerStats(TypedDict):
    """A worker's counters since it started (``run_for``, ``stats``), which the training
    loop turns into the run's totals and rates."""

    games: int  # games finished
    positions: int  # training positions those games recorded
    evaluations: int  # leaves evaluated
    rounds: int  # search rounds (each half once)
    moves: int  # moves played
    seconds: float  # time spent in run_for


class SelfPlayWorker(Generic[Handle]):
    """Plays self-play games forever, in chunks of ``run_for(seconds)``."""

    def __init__(
        self,
        *,
        game: Game,
        selfplay: SelfPlaySettings,
        submit: Callable[[np.ndarray], Handle],
        resolve: Callable[[Handle], tuple[np.ndarray, np.ndarray]],
        sink: Callable[[GameRecord], None],
        seed: int,
        games: int,
        model_version: int = 0,
        halves: int = 2,
    ):
        if halves not in (1, 2):
            raise ValueError(f"halves must be 1 or 2, got {halves}")
        if games < halves:
            raise ValueError(f"a worker needs at least {halves} games ({halves} halves)")
        self.game = game
        self.submit = submit
        self.resolve = resolve
        self.sink = sink
        # Two halves overlap tree work with a remote evaluation; one (in-process, where
        # the evaluation is a call) keeps every leaf in one model batch.
        sizes = (games,) if halves == 1 else (games // 2, games - games // 2)
        self.halves = [
            SelfPlay(game, games=n, seed=seed * 2 + i, model_version=model_version, **asdict(selfplay))
            for i, n in enumerate(sizes)
        ]
        #: per half: the leaf planes sent and the handle of their evaluation (None:
        #: to be sent again, after the server that had them was lost)
        self._in_flight: list[tuple[np.ndarray, Handle | None] | None] = [None] * len(self.halves)
        self.games_played = 0
        self.positions = 0
        self.evaluations = 0
        self.rounds = 0
        self.busy_seconds = 0.0

    def set_model_version(self, version: int) -> None:
        """The version the samples recorded from now on carry (pushed on promotion)."""
        for half in self.halves:
            half.set_model_version(version)

    def run_for(self, seconds: float) -> WorkerStats:
        """Play for about ``seconds``; returns counters since the worker started."""
        start = time.monotonic()
        for i, half in enumerate(self.halves):
            in_flight = self._in_flight[i]
            if in_flight is None:
                self._in_flight[i] = self._gather(half)
            elif in_flight[1] is None and len(in_flight[0]):
                self._in_flight[i] = (in_flight[0], self.submit(in_flight[0]))  # to the new server
        while time.monotonic() - start < seconds:
            for i, half in enumerate(self.halves):
                # Resolve this half's evaluation (the other half's is in flight), play
                # on, and send its next leaves before turning to the other half.
                in_flight = self._in_flight[i]
                assert in_flight is not None
                planes, handle = in_flight
                try:
                    if len(planes):
                        assert handle is not None  # sent by _gather, or again at this call's start
                        policy, value = self.resolve(handle)
                    else:
                        policy, value = _nothing(self.game)
                except BaseException:
                    # The server went away with both halves' leaves: the same leaves go
                    # to the next one, so no game loses its search.
                    self._in_flight = [None if f is None else (f[0], None) for f in self._in_flight]
                    self.busy_seconds += time.monotonic() - start
                    raise
                for record in half.apply(policy, value):
                    self.sink(record)
                    self.games_played += 1
                    self.positions += len(record.value)
                self.evaluations += len(planes)
                self._in_flight[i] = self._gather(half)
            self.rounds += 1
        self.busy_seconds += time.monotonic() - start
        return self.stats()

    def stats(self) -> WorkerStats:
        return {
            "games": self.games_played,
            "positions": self.positions,
            "evaluations": self.evaluations,
            "rounds": self.rounds,
            "moves": sum(h.moves_played for h in self.halves),
            "seconds": self.busy_seconds,
        }

    def _gather(self, half: SelfPlay) -> tuple[np.ndarray, Handle | None]:
        planes = half.gather()
        if len(planes) == 0:
            return planes, None
        # The search reuses its planes buffer on the next gather: send (and keep) a copy.
        planes = planes.copy()
        return planes, self.submit(planes)


def _nothing(game: Game) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((0, game.num_actions), np.float32), np.zeros(0, np.float32)
