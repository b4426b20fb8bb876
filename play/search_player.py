"""MCTS for a Go engine that people and GUIs talk to: searches stopped by a visit
limit, a wall clock or another thread, with per-move statistics on the way.

``SearchPlayer`` wraps ``engine.mcts.Search`` (unchanged) for one position at a
time. Its ``search`` runs rounds of gather/evaluate/apply until the root has
``max_visits`` visits, the ``seconds`` are spent or ``stop`` is set, and hands
``Analysis`` snapshots to a callback every ``interval`` seconds: per root move its
visits N, winrate (Q seen by the player to move, mapped to [0, 1]), prior P, a
lower confidence bound and the principal variation (most visited children).

The evaluator is a network's ``evaluate(planes) -> (policy, value)``, or None for
pure MCTS: uniform priors and values from one light random playout per leaf
(``engine.mcts.RolloutEvaluator``), which is what analysis without a model shows.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.mcts import Evaluator, MoveRule, RolloutEvaluator, Search, SearchSettings
from tengen.engine.mcts.search import scored_evaluation
from tengen.engine.mcts.tree import ROOT, UNEXPANDED

__all__ = ["MoveStats", "Analysis", "SearchPlayer", "principal_variation", "pv_visits"]

#: z of the lower confidence bound shown where the search does not play by one (about
#: 97.5% one-sided); with ``lcb_z`` the settings' own
LCB_Z = 1.96
#: the longest principal variation reported
PV_LENGTH = 20


@dataclass(frozen=True)
class MoveStats:
    """One root move: N, winrate in [0, 1] for the player to move, P, LCB, PV."""

    action: int
    visits: int
    winrate: float
    prior: float
    lcb: float
    pv: tuple[int, ...]  # starts with ``action``
    pv_visits: tuple[int, ...] = ()  # the visits of each move of ``pv`` (empty: not counted)


@dataclass(frozen=True)
class Analysis:
    """A snapshot of one search: root visits, root value in [-1, 1] for the player to
    move, and the root moves best first (most visits, then highest prior)."""

    visits: int
    value: float
    moves: tuple[MoveStats, ...]
    seconds: float

    @property
    def best(self) -> int | None:
        return self.moves[0].action if self.moves else None


def pv_visits(search: Search, pv: Sequence[int], *, g: int = 0) -> tuple[int, ...]:
    """The visits of each move of ``pv`` (a principal variation from the root)."""
    tree = search.tree
    out, node = [], ROOT
    for a in pv:
        out.append(int(tree.edge_n[g, node, a]))
        node = int(tree.children[g, node, a])
        if node == UNEXPANDED:
            break
    return tuple(out)


def principal_variation(search: Search, action: int, *, g: int = 0, length: int = PV_LENGTH) -> tuple[int, ...]:
    """``action`` followed by the most visited child at each node below it."""
    tree = search.tree
    pv = [int(action)]
    node = int(tree.children[g, ROOT, action])
    while node != UNEXPANDED and len(pv) < length:
        visits = tree.edge_n[g, node]
        if visits.max() <= 0:
            break
        a = int(np.argmax(visits))
        pv.append(a)
        node = int(tree.children[g, node, a])
    return tuple(pv)


class SearchPlayer:
    """Search for one position at a time, with a network or with rollouts.

    ``evaluate``: the network (``Evaluator``), or None for rollout MCTS. Keyword-only:
    ``search``, how it searches (one ``SearchSettings``: PUCT or Gumbel, its constants,
    the discount and the solver, as the network was trained with; a rollout search
    walks by UCT, ``SearchSettings.for_rollouts``); ``simulations``, its default visit
    limit (None: ``search.simulations``; 0 with a network: its raw policy); ``seed``
    (rollouts, and Gumbel's ties); and what the network was trained for (``size``,
    ``history_length``, ``komi``, ``features``: Go's feature planes; None when anything
    goes, as for rollouts).

    A ``SearchPlayer`` is also a move chooser: ``player(game, state, history)``
    returns the most visited move after ``simulations`` visits (with ``solver``, a
    proven best move first; with Gumbel search, sequential halving's survivor).
    """

    def __init__(
        self,
        evaluate: Evaluator | None,
        *,
        search: SearchSettings,
        simulations: int | None = None,
        seed: int = 0,
        size: int | None = None,
        history_length: int | None = None,
        komi: float | None = None,
        features: bool | None = None,
    ):
        simulations = search.simulations if simulations is None else simulations
        if simulations < 0 or (evaluate is None and simulations < 1):
            raise ValueError("simulations must be >= 0 (>= 1 for rollout search)")
        self.evaluate = evaluate
        self.settings = search if evaluate is not None else search.for_rollouts()
        self.simulations = simulations
        self.seed = seed
        self.size = size
        self.history_length = history_length
        self.komi = komi
        self.features = features
        self._searches: dict[tuple[int, int], Search] = {}
        self._rollouts: dict[int, RolloutEvaluator] = {}

    @property
    def uses_model(self) -> bool:
        return self.evaluate is not None

    def why_not(self, game: Game) -> str | None:
        """Why this player cannot play ``game``'s board, or None when it can."""
        if self.size is not None and game.board_shape != (self.size, self.size):
            return f"the model was trained on {self.size}x{self.size} and plays no other size"
        if self.history_length is not None and game.history_length != self.history_length:
            return f"the model reads {self.history_length} positions of history, the game keeps {game.history_length}"
        if self.features is not None and getattr(game, "features", False) != self.features:
            return ("the model reads Go's feature planes (game.features), the game has none" if self.features
                    else "the model reads no feature planes, the game has Go's (game.features)")
        return None

    def __call__(self, game: Game, state: np.ndarray, history: Sequence[np.ndarray] = ()) -> int:
        if game.is_terminal(state):
            raise ValueError("the game is over")
        why = self.why_not(game)
        if why:
            raise ValueError(why)
        best = self.search(game, state, history).best
        if best is None:
            raise ValueError("no legal move")
        return best

    def search(
        self,
        game: Game,
        state: np.ndarray,
        history: Sequence[np.ndarray] = (),
        *,
        max_visits: int | None = None,
        seconds: float | None = None,
        stop: threading.Event | None = None,
        on_snapshot: Callable[[Analysis], None] | None = None,
        interval: float | None = None,
        rules: Sequence[MoveRule] = (),
        root_policy_power: float = 1.0,
    ) -> Analysis:
        """Search ``state`` (not terminal) until the root has ``max_visits`` visits
        (default ``simulations``), ``seconds`` have passed or ``stop`` is set; every
        ``interval`` seconds ``on_snapshot`` gets the statistics so far. Returns the
        final ``Analysis``. With a network and 0 or 1 visits (or no time at all), the
        answer is its raw policy over the legal moves: one visit is the root's own
        evaluation, and it leaves no move visited. Without a network a search makes at
        least 2 visits, for the same reason. ``rules`` keep it off moves
        (``MoveRule``: KataGo's avoidMoves and allowMoves); ``root_policy_power`` below 1
        flattens the root's priors to P ** power (KataGo's wideRootNoise w, as power
        1 / (1 + 4 w), so that the search looks at more moves)."""
        start = time.perf_counter()
        visits = self.simulations if max_visits is None else int(max_visits)
        if self.evaluate is not None and (visits <= 1 or (seconds is not None and seconds <= 0)):
            return self._raw_policy(game, state, history, start, rules)
        visits = max(visits, 2)
        search = self._search_for(game, visits)
        search.reset(0, state, history)
        search.restrict(0, rules)
        rollout = self._rollout_for(game) if self.evaluate is None else None
        # KataGo's score utility, where the settings ask for it: the network's scores too
        scored = scored_evaluation(self.evaluate, self.settings) if self.evaluate is not None else None
        deadline = None if seconds is None else start + seconds
        next_report = None if interval is None or on_snapshot is None else start + interval
        widen = root_policy_power != 1.0
        while True:
            planes = search.gather(visits)
            if len(planes) == 0 and not search.terminal_backups:
                break  # the root has its visits
            if rollout is not None:
                search.apply(*rollout.evaluate_states(search.leaf_states()))
            elif len(planes) and scored is not None:
                search.apply(*scored(planes))
            elif len(planes):
                assert self.evaluate is not None
                policy, value = self.evaluate(planes)
                search.apply(policy, value)
            else:
                search.apply(np.zeros((0, game.num_actions), np.float32), np.zeros(0, np.float32))
            if widen and search.root_expanded(0):
                search.sharpen_root_prior(0, root_policy_power)
                widen = False
            now = time.perf_counter()
            if (stop is not None and stop.is_set()) or (deadline is not None and now >= deadline):
                break
            if next_report is not None and now >= next_report:
                assert on_snapshot is not None and interval is not None
                on_snapshot(self._snapshot(game, search, now - start))
                next_report = now + interval
        return self._snapshot(game, search, time.perf_counter() - start)

    # -- helpers ---------------------------------------------------------------------------
    def _search_for(self, game: Game, visits: int) -> Search:
        # A tree's size follows its visit limit; keep one per limit and game (sizes of
        # a GTP session rarely change).
        key = (id(game), visits)
        search = self._searches.get(key)
        if search is None or search.game is not game:
            self._searches = {k: s for k, s in self._searches.items() if s.game is game}
            search = Search(game, games=1, settings=dataclasses.replace(self.settings, simulations=visits,
                                                                             value_spread=True))
            self._searches[key] = search
        return search

    def _rollout_for(self, game: Game) -> RolloutEvaluator:
        rollout = self._rollouts.get(id(game))
        if rollout is None or rollout.game is not game:
            rollout = RolloutEvaluator(game, rollouts=1, seed=self.seed)
            self._rollouts = {id(game): rollout}
        return rollout

    def _raw_policy(self, game: Game, state: np.ndarray, history: Sequence[np.ndarray], start: float,
                    rules: Sequence[MoveRule]) -> Analysis:
        assert self.evaluate is not None
        policy, value = self.evaluate(game.encode(state, history)[None].astype(np.uint8))
        legal = game.legal_mask(state)
        allowed = legal.copy()
        for rule in rules:
            if rule.player == game.to_play(state):
                allowed &= ~rule.forbidden
        if allowed.any():  # as a search does, a position keeps its moves if the rules leave none
            legal = allowed
        prior = np.where(legal, policy[0], 0.0)
        total = float(prior.sum())
        if total > 0:
            prior = prior / total
        order = sorted(np.flatnonzero(legal), key=lambda a: -prior[a])
        v = float(value[0])
        moves = tuple(MoveStats(int(a), 0, (v + 1) / 2, float(prior[a]), 0.0, (int(a),)) for a in order)
        return Analysis(visits=0, value=v, moves=moves, seconds=time.perf_counter() - start)

    def _snapshot(self, game: Game, search: Search, seconds: float) -> Analysis:
        n = search.root_visits(0)
        chosen = search.move_visits(0)  # n, unless the solver proved the best move
        q = search.root_q(0)
        prior = search.root_prior(0)
        visited = [int(a) for a in np.flatnonzero(n > 0)]
        visited.sort(key=lambda a: (-chosen[a], -n[a], -prior[a], a))
        if self.settings.lcb_z > 0 and visited and not search.tree.in_flight[0]:
            best = search.best_move(0)  # by lower confidence bound (Leela Zero's, KataGo's)
            visited.sort(key=lambda a: a != best)
        if search.gumbel and visited and not search.tree.in_flight[0]:
            # Gumbel search plays the survivor of its halving with the best completed Q,
            # which a tie in visits does not tell
            best = search.gumbel_action(0)
            visited.sort(key=lambda a: a != best)
        bounds = search.root_lcb(0, self.settings.lcb_z or LCB_Z)
        moves = []
        for a in visited:
            winrate = float(np.clip((q[a] + 1) / 2, 0.0, 1.0))
            lcb = float(np.clip((bounds[a] + 1) / 2, 0.0, 1.0)) if np.isfinite(bounds[a]) else 0.0
            pv = principal_variation(search, a)
            moves.append(MoveStats(a, int(n[a]), winrate, float(prior[a]), lcb, pv, pv_visits(search, pv)))
        return Analysis(visits=int(search.tree.node_n[0, ROOT]), value=search.root_value(0), moves=tuple(moves),
                        seconds=seconds)
