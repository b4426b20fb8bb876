"""``Search``: the Python surface of the batched search, and ``search_bytes``, what it
allocates (counted from the same sizes, without allocating)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from tengen.engine.games import kernels as R
from tengen.engine.games.base import Game
from tengen.engine.mcts.evaluators import Evaluator, no_evaluation, utility_scale, value_with_score
from tengen.engine.mcts.gumbel import gumbel_action, improved_policy_into
from tengen.engine.mcts.settings import GUMBEL_C_SCALE, GUMBEL_C_VISIT, NUM_SETTINGS, SearchSettings
from tengen.engine.mcts.tree import (
    EXPANDED,
    ILLEGAL,
    ROOT,
    captured_capacity,
    clear_game,
    ladder_shape,
    max_nodes,
    new_scratch,
    new_tree,
    reroot_kernel,
)
from tengen.engine.mcts.walk import apply_kernel, gather_kernel_go, gather_kernel_mnk

__all__ = ["MoveRule", "Search", "scored_evaluation", "search_bytes"]


def scored_evaluation(evaluate: Evaluator | None, settings: SearchSettings) -> Any:
    """The evaluator's ``with_score`` where ``settings.score_utility`` asks for the score
    utility (None where it does not); a ``ValueError`` where the evaluator has none (a
    network without the score head, or an evaluation path that returns policy and
    value only)."""
    if settings.score_utility <= 0:
        return None
    scored = getattr(evaluate, "with_score", None)
    if scored is None:
        raise ValueError("score_utility needs an evaluator that answers scores (a network with the score head, "
                         "called in this process): set mcts.score_utility to 0 or load a model with the head")
    return scored


class MoveRule(NamedTuple):
    """Moves that ``player`` may not search in the first ``until_depth`` plies of a
    search (1: the root's own moves only), as KataGo's ``avoidMoves`` and
    ``allowMoves`` say them."""

    player: int
    forbidden: np.ndarray  # bool[A]
    until_depth: int


class Search:
    """PUCT (or Gumbel AlphaZero) search trees for G games of one game type.

    ``gather(targets)`` returns the planes of this round's leaves (``uint8[B, H, W, C]``,
    a view valid until the next call); ``apply(policy, value)`` takes their evaluation.
    ``run(evaluate, simulations)`` loops the two until every game's root has been
    visited ``simulations`` times (default: ``settings.simulations``, which also
    sizes the trees). How it searches is ``settings``, one ``SearchSettings``.

    With ``search="gumbel"`` (engine/mcts/gumbel.py) a search of ``simulations``
    evaluates the root once and spends the other ``simulations - 1`` below it by
    sequential halving, so that both searches cost the same evaluations;
    ``sample_gumbel`` draws a game's root noise for the next search (none: the
    deterministic search of evaluation), ``gumbel_action`` is the move to play and
    ``improved_policy`` the policy target. Each move starts a fresh tree (``advance``
    keeps no subtree): the halving schedule counts the search's own simulations.
    """

    def __init__(self, game: Game, *, games: int, settings: SearchSettings):
        if games < 1:
            raise ValueError(f"games must be at least 1, got {games}")
        self.settings = settings
        self.gumbel = settings.search == "gumbel"
        self._settings = settings.to_array()  # what the kernels read
        self.game = game
        self.games = games
        self.simulations = simulations = settings.simulations
        leaves_per_round, keep_leaf_states = settings.leaves_per_round, settings.keep_leaf_states
        height, width = game.board_shape
        self.max_nodes = max_nodes(simulations, leaves_per_round)  # search_bytes counts from the same
        self._initial = game.initial_state()
        self.tree = new_tree(games, self.max_nodes, game.num_actions, self._initial, game.history_length - 1,
                             height * width)
        self._scratch = new_scratch(game, self.max_nodes)
        batch = games * leaves_per_round
        self._planes = np.zeros((batch, *game.planes_shape), dtype=np.uint8)
        self._planes_flat = self._planes.reshape(batch, -1)  # what the kernel writes
        self._states = np.zeros((batch if keep_leaf_states else 1, self._initial.shape[0]), dtype=np.int32)
        self.keep_leaf_states = keep_leaf_states
        self._leaf_game = np.zeros(batch, dtype=np.int32)
        self._leaf_node = np.zeros(batch, dtype=np.int32)
        self._pending = 0
        self._counts = np.zeros(2, dtype=np.int64)
        #: walks of the last gather that ended on a terminal node (no evaluation needed)
        self.terminal_backups = 0
        self._active = np.ones(games, dtype=np.bool_)
        self._default_targets = np.full(games, simulations, dtype=np.float32)
        self._gather_kernel = gather_kernel_go if game.kernel_kind == R.GO else gather_kernel_mnk
        self._rules: dict[int, tuple[MoveRule, ...]] = {}

    # -- positions --------------------------------------------------------------------
    def reset(self, g: int, state: np.ndarray | None = None, history: Sequence[np.ndarray] = ()) -> None:
        """Start game g's tree afresh at ``state`` (default: the initial position);
        ``history`` holds earlier states, oldest first, for the input planes. Move
        rules (``restrict``) end here."""
        t = self.tree
        self._rules.pop(g, None)
        t.root_forced_k[g] = 0.0
        clear_game(t, g, int(t.num_nodes[g]))
        t.root_state[g] = self._initial if state is None else state
        t.root_history[g] = 0
        for i, past in enumerate(list(history)[::-1][: t.root_history.shape[1]]):
            t.root_history[g, i] = self.game.board(past).reshape(-1)

    def root_state(self, g: int) -> np.ndarray:
        return self.tree.root_state[g]

    def force_playouts(self, g: int, k: float) -> None:
        """KataGo's forced playouts at game g's root, from its next walk until changed
        or ``reset``: a visited root move with fewer than sqrt(k * P * N) visits is
        walked next (KataGo's k is 2; 0 turns them off). PUCT only; the policy target
        of such a search is ``pruned_visits``."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if k > 0 and (self.gumbel or self.settings.formula != "puct"):
            raise RuntimeError("forced playouts are PUCT's (Gumbel search has its own exploration)")
        self.tree.root_forced_k[g] = k

    def pruned_visits(self, g: int) -> np.ndarray:
        """Game g's root visits (``move_visits``) less the forced playouts that its
        moves did not earn (KataGo's policy target pruning, ``float32[A]``): each move
        but the most visited gives back up to sqrt(k * P * N) visits, as many as leave
        its PUCT value Q + c * P * sqrt(N) / (1 + n) no higher than the most visited
        move's; a move left with one visit or none is dropped. Without forced playouts
        (k = 0) the visits as they are."""
        visits = self.move_visits(g)
        k = float(self.tree.root_forced_k[g])
        if k <= 0 or visits.max() <= 0:
            return visits
        t = self.tree
        prior = np.maximum(t.prior[g, ROOT].astype(np.float64), 0.0)
        q = self.root_q(g).astype(np.float64)
        total = float(visits.sum())
        scale = self.settings.c_puct * math.sqrt(total)
        best = int(np.argmax(visits))
        best_puct = q[best] + scale * prior[best] / (1.0 + visits[best])
        out = visits.astype(np.float64)
        for a in np.flatnonzero((visits > 0) & (np.arange(len(visits)) != best)):
            forced = math.sqrt(k * prior[a] * total)
            gap = best_puct - q[a]
            # the fewest visits at which its PUCT value is still at most the best's
            fewest = scale * prior[a] / gap - 1.0 if gap > 0 else float(visits[a])
            out[a] = max(float(visits[a]) - forced, math.ceil(fewest), 0.0)
            out[a] = min(out[a], float(visits[a]))
            if out[a] <= 1:
                out[a] = 0.0
        return out.astype(np.float32)

    def restrict(self, g: int, rules: Sequence[MoveRule]) -> None:
        """Keep game g's search off the moves that ``rules`` forbid, from its next
        expanded node until ``reset``. Call it before the search begins: nodes expanded
        already keep their moves. A node where the rules would forbid every legal move
        keeps them all (a search needs a move)."""
        if self.tree.num_nodes[g] > 1 or self.tree.status[g, ROOT] == EXPANDED:
            raise RuntimeError(f"game {g}'s search has begun: restrict it before")
        for rule in rules:
            if rule.forbidden.shape != (self.game.num_actions,) or rule.until_depth < 1:
                raise ValueError(f"a rule needs forbidden as bool[{self.game.num_actions}] and until_depth >= 1")
        if rules:
            self._rules[g] = tuple(rules)
        else:
            self._rules.pop(g, None)

    def advance(self, g: int, action: int) -> None:
        """Play ``action`` in game g and keep its subtree for the next search."""
        if self._rules.get(g):
            raise RuntimeError(f"game {g} has move rules counted from its root: reset it instead")
        if self.tree.in_flight[g]:
            raise RuntimeError(f"game {g} still has leaves in flight")
        if not self.game.legal_mask(self.tree.root_state[g])[action]:
            raise ValueError(f"{self.game.action_to_text(action)} is not legal in game {g}")
        reroot_kernel(self.game.kernel_kind, self.game.params, self.tree, self._scratch, g, int(action))
        if self.gumbel:
            clear_game(self.tree, g, int(self.tree.num_nodes[g]))

    # -- search -------------------------------------------------------------------------
    def gather(self, targets: np.ndarray | int | None = None, active: np.ndarray | None = None) -> np.ndarray:
        """Planes of this round's leaves, ``uint8[B, H, W, C]``. B is 0 when every active
        game reached its target, or when every walk of the round ended on a terminal
        node (``terminal_backups`` > 0: gather again)."""
        if self._pending:
            raise RuntimeError("apply() the previous batch first")
        if targets is None:
            goal = self._default_targets
        else:
            goal = np.broadcast_to(np.asarray(targets, dtype=np.float32), (self.games,)).copy()
        act = self._active if active is None else np.asarray(active, dtype=np.bool_)
        self._gather_kernel(self.game.params, self.tree, self._scratch, goal, act, self._settings,
                            self._planes_flat, self._leaf_game, self._leaf_node, self._states, self._counts)
        self._pending = n = int(self._counts[0])
        self.terminal_backups = int(self._counts[1])
        return self._planes[:n]

    def leaf_states(self) -> np.ndarray:
        """The positions of the gathered leaves, ``int32[B, S]`` (for rollout evaluators;
        needs ``keep_leaf_states=True``)."""
        if not self.keep_leaf_states:
            raise RuntimeError("create the Search with keep_leaf_states=True")
        return self._states[: self._pending]

    def apply(self, policy: np.ndarray, value: np.ndarray, score: np.ndarray | None = None) -> None:
        """Take the gathered leaves' evaluation: ``policy[B, A]``, ``value[B]`` and, from an
        evaluator with a score head, ``score[B]`` (the mover's expected final score in
        points), which with ``settings.score_utility`` > 0 mixes the score utility into the
        value backed up (``value_with_score``, the board's side as its scale)."""
        n = self._pending
        policy = np.asarray(policy, dtype=np.float32)
        value = np.asarray(value, dtype=np.float32).reshape(-1)
        if policy.shape != (n, self.game.num_actions) or value.shape != (n,):
            raise ValueError(f"expected policy [{n}, {self.game.num_actions}] and value [{n}], "
                             f"got {policy.shape} and {value.shape}")
        if score is not None and self.settings.score_utility > 0:
            score = np.asarray(score, dtype=np.float32).reshape(-1)
            if score.shape != (n,):
                raise ValueError(f"expected score [{n}], got {score.shape}")
            side = utility_scale(*self.game.board_shape)
            value = value_with_score(value, score, weight=self.settings.score_utility, scale=side)
        if self._rules:
            self._forbid_at_leaves(n)
        apply_kernel(self.tree, self._settings, self._leaf_game, self._leaf_node, n, policy, value)
        self._pending = 0

    def _forbid_at_leaves(self, n: int) -> None:
        # The gathered leaves list their legal moves at prior 1 until apply_kernel
        # spreads the policy over them: a move marked ILLEGAL here is never searched.
        t = self.tree
        for b in range(n):
            g, node = int(self._leaf_game[b]), int(self._leaf_node[b])
            rules = self._rules.get(g)
            if not rules:
                continue
            depth, up = 0, node
            while up != ROOT:
                up = int(t.parent[g, up])
                depth += 1
            mover = int(t.root_state[g, R.TO_PLAY]) ^ (depth & 1)
            listed = t.prior[g, node] != ILLEGAL
            keep = listed.copy()
            for rule in rules:
                if rule.player == mover and depth < rule.until_depth:
                    keep &= ~rule.forbidden
            if keep.any() and not np.array_equal(keep, listed):
                t.prior[g, node, listed & ~keep] = ILLEGAL

    def run(self, evaluate: Evaluator, simulations: np.ndarray | int | None = None,
            active: np.ndarray | None = None) -> int:
        """Search until every active game's root has ``simulations`` visits; returns the
        number of evaluator calls (a round whose walks all ended on terminal nodes
        needs none). With ``settings.score_utility`` > 0 the evaluator must answer scores
        too (``ScoredEvaluator``), and the leaves' values get the score utility."""
        calls = 0
        scored = scored_evaluation(evaluate, self.settings)
        while True:
            planes = self.gather(simulations, active)
            if len(planes) == 0:
                if self.terminal_backups:
                    self.apply(*no_evaluation(self.game))
                    continue
                return calls
            if scored is not None:
                self.apply(*scored(planes))
            else:
                policy, value = evaluate(planes)
                self.apply(policy, value)
            calls += 1

    # -- results ------------------------------------------------------------------------
    def root_visits(self, g: int) -> np.ndarray:
        """N(root, a) for every action, ``float32[A]``."""
        return self.tree.edge_n[g, ROOT].copy()

    def move_visits(self, g: int) -> np.ndarray:
        """The visits that the move choice and the policy target read, ``float32[A]``:
        N(root, a), unless the solver (``solver=True``) has proven something. A proven
        root puts all its visits on the proof's move: the fastest win proven, the
        slowest loss, or a draw; otherwise the moves proven lost get none (while another is left)."""
        visits = self.root_visits(g)
        if not self.settings.solver or not self.root_expanded(g):
            return visits
        t = self.tree
        children = t.children[g, ROOT]
        moves = np.flatnonzero(t.prior[g, ROOT] != ILLEGAL)
        proven = [int(a) for a in moves if children[a] >= 0 and t.proven[g, children[a]]]
        if t.proven[g, ROOT]:
            # the move whose proof gave the root its own (walk._propagate_proof chose it)
            best = next(a for a in proven if t.terminal_value[g, children[a]] == -t.terminal_value[g, ROOT]
                        and t.proof_plies[g, children[a]] + 1 == t.proof_plies[g, ROOT])
            out = np.zeros_like(visits)
            out[best] = max(float(visits.sum()), 1.0)
            return out
        lost = [a for a in proven if t.terminal_value[g, children[a]] > 0]  # won by the opponent
        if lost and len(lost) < len(moves):
            visits[lost] = 0.0
            if visits.sum() == 0:  # the moves left are unvisited: the likeliest by the prior
                open_moves = [int(a) for a in moves if a not in lost]
                visits[max(open_moves, key=lambda a: t.prior[g, ROOT, a])] = 1.0
        return visits

    def root_lcb(self, g: int, z: float | None = None) -> np.ndarray:
        """Each root move's lower confidence bound on its value, ``float64[A]``: Q less
        ``z`` (default ``settings.lcb_z``) standard errors (-inf for unvisited moves).
        The spread is the one of the values backed up through the move, shrunk towards
        the largest a value in [-1, 1] can have (1) as if by 2 visits, so that a move
        seen a few times with alike values is not taken as certain."""
        if not self.settings.keeps_spread:
            raise ValueError("root_lcb needs the values' spread: search with value_spread=True (or lcb_z > 0)")
        t = self.tree
        z = self.settings.lcb_z if z is None else z
        n = t.edge_n[g, ROOT].astype(np.float64)
        q = np.where(n > 0, t.edge_w[g, ROOT] / np.maximum(n, 1), 0.0)
        out = np.full(n.shape, -np.inf)
        for a in np.flatnonzero(n >= 1):
            child = int(t.children[g, ROOT, a])
            m = float(t.node_n[g, child]) if child >= 0 else 0.0
            var = 0.0
            if m > 0:
                mean = float(t.node_w[g, child]) / m
                var = max(float(t.node_w2[g, child]) / m - mean * mean, 0.0) * self.settings.discount ** 2
            var = (var * n[a] + 2.0) / (n[a] + 2.0)
            out[a] = q[a] - z * math.sqrt(var / n[a])
        return out

    def best_move(self, g: int) -> int:
        """The move to play after game g's search, without sampling: the most visited
        (``move_visits``: the solver's proof first), or with ``settings.lcb_z`` > 0 the
        highest ``root_lcb`` among the moves with at least ``lcb_min_visit_share`` of
        the most visited one's visits. Ties go to the lowest action."""
        visits = self.move_visits(g)
        best = int(np.argmax(visits))
        if self.settings.lcb_z <= 0 or (self.settings.solver and self.root_proven(g)):
            return best
        lcb = self.root_lcb(g)
        eligible = (visits >= self.settings.lcb_min_visit_share * visits[best]) & (visits > 0)
        lcb = np.where(eligible, lcb, -np.inf)
        return int(np.argmax(lcb)) if np.isfinite(lcb.max()) else best

    def root_proven(self, g: int) -> bool:
        """Whether the solver has proven game g's root (its exact value: ``root_value``)."""
        return bool(self.tree.proven[g, ROOT])

    def root_value(self, g: int) -> float:
        """Mean value of the root for its player to move."""
        n = self.tree.node_n[g, ROOT]
        return float(self.tree.node_w[g, ROOT] / n) if n > 0 else 0.0

    def root_q(self, g: int) -> np.ndarray:
        """Q(root, a) (0 where unvisited), ``float32[A]``."""
        n = self.tree.edge_n[g, ROOT]
        return np.where(n > 0, self.tree.edge_w[g, ROOT] / np.maximum(n, 1), 0.0).astype(np.float32)

    def root_prior(self, g: int) -> np.ndarray:
        return np.maximum(self.tree.prior[g, ROOT], 0.0)

    def root_expanded(self, g: int) -> bool:
        return bool(self.tree.status[g, ROOT] == EXPANDED)

    def sample_gumbel(self, g: int, rng: np.random.Generator) -> None:
        """Draw g(a) ~ Gumbel(0, 1) for game g's next search (Gumbel search only; the
        noise lasts until the game's next ``advance`` or ``reset``)."""
        if not self.gumbel:
            raise RuntimeError("sample_gumbel needs search='gumbel'")
        if self.tree.considered[g]:
            raise RuntimeError(f"game {g}'s search has begun: draw its noise before")
        self.tree.gumbel[g] = rng.gumbel(size=self.game.num_actions)

    def gumbel_action(self, g: int) -> int:
        """The move Gumbel search plays: among the most visited root moves (the last
        survivors of sequential halving), the highest g + logits + sigma(completed Q)."""
        self._check_gumbel_root(g)
        return int(gumbel_action(self.tree, g, self._settings[GUMBEL_C_VISIT], self._settings[GUMBEL_C_SCALE],
                                 self._scratch.weights))

    def improved_policy(self, g: int) -> np.ndarray:
        """softmax(logits + sigma(completed Q)) over the legal root moves,
        ``float32[A]``: Gumbel search's policy target."""
        self._check_gumbel_root(g)
        out = np.zeros(self.game.num_actions, dtype=np.float32)
        improved_policy_into(self.tree, g, self._settings[GUMBEL_C_VISIT], self._settings[GUMBEL_C_SCALE], out)
        return out

    def _check_gumbel_root(self, g: int) -> None:
        if not self.gumbel:
            raise RuntimeError("needs search='gumbel' (PUCT's results are the visit counts)")
        if not self.root_expanded(g) or self.tree.in_flight[g]:
            raise RuntimeError(f"game {g} has no finished search")

    def sharpen_root_prior(self, g: int, power: float) -> None:
        """Raise game g's root priors to ``power`` and renormalise them over the legal
        moves: below 1 it flattens them (KataGo's wideRootNoise), above 1 it sharpens.
        Call it once the root is expanded and before its children are searched."""
        if not self.root_expanded(g):
            raise RuntimeError(f"game {g}'s root is not expanded yet")
        if power <= 0:
            raise ValueError(f"power must be positive, got {power}")
        prior = self.tree.prior[g, ROOT]
        legal = prior != ILLEGAL
        raised = np.power(np.maximum(prior[legal], 0.0).astype(np.float64), power)
        total = raised.sum()
        if total > 0:
            prior[legal] = (raised / total).astype(np.float32)

    def add_root_noise(self, g: int, rng: np.random.Generator, *, alpha: float, fraction: float) -> None:
        """Mix Dirichlet(alpha) noise into the root's priors over its legal moves
        (AlphaZero: P = (1 - fraction) P + fraction * eta)."""
        if self.gumbel:
            raise RuntimeError("Gumbel search explores by its own noise (sample_gumbel), not Dirichlet's")
        prior = self.tree.prior[g, ROOT]
        legal = prior != ILLEGAL
        if not legal.any() or fraction <= 0:
            return
        eta = rng.dirichlet(np.full(int(legal.sum()), alpha))
        prior[legal] = (1.0 - fraction) * prior[legal] + fraction * eta


def search_bytes(game: Game, *, games: int, settings: SearchSettings) -> int:
    """The bytes ``Search(game, games=games, settings=settings)`` preallocates, counted
    without allocating anything, so that a config can be refused before a worker runs
    out of memory. The sizes are Python integers throughout: an absurd config gives a
    huge number, never an overflow.

    The tree's four ``[G, M, A]`` arrays dominate, 16 bytes per edge with M = 2 *
    simulations + 2 * leaves_per_round + 2: 64 games of 19x19 Go at 800 simulations
    take 64 * 1618 * 362 * 16 bytes = 0.56 GiB.
    """
    simulations, leaves_per_round = settings.simulations, settings.leaves_per_round
    keep_leaf_states = settings.keep_leaf_states
    g, m, a = games, max_nodes(simulations, leaves_per_round), game.num_actions
    height, width = game.board_shape
    cells = height * width
    state = game.initial_state()
    s = state.shape[0]
    t = game.history_length
    batch = games * leaves_per_round
    # One row per array the constructor makes, in its order: (shape, dtype).
    arrays: list[tuple[tuple[int, ...], DTypeLike]] = [
        # the settings the kernels read
        ((NUM_SETTINGS,), np.float64),
        # the initial state, the tree (new_tree)
        ((s,), state.dtype),
        ((g, m, a), np.int32), ((g, m, a), np.float32), ((g, m, a), np.float32), ((g, m, a), np.float32),
        ((g, m), np.float32), ((g, m), np.float32), ((g, m), np.float32), ((g, m), np.float32), ((g, m), np.int32),
        ((g, m), np.int32), ((g, m), np.int8), ((g, m), np.float32), ((g, m), np.int8), ((g, m), np.int32),
        ((g,), np.int32),
        ((g, s), state.dtype), ((g, max(t - 1, 1), cells), np.int8), ((g,), np.int32),
        ((g, m), np.float32), ((g, a), np.float32), ((g, a), np.int32), ((g,), np.int32), ((g,), np.int32),
        ((g,), np.float32),
        # the scratch of one walk (new_scratch)
        ((s,), state.dtype), ((captured_capacity(cells),), np.int32), ((t, cells), np.int8),
        ((m,), np.int32), ((a,), np.bool_), ((m,), np.int32), ((a,), np.float32), ((a,), np.bool_),
        (((height + 2) * (width + 2),), np.int32), (ladder_shape(game), np.int32),
        # the leaf batch and its bookkeeping
        ((batch, *game.planes_shape), np.uint8), ((batch if keep_leaf_states else 1, s), np.int32),
        ((batch,), np.int32), ((batch,), np.int32), ((2,), np.int64), ((g,), np.bool_), ((g,), np.float32),
    ]
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in arrays)
