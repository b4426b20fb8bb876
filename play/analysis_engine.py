"""``tengen analysis``: KataGo's JSON analysis engine over one model (the protocol's
data is play/kata_analysis.py).

Queries arrive a line at a time (``handle_line``); each turn a query asks about is a
task, and ``threads`` searchers take the tasks by priority (higher first, then in the
order they came). A search stops at the query's ``maxVisits`` (else the engine's
default), its ``maxTime``, or a ``terminate``; with ``reportDuringSearchEvery`` it
reports on the way. It keeps off the moves of ``avoidMoves`` and ``allowMoves``.
Every task ends with exactly one result whose ``isDuringSearch`` is false
(``noResults`` for a task terminated before it ran).
``close`` (stdin closed) finishes the queued work, then returns.

Scores come from ``score_for(game)``, the model's score head, where the model has one,
else from the ownership estimate's area count (play/kata_analysis.py).

Each searcher has its own search (a tree per thread) over the shared model; the
command gives them one ``SharedEvaluator``, so the leaves of several queries that wait
on the model go to it as one batch.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tengen.engine.games.go import GoGame
from tengen.play.gtp.session import reopened
from tengen.play.kata_analysis import (
    Lead,
    Position,
    Query,
    QueryError,
    move_rules,
    no_result_json,
    parse_query,
    positions,
    result_json,
)
from tengen.play.ownership import Ownership
from tengen.play.score import Score
from tengen.play.search_player import Analysis, SearchPlayer

__all__ = ["AnalysisEngine"]


@dataclass(order=True)
class _Task:
    sort_key: tuple[int, int]
    query: Query = field(compare=False)
    game: GoGame = field(compare=False)
    position: Position = field(compare=False)
    stop: threading.Event = field(compare=False, default_factory=threading.Event)
    started: bool = field(compare=False, default=False)


class AnalysisEngine:
    """The analysis engine over one model.

    ``make_player()``: a new ``SearchPlayer`` (one per searcher thread); ``sizes``: the
    board sizes the model plays; ``ownership_for(game)``: the ``Ownership`` estimate of
    a game's positions (the model's head, else playouts), for scores and ownership;
    ``score_for(game)``: the ``Score`` estimate of a game's positions where the model
    has a score head (None: scores are the ownership's area count);
    ``default_visits``: a query's visits when it names none; ``write(line)``: one line
    of output; ``version``, ``model_name``: what query_version and query_models say.
    """

    def __init__(self, *, make_player: Callable[[], SearchPlayer], sizes: Sequence[int],
                 ownership_for: Callable[[GoGame], Ownership], default_visits: int, write: Callable[[str], None],
                 version: str, model_name: str, threads: int = 1,
                 score_for: Callable[[GoGame], Score] | None = None):
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.sizes = tuple(sizes)
        self.ownership_for = ownership_for
        self.score_for = score_for
        self.default_visits = default_visits
        self.version = version
        self.model_name = model_name
        self._write = write
        self._write_lock = threading.Lock()
        self._lock = threading.Condition()
        self._queue: list[_Task] = []
        self._running: list[_Task] = []
        self._order = itertools.count()
        self._closing = False
        self._players = [make_player() for _ in range(threads)]
        self._workers = [threading.Thread(target=self._work, args=(player,), name=f"analysis-{i}", daemon=True)
                         for i, player in enumerate(self._players)]
        for worker in self._workers:
            worker.start()

    # -- input ----------------------------------------------------------------------------
    def handle_line(self, line: str) -> None:
        """One input line: a query, an action, or something answered with an error."""
        if not line.strip():
            return
        try:
            obj = json.loads(line)
        except ValueError as e:
            self._emit({"error": f"could not parse the query as JSON: {e}"})
            return
        query_id = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(obj, dict) and "action" in obj:
            self._action(obj, query_id)
            return
        try:
            query = parse_query(obj, sizes=self.sizes)
            game = self._game(query)
            wanted = positions(query, game)
        except QueryError as e:
            self._emit(e.to_json(query_id if isinstance(query_id, str) else None))
            return
        for where, message in query.warnings:
            self._emit({"warning": message, "field": where, "id": query.id})
        with self._lock:
            for position in wanted:
                heapq.heappush(self._queue, _Task((-query.priority, next(self._order)), query, game, position))
            self._lock.notify_all()

    def close(self) -> None:
        """Finish every queued task, then stop the searchers."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        for worker in self._workers:
            worker.join()

    def _game(self, query: Query) -> GoGame:
        player = self._players[0]
        return GoGame(size=query.size, komi=query.komi, history_length=player.history_length or 8,
                      features=bool(player.features))

    def _action(self, obj: dict[str, Any], query_id: Any) -> None:
        action = obj["action"]
        if not isinstance(query_id, str):
            self._emit({"error": "id is required and must be a string", "field": "id"})
            return
        if action == "query_version":
            self._emit({**obj, "version": self.version, "git_hash": "<omitted>"})
        elif action == "query_models":
            self._emit({**obj, "models": [{"name": self.model_name, "internalName": self.model_name,
                                           "maxBatchSize": 1, "usesHumanSLProfile": False,
                                           "version": 0, "usingFP16": "false"}]})
        elif action == "clear_cache":
            self._emit(obj)  # searches keep no cache between queries
        elif action in ("terminate", "terminate_all"):
            target = obj.get("terminateId")
            if action == "terminate" and not isinstance(target, str):
                self._emit({"error": "terminateId is required and must be a string", "field": "terminateId",
                            "id": query_id})
                return
            turns = obj.get("turnNumbers")
            if turns is not None and not (isinstance(turns, list) and all(isinstance(t, int) for t in turns)):
                self._emit({"error": "turnNumbers must be a list of integers", "field": "turnNumbers",
                            "id": query_id})
                return
            self._emit(obj)  # acknowledged first; the terminated tasks' results follow
            self._terminate(None if action == "terminate_all" else target, turns)
        else:
            self._emit({"error": f"unknown action {action!r}", "field": "action", "id": query_id})

    def _terminate(self, target: str | None, turns: list[int] | None) -> None:
        def hit(task: _Task) -> bool:
            return (target is None or task.query.id == target) and (turns is None or task.position.turn in turns)

        with self._lock:
            dropped = [t for t in self._queue if hit(t)]
            self._queue = [t for t in self._queue if not hit(t)]
            heapq.heapify(self._queue)
            for task in self._running:
                if hit(task):
                    task.stop.set()  # it reports what it searched so far, as its final result
        for task in dropped:
            self._emit(no_result_json(task.query.id, task.position.turn))

    # -- the searchers ----------------------------------------------------------------------
    def _work(self, player: SearchPlayer) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._lock.wait()
                if not self._queue:
                    return
                task = heapq.heappop(self._queue)
                self._running.append(task)
            try:
                self._run(player, task)
            except Exception as e:  # one failed search must not end the engine
                self._emit({"error": f"analysis failed: {type(e).__name__}: {e}", "id": task.query.id,
                            "turnNumber": task.position.turn})
                self._emit(no_result_json(task.query.id, task.position.turn))
            finally:
                with self._lock:
                    self._running.remove(task)

    def _run(self, player: SearchPlayer, task: _Task) -> None:
        query, game, position = task.query, task.game, task.position
        if task.stop.is_set():
            self._emit(no_result_json(query.id, position.turn))
            return
        if game.is_terminal(position.state):
            position = Position(position.turn, reopened(game, position.state), position.history)
        # KaTrain reads scoreLead on every move: the scores are always estimated
        ownership = self.ownership_for(game)
        score = None if self.score_for is None else self.score_for(game)
        visits = query.max_visits or self.default_visits

        def report(analysis: Analysis) -> None:
            self._emit(self._result(query, game, position, analysis, ownership, score, player, during=True))

        final = player.search(game, position.state, position.history, max_visits=visits, seconds=query.max_time,
                              stop=task.stop, on_snapshot=report if query.report_every else None,
                              interval=query.report_every, rules=move_rules(query, game.num_actions),
                              root_policy_power=1.0 / (1.0 + 4.0 * query.wide_root_noise))
        self._emit(self._result(query, game, position, final, ownership, score, player, during=False))

    def _result(self, query: Query, game: GoGame, position: Position, analysis: Analysis,
                ownership: Ownership, score: Score | None, player: SearchPlayer, *,
                during: bool) -> dict[str, Any]:
        mover = game.to_play(position.state)
        sign = 1.0 if mover == 0 else -1.0
        state, history = position.state, position.history
        root_owned = ownership(state, history)
        children: dict[int, np.ndarray] = {}
        after: dict[int, np.ndarray] = {}

        def child_of(action: int) -> np.ndarray:
            if action not in children:
                child = state.copy()
                game.play(child, action)
                children[action] = child
            return children[action]

        def owned_after(action: int) -> np.ndarray | None:
            if action not in after:
                after[action] = ownership(child_of(action), [*history, state])
            return after[action]

        def lead(at: np.ndarray, before: Sequence[np.ndarray], owned: Callable[[], np.ndarray | None]) -> Lead | None:
            # the score head's (Black's view) where the model has one, else the area count
            if score is not None:
                belief = score(at, before)
                return Lead(sign * belief.mean, belief.stdev)
            counted = owned()
            return None if counted is None else Lead(sign * (float(counted.sum()) - game.komi))

        def score_after(action: int) -> Lead | None:
            return lead(child_of(action), [*history, state], lambda: owned_after(action))

        root_score = lead(state, history, lambda: root_owned)
        return result_json(
            query, position, game, analysis, during=during, score_of=score_after, root_score=root_score,
            ownership=root_owned if query.include_ownership else None,
            moves_ownership=owned_after if query.include_moves_ownership else None,
            policy=self._policy(player, game, position) if query.include_policy and not during else None)

    @staticmethod
    def _policy(player: SearchPlayer, game: GoGame, position: Position) -> np.ndarray:
        legal = game.legal_mask(position.state)
        if player.evaluate is not None:
            planes = game.encode(position.state, position.history)[None].astype(np.uint8)
            prior = np.asarray(player.evaluate(planes)[0][0], dtype=np.float64)
            prior = np.where(legal, prior, 0.0)
        else:
            prior = legal.astype(np.float64)
        total = prior.sum()
        prior = prior / total if total > 0 else prior
        return np.where(legal, prior, -1.0)

    def _emit(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, separators=(",", ":"))
        with self._write_lock:
            self._write(line)

