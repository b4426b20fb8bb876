"""The search's settings as one value, and the one place they become the compiled
walk's parameters: a float64 array read through the named slots below. An array, not a
NamedTuple of scalars, because the walk is called once per round and numba
dispatches a call with the array in about a third of the time (1.2 us against 4,
measured).

``SearchSettings`` is what every search of tengen is given whole: self-play's, the
gatekeeper's players, ``tengen match``'s, GTP's and the play page's. The run config
makes it once (``TengenConfig.search_settings()``) from the ``mcts`` section, whose
defaults are this class's; a caller that searches differently (a visit limit of its
own, a rollout search) changes a field with ``dataclasses.replace``, and no layer
takes its fields as loose keywords.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

__all__ = [
    "SearchSettings",
    "PUCT",
    "UCT",
    "LEAVES_PER_ROUND",
    "FORMULA",
    "KEEP_LEAF_STATES",
    "C_PUCT",
    "FPU_REDUCTION",
    "VIRTUAL_LOSS",
    "SEARCH",
    "SEARCH_PUCT",
    "SEARCH_GUMBEL",
    "GUMBEL_CONSIDERED",
    "GUMBEL_C_VISIT",
    "GUMBEL_C_SCALE",
    "AVOID_OWN_EYES",
    "DISCOUNT",
    "SOLVER",
    "VALUE_SPREAD",
    "NUM_SETTINGS",
]

PUCT, UCT = 0, 1  # selection formulas: AlphaZero's, or plain UCT for rollout MCTS
_FORMULAS = {"puct": PUCT, "uct": UCT}
SEARCH_PUCT, SEARCH_GUMBEL = 0, 1  # the search: AlphaZero's, or Gumbel AlphaZero's (engine/mcts/gumbel.py)
_SEARCHES = {"puct": SEARCH_PUCT, "gumbel": SEARCH_GUMBEL}

# The slots of SearchSettings.to_array().
(LEAVES_PER_ROUND, FORMULA, KEEP_LEAF_STATES, C_PUCT, FPU_REDUCTION, VIRTUAL_LOSS, SEARCH, GUMBEL_CONSIDERED,
 GUMBEL_C_VISIT, GUMBEL_C_SCALE, AVOID_OWN_EYES, DISCOUNT, SOLVER, VALUE_SPREAD, NUM_SETTINGS) = range(15)


@dataclass(frozen=True)
class SearchSettings:
    """How a search is made (AlphaZero's and KataGo's defaults).

    ``simulations`` is the visits a root gets (the visit limit of a search, and what
    its tree's arrays are sized for). ``c_puct`` is PUCT's exploration constant (UCT's
    c with ``formula="uct"``); ``fpu_reduction`` makes an unvisited move's Q the node's
    value minus this times the square root of the prior mass already visited there
    (first-play urgency, as Leela Zero and KataGo scale it); each round walks up to
    ``leaves_per_round`` times per game, each walk counting ``virtual_loss`` lost visits
    on its path until its leaf is backed up; ``keep_leaf_states`` keeps the leaves'
    positions (rollout evaluators).

    ``search="gumbel"`` replaces PUCT by Gumbel AlphaZero's rules (Danihelka et al.,
    ICLR 2022): sequential halving over at most ``gumbel_considered`` root moves (m),
    and sigma(q) = (``gumbel_c_visit`` + max_b N(b)) * ``gumbel_c_scale`` * q, with
    mctx's defaults (m = 16, c_visit = 50, c_scale = 0.1: q is min-max normalised over
    each node's moves, so the paper's c_scale of 1 made the improved policy nearly one
    move); ``c_puct`` and ``fpu_reduction`` are then unused.

    ``avoid_own_eyes`` (Go) plays by the eye-avoiding playout's rule, at the root and
    below: no move fills the mover's own eye, and a pass is listed only where no
    other legal move is left (go_kernels.own_eye_rule_into); a rule for training's
    games, not for play against people and engines.

    ``discount`` (MuZero's, per ply): a value backed up one ply is multiplied by it,
    so a win k plies away is worth ``discount ** k`` and the search prefers the
    fastest win and the slowest loss; at 1 (AlphaZero) every win is alike. Self-play
    discounts its value targets the same way (engine/selfplay.py), so that the
    network's values are what the search backs up.

    ``solver`` (PUCT only) proves positions inside the tree, as MCTS-Solver (Winands,
    Bjornsson and Saito, 2008) and Leela Chess Zero's certainty propagation do: a node
    is won when one of its moves reaches a lost node, lost (or drawn) when all its
    moves are expanded and proven, with the plies to the end under the proof. A walk
    stops at a proven node and backs up its exact value; a proven root ends the
    search early, and ``Search.move_visits`` plays the proof: the win it proved (the
    first it found: the proof ends the search, so a faster win may go unseen), the
    draw, or the slowest loss. Without it a search that has seen a forced win in 3
    calls it +1 like any other good move and plays whichever has more visits.

    ``lcb_z`` above 0 plays by lower confidence bound, as Leela Zero and KataGo do
    (``Search.best_move``): of the root moves with at least ``lcb_min_visit_share`` of
    the most visited move's visits, the one whose value less ``lcb_z`` standard errors
    is highest; a less visited move whose value is surely better beats the most
    visited. 0 plays the most visited move. A choice of play's, read by
    ``Search.best_move``, not by the compiled walk: self-play's moves follow the visits.

    ``value_spread`` keeps each node's sum of squared backed-up values
    (``Tree.node_w2``), the spread ``Search.root_lcb`` needs; ``lcb_z`` above 0 turns
    it on, and so does the searching player of GTP, analysis and the play page
    (``SearchPlayer``), which reports every move's bound. Self-play leaves it off
    (``for_selfplay``), as do gating and matches without ``lcb_z``: the write on every
    ply of every backup cost Connect Four's search 5% of its speed (bench/mcts.py
    against 90ef343, 2026-12-06: 0.90 with it, 0.95 without).

    ``score_utility`` above 0 (Go, a network with the score head) mixes KataGo's static
    score utility into every evaluated leaf's value as it returns to the search
    (``Search.apply`` with the leaves' scores, ``value_with_score``): the value backed up
    is (1 - w) * winloss + w * (2 / pi) * atan(scoreMean / side), the board's side as the
    scale (KataGo: the square root of the board's area), so that between two equal wins
    the search prefers the bigger. The values the tree then holds stay in [-1, 1], and a
    won game (+1) stays above every position searched.
    Only searches whose evaluator answers a score use it (``ScoredEvaluator``):
    ``Search.run`` and the searching player of GTP and the play page.
    """

    simulations: int = 200
    c_puct: float = 1.25
    fpu_reduction: float = 0.25
    leaves_per_round: int = 8
    virtual_loss: float = 1.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    formula: Literal["puct", "uct"] = "puct"
    keep_leaf_states: bool = False
    search: Literal["puct", "gumbel"] = "puct"
    gumbel_considered: int = 16
    gumbel_c_visit: float = 50.0
    gumbel_c_scale: float = 0.1
    avoid_own_eyes: bool = False
    discount: float = 1.0
    solver: bool = False
    lcb_z: float = 0.0
    lcb_min_visit_share: float = 0.15
    value_spread: bool = False
    score_utility: float = 0.0

    #: the settings that are for training's games, and why play (GTP, the play page,
    #: ``tengen match``, the benches' model players) leaves them out: ``for_play()``
    TRAINING_ONLY: ClassVar[dict[str, str]] = {
        "dirichlet_alpha": "root noise explores self-play's games; a player wants its best move",
        "dirichlet_fraction": "root noise explores self-play's games; a player wants its best move",
        "avoid_own_eyes": "the eye rule holds where both sides keep it (self-play, gating); against an "
                          "engine that passes once it deems the game over, it filled its own area until "
                          "its groups died (GNU Go won W+88.5 in most of 20 games)",
    }
    #: the settings a search sets for itself, not the config: pure MCTS over rollouts
    #: (``RolloutMctsPlayer``, a search without a network) walks by UCT and keeps its
    #: leaves' positions for the rollouts
    FOR_ROLLOUTS: ClassVar[tuple[str, ...]] = ("formula", "keep_leaf_states")

    def __post_init__(self) -> None:
        if self.simulations < 1:
            raise ValueError(f"simulations must be at least 1, got {self.simulations}")
        if self.dirichlet_alpha <= 0 or not 0.0 <= self.dirichlet_fraction <= 1.0:
            raise ValueError(f"dirichlet_alpha must be > 0 and dirichlet_fraction in [0, 1], got "
                             f"{self.dirichlet_alpha} and {self.dirichlet_fraction}")
        if self.leaves_per_round < 1:
            raise ValueError(f"leaves_per_round must be at least 1, got {self.leaves_per_round}")
        if self.formula not in _FORMULAS:
            raise ValueError(f"formula must be 'puct' or 'uct', not {self.formula!r}")
        if self.search not in _SEARCHES:
            raise ValueError(f"search must be 'puct' or 'gumbel', not {self.search!r}")
        if self.search == "gumbel" and self.formula != "puct":
            raise ValueError("search='gumbel' has its own selection rule: leave formula at 'puct'")
        if self.gumbel_considered < 1:
            raise ValueError(f"gumbel_considered must be at least 1, got {self.gumbel_considered}")
        if self.gumbel_c_visit < 0 or self.gumbel_c_scale <= 0:
            raise ValueError(f"gumbel_c_visit must be >= 0 and gumbel_c_scale > 0, got {self.gumbel_c_visit} "
                             f"and {self.gumbel_c_scale}")
        if self.solver and self.search != "puct":
            raise ValueError("solver needs search='puct': Gumbel search picks its move by sequential halving")
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"discount must be in (0, 1], got {self.discount}")
        if self.lcb_z > 0 and self.search != "puct":
            raise ValueError("lcb_z needs search='puct': Gumbel search picks its move by sequential halving")
        if not 0.0 <= self.score_utility <= 1.0:
            raise ValueError(f"score_utility must be in [0, 1], got {self.score_utility}")
        if self.lcb_z < 0 or not 0.0 <= self.lcb_min_visit_share <= 1.0:
            raise ValueError(f"lcb_z must be >= 0 and lcb_min_visit_share in [0, 1], got {self.lcb_z} and "
                             f"{self.lcb_min_visit_share}")

    def for_play(self) -> SearchSettings:
        """These settings as play uses them: ``TRAINING_ONLY``'s left out (no root
        noise, no eye rule)."""
        return dataclasses.replace(self, dirichlet_fraction=0.0, avoid_own_eyes=False)

    def for_selfplay(self) -> SearchSettings:
        """These settings as self-play's searches use them: without the lower confidence
        bound, a choice of play's (self-play's moves follow the visits), so that the
        walk does not keep the values' spread that only the bound reads."""
        return dataclasses.replace(self, lcb_z=0.0)

    def for_rollouts(self) -> SearchSettings:
        """These settings for pure MCTS over rollouts: UCT (the values are noisy and the
        priors uniform), the leaves' positions kept, nothing a network's proofs need."""
        return dataclasses.replace(self, formula="uct", keep_leaf_states=True, solver=False)

    def to_array(self) -> np.ndarray:
        """``float64[NUM_SETTINGS]``, what the compiled walk reads."""
        out = np.zeros(NUM_SETTINGS, dtype=np.float64)
        out[LEAVES_PER_ROUND] = self.leaves_per_round
        out[FORMULA] = _FORMULAS[self.formula]
        out[KEEP_LEAF_STATES] = bool(self.keep_leaf_states)
        out[C_PUCT] = self.c_puct
        out[FPU_REDUCTION] = self.fpu_reduction
        out[VIRTUAL_LOSS] = self.virtual_loss
        out[SEARCH] = _SEARCHES[self.search]
        out[GUMBEL_CONSIDERED] = self.gumbel_considered
        out[GUMBEL_C_VISIT] = self.gumbel_c_visit
        out[GUMBEL_C_SCALE] = self.gumbel_c_scale
        out[AVOID_OWN_EYES] = bool(self.avoid_own_eyes)
        out[DISCOUNT] = self.discount
        out[SOLVER] = bool(self.solver)
        out[VALUE_SPREAD] = self.keeps_spread
        return out

    @property
    def keeps_spread(self) -> bool:
        """Whether the walk keeps the values' spread (``Tree.node_w2``)."""
        return bool(self.value_spread or self.lcb_z > 0)
