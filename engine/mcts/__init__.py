"""Batched PUCT search over many games at once, in preallocated arrays.

Notation (AlphaGo Zero): for an edge (s, a) of the tree, N is its visit count, W
the sum of the values backed up through it, Q = W / N its mean value, P its prior;
the search descends by argmax of Q + U with U = c_puct * P * sqrt(sum_b N(s, b)) /
(1 + N(s, a)). Every value is seen from the point of view of the player to move at
the node the edge leaves, so a backup flips the sign at each ply.

One ``gather`` call walks every game's tree to up to ``leaves_per_round`` new leaves
(virtual loss steers the walks of one round apart), replays each leaf's moves from
the game's root to get its position, and encodes all leaves into one batch of input
planes; terminal leaves are backed up at once with their exact value and need no
evaluation. The caller evaluates the batch however it likes (a local model, an
inference server, a uniform stub) and hands the result to ``apply``, which sets
the new leaves' priors over their candidate moves and backs the values up. Positions
are not stored per node: replaying a short path from the root costs less than
copying states, and keeps a 19x19 tree small.

A new leaf lists its *candidate* moves (``candidate_mask_into``: in Go, every empty
point but the ko point), not its legal ones: a full Go legality test per leaf cost
more than a quarter of the search. A move is checked when a walk first takes it; an
illegal one leaves the node's priors, which are renormalised, so that a node's
priors are always the policy over the legal moves it has tried and the candidates
it has not. The root always lists exactly the legal moves.

Randomness stays outside the compiled code: Dirichlet noise is drawn by the caller's
``np.random.Generator`` and mixed in with ``add_root_noise``; move choice from the
visit counts lives in ``choose_move``.

The parts, one job each:

- ``tree``: the arrays (``Tree``, shapes in comments), sentinels (``ROOT``,
  ``UNEXPANDED``, ``ILLEGAL``), and the compiled edits that keep their invariants
  (edge statistics, priors, re-rooting after a move);
- ``settings``: ``SearchSettings``, the one value every search is made from, and
  the array the kernels read;
- ``walk``: the compiled gather (selection, virtual loss, new leaves) and apply
  (priors, backup);
- ``planes``: a leaf's input planes, written straight into the batch;
- ``search``: ``Search``, the Python surface, and ``search_bytes``;
- ``evaluators``: the ``Evaluator`` contract (and ``ScoredEvaluator``'s, with KataGo's
  ``score_utility``), uniform and random-rollout evaluators;
- ``eval_cache``: ``EvaluationCache``, network answers kept by position,
  ``CachedEvaluator``, one in front of an evaluator, and ``cache_bytes``;
- ``move_choice``: visit counts to a policy target or a move.
"""

from tengen.engine.mcts.eval_cache import CachedEvaluator, EvaluationCache, cache_bytes
from tengen.engine.mcts.evaluators import (
    Evaluator,
    RolloutEvaluator,
    ScoredEvaluator,
    score_utility,
    uniform_evaluator,
    utility_scale,
    value_with_score,
    with_score_utility,
)
from tengen.engine.mcts.move_choice import choose_move, visit_policy
from tengen.engine.mcts.search import MoveRule, Search, search_bytes
from tengen.engine.mcts.settings import SearchSettings

__all__ = [
    "MoveRule",
    "Search",
    "SearchSettings",
    "Evaluator",
    "ScoredEvaluator",
    "score_utility",
    "value_with_score",
    "utility_scale",
    "with_score_utility",
    "uniform_evaluator",
    "RolloutEvaluator",
    "choose_move",
    "visit_policy",
    "search_bytes",
    "CachedEvaluator",
    "EvaluationCache",
    "cache_bytes",
]
