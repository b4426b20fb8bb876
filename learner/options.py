"""``LearnerOptions``: how the learner trains, one typed value made by the run config
(``TengenConfig.learner_options()``), so that its defaults are the schema's alone and
both wirings pass the same thing."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LearnerOptions"]


@dataclass(frozen=True)
class LearnerOptions:
    batch_size: int
    optimizer: str  # "sgd" or "adam"
    #: a rate, or a schedule [[step, rate], ...] starting at step 0
    learning_rate: float | list[list[float]]
    momentum: float
    #: positions kept (the replay window's capacity)
    replay_window: int
    #: positions in the window before the first step
    min_positions: int
    #: training samples per position read, at most (the learner waits for data past it)
    max_reuse: float
    #: learner steps between published candidates
    candidate_every: int
    #: the ownership loss's weight (a network with the ownership head only)
    ownership_weight: float
    #: the opponent-policy loss's weight (a network with that head only)
    opponent_policy_weight: float
    #: the score loss's weight (a network with the score head only)
    score_weight: float
    #: the search's root value Q's share of a position's value target; the game's
    #: result z has the rest (``value_target``)
    value_q_weight: float
