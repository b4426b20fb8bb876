"""SelfPlayWorker: G concurrent self-play games fed by a shared inference server.

A plain class; the cluster makes it a Ray actor (one CPU each). Its games are split
into two halves, each a ``SelfPlay``: while the server evaluates one half's leaves,
the worker does the tree work of the other, so neither side waits for the other
(the design's two half-batches in flight). Finished games go to ``sink(record)``.

A game that ``sink`` refuses (``RecordRefused``: the stream's format check) is
dropped and counted, and the worker plays on; once ``refusals_to_stop`` games in a row
were refused (none taken between: a search or a model that makes only bad records),
``run_for`` raises ``AllGamesRefused`` at the end of its chunk, so that the wiring
treats it as a failed chunk (replaced, and a crash loop when it goes on) instead of
playing on into nothing.

``submit(planes) -> handle`` and ``resolve(handle) -> (policy, value)`` are how it
reaches the server: ``server.evaluate.remote`` on the planes bit-packed
(workers/packed_planes.py) and ``ray.get`` inside Ray (cluster/actors.py; the handle
an ObjectRef), a direct call in one process (the handle the planes themselves); the
worker is generic in the handle's type, which only the pair knows. When ``resolve``
raises (the server is gone), ``run_for`` passes the error on and keeps the leaves it
was waiting for; the next ``run_for`` sends them again through ``submit``, which by
then reaches another server.

With ``cache_positions`` > 0 the worker keeps an ``EvaluationCache`` of that many
network answers, shared by its halves: only the leaves it does not hold are sent (a
position met twice in one batch, once), and the answers that come back for them are
kept, unless the model version changed while they were out (``set_model_version``
clears the cache: the driver pushes a promoted model to the servers before it tells
the workers, so every answer to a leaf sent after the clear is the new model's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypedDict, TypeVar

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.mcts.eval_cache import CachedLeaves, EvaluationCache
from tengen.engine.selfplay import GameRecord, RecordRefused, SelfPlay, SelfPlaySettings

__all__ = ["AllGamesRefused", "SelfPlayWorker", "WorkerStats"]

#: what ``submit`` returns for a batch of leaves and ``resolve`` takes back
Handle = TypeVar("Handle")


class WorkerStats(TypedDict):
    """A worker's counters since it started (``run_for``, ``stats``), which the training
    loop turns into the run's totals and rates."""

    games: int  # games finished and taken by the sink
    games_refused: int  # games finished that the sink refused (RecordRefused), dropped
    positions: int  # training positions those games recorded
    evaluations: int  # leaves evaluated (cache hits included)
    cache_hits: int  # leaves the evaluation cache answered
    rounds: int  # search rounds (each half once)
    moves: int  # moves played
    seconds: float  # time spent in run_for


class AllGamesRefused(RecordRefused):
    """The worker's last games were all refused; the message says why the last was."""


@dataclass
class _Leaves(Generic[Handle]):
    """A half's leaves out for evaluation."""

    sent: np.ndarray  # the planes sent (all the leaves', or the cache's misses)
    handle: Handle | None  # None: nothing sent yet (none to send, or to be sent again)
    cached: CachedLeaves | None  # the cache's lookup of all of them (None: no cache)
    version: int  # the model version when they were sent

    @property
    def rows(self) -> int:
        return len(self.sent) if self.cached is None else self.cached.rows


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
        cache_positions: int = 0,
        refusals_to_stop: int = 16,
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
            SelfPlay(game, games=n, seed=seed * 2 + i, settings=selfplay, model_version=model_version)
            for i, n in enumerate(sizes)
        ]
        self.model_version = model_version
        self.cache = EvaluationCache(cache_positions, game.num_actions) if cache_positions > 0 else None
        #: per half: its leaves out for evaluation
        self._in_flight: list[_Leaves[Handle] | None] = [None] * len(self.halves)
        self.games_played = 0
        self.games_refused = 0
        self.refusals_to_stop = refusals_to_stop
        self._refused_in_a_row = 0
        #: why the last refused game was refused
        self.last_refusal: str | None = None
        self.positions = 0
        self.evaluations = 0
        self.cache_hits = 0
        self.rounds = 0
        self.busy_seconds = 0.0

    def set_model_version(self, version: int) -> None:
        """The version the samples recorded from now on carry (pushed on promotion,
        after the servers have the model): the cache's answers are the old model's."""
        if version != self.model_version and self.cache is not None:
            self.cache.clear()
        self.model_version = version
        for half in self.halves:
            half.set_model_version(version)

    def run_for(self, seconds: float) -> WorkerStats:
        """Play for about ``seconds``; returns counters since the worker started."""
        start = time.monotonic()
        for i, half in enumerate(self.halves):
            in_flight = self._in_flight[i]
            if in_flight is None:
                self._in_flight[i] = self._gather(half)
            elif in_flight.handle is None and len(in_flight.sent):
                in_flight.handle = self.submit(in_flight.sent)  # to the new server
        while time.monotonic() - start < seconds:
            for i, half in enumerate(self.halves):
                # Resolve this half's evaluation (the other half's is in flight), play
                # on, and send its next leaves before turning to the other half.
                in_flight = self._in_flight[i]
                assert in_flight is not None
                try:
                    if len(in_flight.sent):
                        assert in_flight.handle is not None  # sent by _gather, or again at this call's start
                        policy, value = self.resolve(in_flight.handle)
                    else:
                        policy, value = _nothing(self.game)
                except BaseException:
                    # The server went away with both halves' leaves: the same leaves go
                    # to the next one, so no game loses its search.
                    for f in self._in_flight:
                        if f is not None:
                            f.handle = None
                    self.busy_seconds += time.monotonic() - start
                    raise
                if in_flight.cached is not None:
                    assert self.cache is not None
                    if in_flight.version == self.model_version:
                        self.cache.insert(in_flight.cached, policy, value)
                    policy, value = in_flight.cached.merge(policy, value)
                    self.cache_hits += in_flight.rows - len(in_flight.sent)
                for record in half.apply(policy, value):
                    try:
                        self.sink(record)
                    except RecordRefused as e:
                        self.games_refused += 1
                        self._refused_in_a_row += 1
                        self.last_refusal = f"{type(e).__name__}: {e}"
                        continue
                    self._refused_in_a_row = 0
                    self.games_played += 1
                    self.positions += len(record.value)
                self.evaluations += in_flight.rows
                self._in_flight[i] = self._gather(half)
            self.rounds += 1
        self.busy_seconds += time.monotonic() - start
        if self._refused_in_a_row >= self.refusals_to_stop:
            raise AllGamesRefused(f"the last {self._refused_in_a_row} games this worker finished were all refused; "
                                  f"the last: {self.last_refusal}")
        return self.stats()

    def refusals_since(self, before: int) -> str | None:
        """A line for the log when games were refused since the count was ``before``."""
        if self.games_refused <= before:
            return None
        return f"{self.games_refused} games refused so far; the last: {self.last_refusal}"

    def stats(self) -> WorkerStats:
        return {
            "games": self.games_played,
            "games_refused": self.games_refused,
            "positions": self.positions,
            "evaluations": self.evaluations,
            "cache_hits": self.cache_hits,
            "rounds": self.rounds,
            "moves": sum(h.moves_played for h in self.halves),
            "seconds": self.busy_seconds,
        }

    def _gather(self, half: SelfPlay) -> _Leaves[Handle]:
        planes = half.gather()
        cached = None
        if self.cache is None:
            # The search reuses its planes buffer on the next gather: send (and keep) a copy.
            sent = planes.copy()
        else:
            cached = self.cache.lookup(planes)
            sent = cached.missing_planes  # a copy already
        return _Leaves(sent=sent, handle=self.submit(sent) if len(sent) else None, cached=cached,
                       version=self.model_version)


def _nothing(game: Game) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((0, game.num_actions), np.float32), np.zeros(0, np.float32)
