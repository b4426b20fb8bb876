"""The one run-config schema: frozen, validated, loaded once from ``configs/*.yaml``.

An unknown key or a bad value stops the run at start with a message that names the
field (``ConfigError``). Library code never reads this module's objects directly:
the drivers pass the values on as the typed options the library takes
(``NetworkSpec``, ``SelfPlaySettings``, ``LearnerOptions``, ``GatingOptions``), made
here, so that every default lives in this schema alone.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tengen.engine.backend import Backend
from tengen.engine.games import Game, GoGame, make_game
from tengen.engine.gating import MAX_ELO, GatingRule
from tengen.engine.mcts import SearchSettings, cache_bytes, search_bytes
from tengen.engine.network_spec import NetworkSpec
from tengen.engine.selfplay import SelfPlaySettings
from tengen.learner.options import LearnerOptions
from tengen.learner.storage import check_storage_url
from tengen.play.match import GatingOptions
from tengen.play.players import MctsPlayerSettings
from tengen.workers.strength import StrengthOptions

__all__ = [
    "ConfigError",
    "GameConfig",
    "NetworkConfig",
    "MctsConfig",
    "SelfPlayConfig",
    "TrainConfig",
    "GatingConfig",
    "StopConfig",
    "RayConfig",
    "RedisConfig",
    "ClusterConfig",
    "RunConfig",
    "EvaluationConfig",
    "TengenConfig",
    "config_path",
    "load_config",
    "packaged_configs",
    "parse_config",
    "stream_maxlen",
]


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    # No float in a run config means anything as NaN or infinity: this refuses YAML's
    # .nan/.inf, JSON's NaN/Infinity and strings such as "1e400" for every float field.
    # Each field's docstring is its description: the one home of what a key means,
    # for `tengen config show`, `tengen config schema` and docs/config.md.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True)


#: the board size GoGame plays when a config names none
_GO_DEFAULT_SIZE: int = inspect.signature(GoGame).parameters["size"].default


class GameConfig(_Strict):
    """Which game and its rules. Go: ``size`` 5..19, ``komi``, ``superko``,
    ``max_moves`` (default 2 * size * size), ``history_length`` (T, default 8).
    Gomoku: ``size``. Tic-tac-toe and Connect Four take no options."""

    name: Literal["tictactoe", "connect4", "gomoku", "go"]
    """the game: tictactoe, connect4, gomoku or go"""
    size: int | None = Field(default=None, ge=5, le=19)
    """the board's size (Go 5..19, default 19; Gomoku, default 15); none for tic-tac-toe and Connect Four"""
    komi: float | None = None
    """Go: the points white gets for moving second, a multiple of 0.5 (default 7.5)"""
    superko: bool | None = None
    """Go: positional superko (no whole-board position may repeat) instead of simple ko"""
    max_moves: int | None = Field(default=None, ge=1)
    """Go: the game ends, scored, after this many moves (default 2 x size x size)"""
    history_length: int | None = Field(default=None, ge=1, le=16)
    """Go: the past positions the network sees, as AlphaGo Zero's T (default 8)"""
    features: bool | None = None
    """Go: KataGo's input features beside the stones, from the rules' own groups (engine/games/go_features.py):
    each colour's groups with 1, 2, 3 and 4 or more liberties, the ko point, the legal moves, the stones in atari
    that die in a ladder, the moves that catch a group in a ladder, and the mover's komi as a thermometer (20
    planes). A network trained with them reads them, so a checkpoint's config keeps the setting (default off)"""

    @field_validator("komi")
    @classmethod
    def _komi_fits_the_board(cls, komi: float | None, info: ValidationInfo) -> float | None:
        if komi is None or info.data.get("name") != "go" or "size" not in info.data:
            return komi  # komi outside Go, or a bad size, is reported on its own
        if not (komi * 2).is_integer():
            raise ValueError(f"komi must be a multiple of 0.5, not {komi}")
        # An area score lies within +-(points on the board), so a komi beyond that
        # decides every game before the first move (KataGo, stricter, allows 150 on 19x19).
        points = (info.data["size"] or _GO_DEFAULT_SIZE) ** 2
        if abs(komi) > points:
            raise ValueError(f"komi must be within +-{points} (the points on the board), not {komi}")
        return komi

    @field_validator("max_moves")
    @classmethod
    def _max_moves_fits_the_board(cls, max_moves: int | None, info: ValidationInfo) -> int | None:
        if max_moves is None or info.data.get("name") != "go" or "size" not in info.data:
            return max_moves
        # The default is 2 x points; 10 x is far past any real game, and a superko state
        # carries a hash per move, so a huge cap would be a huge state in every tree.
        points = (info.data["size"] or _GO_DEFAULT_SIZE) ** 2
        if max_moves > 10 * points:
            raise ValueError(f"max_moves must be at most {10 * points} (10 x the points on the board), "
                             f"not {max_moves}")
        return max_moves

    @model_validator(mode="after")
    def _options_fit_the_game(self) -> GameConfig:
        go_only = ("komi", "superko", "max_moves", "history_length", "features")
        if self.name != "go":
            for option in go_only:
                if getattr(self, option) is not None:
                    raise ValueError(f"'{option}' applies to go only, not {self.name}")
        if self.name in ("tictactoe", "connect4") and self.size is not None:
            raise ValueError(f"'size' does not apply to {self.name}")
        return self

    def make(self) -> Game:
        rules = {k: v for k, v in self.model_dump(exclude={"name"}).items() if v is not None}
        return make_game(self.name, **rules)


class NetworkConfig(_Strict):
    """The dual residual tower (engine/network.py)."""

    blocks: int = Field(default=5, ge=1, le=40)
    """residual blocks in the tower"""
    filters: int = Field(default=64, ge=4, le=512)
    """convolution filters (channels) in every block"""
    value_hidden: int = Field(default=64, ge=1, le=4096)
    """units of the value head's hidden layer (AlphaZero 256; thousands would be all of the network)"""
    l2: float = Field(default=1e-4, ge=0, lt=1)
    """the weight of the L2 penalty on the weights (AlphaZero: 1e-4; 1 or more outweighs both losses)"""
    global_pooling_every: int = Field(default=0, ge=0, le=40)
    """every this many residual blocks, one gets KataGo's global pooling bias (channel means and maxima of the
    whole board, fed back as biases), so that a small net sees the whole board; 0: none (KataGo's 6-block nets
    pool in 2 blocks: 3)"""
    backend: Backend | None = None
    """the Keras 3 backend that runs the network: tensorflow, jax or torch (the last two are the extras
    tengen-zero[jax] and tengen-zero[torch]); unset: KERAS_BACKEND, else tensorflow. Weights load on any backend; a
    learner's checkpoint resumes on the backend that wrote it (tengen checkpoint-convert moves it)"""
    ownership: bool = False
    """KataGo's ownership head, trained on each finished game's final Tromp-Taylor owners (Go only). Off by
    default: the config.yaml of a run made before the head existed says nothing about it, and it must still
    mean a network without one, so that its checkpoints resume and load; the Go configs turn it on."""
    opponent_policy: bool = False
    """a second policy head that predicts the opponent's reply, trained on the next position's search policy
    (``train.opponent_policy_weight``) and never read by the search: KataGo's auxiliary target, a regulariser
    that sped its early learning (Wu 2019, "Auxiliary Policy Targets"), for any game here (on in the Go
    configs); like ownership, a checkpoint's weights say whether its network has the head"""
    score: bool = False
    """KataGo's score head (Go only): the final score difference from the mover's view as a mean and a spread
    (scoreMean, scoreStdev), trained on the positions of games played to the end (``train.score_weight``);
    analysis reports its scoreLead (on in the Go configs); like ownership, a checkpoint's weights
    say whether its network has the head"""


#: the library's defaults, which the schema's are: one place each
_SEARCH = SearchSettings()
_SELFPLAY = SelfPlaySettings()


class MctsConfig(_Strict):
    """The search (engine/mcts/): PUCT with AlphaZero's noise and KataGo-like FPU, or
    Gumbel AlphaZero's (``search: gumbel``: no Dirichlet noise, no FPU, no c_puct)."""

    search: Literal["puct", "gumbel"] = _SEARCH.search
    """puct: AlphaZero; gumbel: Danihelka et al. 2022, built for few simulations"""
    # simulations and leaves_per_round size the search's arrays: TengenConfig checks
    # that they fit in memory.
    simulations: int = Field(default=_SEARCH.simulations, ge=1)
    """the search budget: simulations (visits added at the root) per move"""
    c_puct: float = Field(default=_SEARCH.c_puct, gt=0, le=100)
    """PUCT's exploration constant (AlphaZero 1.25, UCT's 2.0; at 100 the priors alone pick every move)"""
    fpu_reduction: float = Field(default=_SEARCH.fpu_reduction, ge=0, le=2)
    """an unvisited move's Q: the node's value minus this times sqrt(the prior mass visited); values lie in
    -1..1, so 2 can already value it as a loss (-1)"""
    leaves_per_round: int = Field(default=_SEARCH.leaves_per_round, ge=1)
    """leaves gathered (with virtual loss) before one batched network call"""
    virtual_loss: float = Field(default=_SEARCH.virtual_loss, ge=0, le=10)
    """the visits a leaf on its way to the network counts as lost, so a round's leaves spread out (KataGo 1,
    Leela Zero 3); it is added to and taken back from float32 counts, where a huge one
    would wipe out the real visits"""
    dirichlet_alpha: float = Field(default=_SEARCH.dirichlet_alpha, gt=0, le=100)
    """alpha of the Dirichlet noise on the root's prior in self-play (AlphaZero 0.03 for Go to 0.3 for chess; past
    100 the noise is uniform anyway)"""
    dirichlet_fraction: float = Field(default=_SEARCH.dirichlet_fraction, ge=0, le=1)
    """the share of the root's prior that AlphaZero's Dirichlet noise replaces in self-play (0.25)"""
    gumbel_considered: int = Field(default=_SEARCH.gumbel_considered, ge=1, le=4096)
    """m, the root moves sequential halving starts from (the paper's 16; fewer legal moves: all of them)"""
    gumbel_c_visit: float = Field(default=_SEARCH.gumbel_c_visit, ge=0, le=100_000)
    """Gumbel AlphaZero's c_visit: sigma(q) = (c_visit + max_b N(b)) * c_scale * q, q min-max normalised to [0, 1]
    over the node's moves (mctx's 50 and 0.1: at the paper's c_scale of 1, which it used with another
    normalisation, the policy target was nearly one-hot on the best Q of a 32-simulation search); with c_scale 100
    the values alone pick every move"""
    gumbel_c_scale: float = Field(default=_SEARCH.gumbel_c_scale, gt=0, le=100)
    """Gumbel AlphaZero's c_scale in sigma(q) (see gumbel_c_visit)"""
    avoid_own_eyes: bool = _SEARCH.avoid_own_eyes
    """Go: the eye-avoiding playout's rule (never fill one's own eye; pass only when no other legal move is left)
    in training's games (self-play and gating, where both sides keep it), not in tengen match, the benches,
    GTP or the play page. Under area scoring it costs nothing, games end with their dead stones captured, and
    a young network's early passes and filled eyes cannot become habits. It breaks sekis (a player must fill a
    shared liberty), rare on 9x9."""
    discount: float = Field(default=_SEARCH.discount, gt=0, le=1)
    """per ply, MuZero's: the search backs a value up this much smaller each ply and self-play's value targets
    are discounted alike, so that of two wins the faster is worth more, and of two losses the slower (1:
    AlphaZero, every win alike). Resignation compares the discounted root value with its threshold, and the
    values that GTP's analysis and the play page show are discounted too."""
    solver: bool = _SEARCH.solver
    """prove wins, losses and draws inside the search tree (MCTS-Solver, PUCT only; engine/mcts/settings.py): a
    proven root ends its search early, and the move played (self-play's policy target too) is the proof's, a
    forced win or the slowest loss, where visits alone may take a move that only looks as good"""
    lcb_z: float = Field(default=_SEARCH.lcb_z, ge=0, le=20)
    """where a model plays (gating, tengen match, GTP, the play page; PUCT only), its move is the one with the
    highest lower confidence bound, its value less this many standard errors, among the moves with at least
    lcb_min_visit_share of the most visited one's visits, as Leela Zero and KataGo play (KataGo: 5); 0 plays the
    most visited move. Self-play's moves follow the visits either way."""
    lcb_min_visit_share: float = Field(default=_SEARCH.lcb_min_visit_share, ge=0, le=1)
    """the visits, as a share of the most visited move's, that a move needs to be chosen by its lower confidence
    bound (KataGo's minVisitPropForLCB, 0.15)"""
    score_utility: float = Field(default=_SEARCH.score_utility, ge=0, le=1)
    """each leaf's value as the search backs it up mixes in KataGo's static score utility: (1 - this) * value +
    this * (2/pi) atan(scoreMean / the board's side), so that of two equal wins it prefers the bigger and a won
    game stays worth the most (KataGo's static factor: 0.1): in self-play (the inference servers mix it into the
    values they answer) and where a model plays (GTP, the play page, tengen bestmove and match). Needs
    network.score (Go). 0: win and loss alone. Gating and tengen analysis search without it"""

    @model_validator(mode="after")
    def _solver_needs_puct(self) -> MctsConfig:
        if self.solver and self.search != "puct":
            raise ValueError("solver needs search: puct (Gumbel search picks its move by sequential halving)")
        if self.lcb_z > 0 and self.search != "puct":
            raise ValueError("lcb_z needs search: puct (Gumbel search picks its move by sequential halving)")
        return self


class SelfPlayConfig(_Strict):
    """How self-play games are played and recorded (engine/selfplay.py)."""

    games_in_flight: int = Field(default=64, ge=1)
    """games each self-play worker plays at once: their leaves share its batched network calls"""
    temperature_schedule: Literal["alphazero", "constant"] = _SELFPLAY.temperature_schedule
    """alphazero: moves sampled from the visits for temperature_moves moves, then the most visited; constant: always
    sampled at temperature"""
    temperature_moves: int = Field(default=_SELFPLAY.temperature_moves, ge=0)
    """with the alphazero schedule, the opening moves sampled from the visits (AlphaZero 30)"""
    temperature: float = Field(default=_SELFPLAY.temperature, ge=0.1, le=10)
    """the sampling temperature: moves are sampled from N^(1 / temperature) in float64: at 0.01, N^100 overflows from
    1210 visits on, at 0.1 never; above 10 the choice is uniform anyway"""
    full_search_fraction: float = Field(default=_SELFPLAY.full_search_fraction, gt=0, le=1)
    """KataGo's playout cap randomisation: the share of moves searched with mcts.simulations (only those become
    policy targets); the rest use cheap_simulations. 1: every move"""
    cheap_simulations: int = Field(default=_SELFPLAY.cheap_simulations, ge=0)
    """the simulations of a cheap search (full_search_fraction < 1)"""
    resign_threshold: float | None = Field(default=_SELFPLAY.resign_threshold, ge=-1, le=1)
    """a self-play game is resigned when the root value stays below this (-1..1); none: never"""
    no_resign_fraction: float = Field(default=_SELFPLAY.no_resign_fraction, ge=0, le=1)
    """the share of games played out to the end anyway, to check that resigning loses no won game (AlphaGo Zero's
    10%)"""
    resign_max_false_positives: float = Field(default=_SELFPLAY.resign_max_false_positives, ge=0, le=1)
    """AlphaGo Zero's check: resigning stays off while more of the played-out games that would have been resigned
    than this were not lost (1: resign unchecked)"""
    fork_fraction: float = Field(default=_SELFPLAY.fork_fraction, ge=0, lt=1)
    """KataGo's forked games: this share of new games branches off a recent game with one random move
    (engine/selfplay.py); 0 starts every game from the empty board"""
    cache_positions: int = Field(default=2**18, ge=0)
    """Leela Zero's and KataGo's NN cache: the network answers a self-play worker keeps by position
    (engine/mcts/eval_cache.py), so that a leaf met again needs no model call; 0 keeps none. 2^18 is 15 MB for
    Connect Four, 390 MB for 19x19 Go."""

    forced_playouts_k: float = Field(default=_SELFPLAY.forced_playouts_k, ge=0, le=100)
    """KataGo's forced playouts and policy target pruning (PUCT only): in a full search, a root move that has been
    visited gets at least sqrt(k * P * N) visits, so that a move the noise made likely shows what it is worth, and
    the visits it did not earn are pruned from the policy target (KataGo: 2; 0 turns both off)"""

    @model_validator(mode="after")
    def _cheap_searches_need_simulations(self) -> SelfPlayConfig:
        if self.full_search_fraction < 1 and self.cheap_simulations < 1:
            raise ValueError("cheap_simulations must be at least 1 when full_search_fraction < 1")
        return self


#: a learning rate: AlphaZero's largest is 0.2, so 10 is a typo or a divergence
_Rate = Annotated[float, Field(gt=0, le=10)]
_Schedule = list[tuple[Annotated[int, Field(ge=0)], _Rate]]


def _rate_or_schedule(value: object) -> str:
    # Validate a list as a schedule and anything else as one rate, so that an error
    # names the form it was read as rather than listing both.
    return "schedule" if isinstance(value, (list, tuple)) else "rate"


class TrainConfig(_Strict):
    """The learner: replay window, sample reuse, optimiser, candidates."""

    batch_size: int = Field(default=256, ge=1)
    """positions per training step"""
    optimizer: Literal["sgd", "adam"] = "sgd"
    """sgd (with momentum, AlphaZero's) or adam"""
    learning_rate: Annotated[
        Annotated[_Rate, Tag("rate")] | Annotated[_Schedule, Tag("schedule")], Discriminator(_rate_or_schedule)
    ] = 0.02
    """a constant, or ``[[step, rate], ...]`` from step 0 on (AlphaGo Zero: 1e-2, 1e-3, 1e-4)"""
    momentum: float = Field(default=0.9, ge=0, lt=1)
    """SGD's momentum"""
    replay_window: int = Field(default=100_000, ge=1)
    """the newest positions the learner samples from (and the Redis stream holds)"""
    min_positions: int = Field(default=2_000, ge=1)
    """positions the window must hold before the first training step"""
    max_reuse: float = Field(default=4.0, gt=0)
    """at most this many samples drawn per position added: the learner waits for self-play beyond it"""
    candidate_every: int = Field(default=1_000, ge=1)
    """training steps between two candidates published for gating"""
    ownership_weight: float = Field(default=1.0, ge=0, le=10)
    """the ownership loss's weight, on the mean per-point squared error (of positions with a target). 1 puts it
    on the value loss's scale (both are squared errors of tanh outputs against +-1 targets); KataGo's 1.5 / (H
    * W) on a per-point sum of cross-entropies is about 1.5 on such a mean. Above 10 it drowns the policy."""
    opponent_policy_weight: float = Field(default=0.15, ge=0, le=10)
    """the opponent-policy loss's weight, on its cross-entropy against the next position's policy target (of
    positions that have one: not a game's last, nor one whose reply had a cheap search). KataGo's 0.15: an aid
    to the policy, kept small beside the policy's own weight of 1. With network.opponent_policy only"""
    score_weight: float = Field(default=0.02, ge=0, le=10)
    """the score loss's weight, on the Gaussian negative log likelihood of the final score (in points) under the
    score head's mean and spread (of games played to the end). KataGo's 0.02 for its score belief, whose
    cross-entropy over whole scores this likelihood is in two numbers: an aid that must not steer the trunk
    from winning to counting. With network.score only"""
    value_q_weight: float = Field(default=0.0, ge=0, le=1)
    """the value head's target is (1 - w) * z + w * q: z the game's result for the mover (discounted as
    ``mcts.discount`` says), q the root value of the full search made there. 0 is AlphaZero's z alone. z is
    the truth but noisy (one blunder late in a game flips every target before it); q is what the search saw
    and has no such noise, but inherits the network's bias; averaging the two trained a Connect Four AlphaZero
    to fewer errors on solved positions (Oracle's "Lessons from AlphaZero", part 4)."""

    @model_validator(mode="after")
    def _schedule_starts_at_zero(self) -> TrainConfig:
        if isinstance(self.learning_rate, list):
            steps = [s for s, _ in self.learning_rate]
            if not steps or steps[0] != 0 or steps != sorted(set(steps)):
                raise ValueError("learning_rate schedule must start at step 0 with increasing steps")
        if self.min_positions > self.replay_window:
            # the learner waits for min_positions in its window, which never holds that many
            raise ValueError(f"min_positions={self.min_positions} is more than "
                             f"replay_window={self.replay_window}: training would never start")
        return self


class GatingConfig(_Strict):
    """Candidate against best (engine/gating.py): SPRT, a fixed threshold, or none."""

    rule: Literal["sprt", "threshold", "none"] = "sprt"
    """sprt: Wald's sequential test; threshold: a fixed number of games and a score to beat; none: every candidate is
    promoted"""
    elo0: float = Field(default=0.0, ge=-MAX_ELO, le=MAX_ELO)
    """SPRT: the Elo gain of the null hypothesis H0 (0: no better than the best), within the +-MAX_ELO that
    engine/gating.py reports (a 99.99% score): no test is needed to tell such players apart, and far past it 10 **
    (elo / 400) overflows"""
    elo1: float = Field(default=35.0, ge=-MAX_ELO, le=MAX_ELO)
    """SPRT: the Elo gain the test looks for (H1), against elo0 (H0)"""
    alpha: float = Field(default=0.05, gt=0, lt=0.5)
    """SPRT: the chance of promoting a candidate no better than elo0"""
    beta: float = Field(default=0.05, gt=0, lt=0.5)
    """SPRT: the chance of rejecting a candidate elo1 better"""
    max_games: int = Field(default=400, ge=1)
    """SPRT: the most games of a match; undecided there, at_cap decides"""
    at_cap: Literal["reject", "llr", "score"] = "llr"
    """an SPRT at max_games undecided: promote on the LLR's sign (``llr``), on a score above cap_threshold
    (``score``), or keep the best (``reject``); engine/gating.py"""
    cap_threshold: float = Field(default=0.55, gt=0, lt=1)
    """SPRT with at_cap score: the score a candidate must beat at max_games"""
    threshold: float = Field(default=0.55, gt=0, lt=1)
    """rule threshold: the score (a draw counts half) the candidate must beat"""
    games: int = Field(default=400, ge=1)
    """rule threshold: the games of a match"""
    simulations: int | None = Field(default=None, ge=1)
    """simulations per move in gating matches (default: mcts.simulations)"""
    games_in_flight: int = Field(default=32, ge=1)
    """match games played at once (their leaves share network calls)"""
    temperature_moves: int = Field(default=4, ge=0)
    """opening moves sampled from the visits, so that match games differ"""
    cache_positions: int = Field(default=2**16, ge=0)
    """network answers each side of a match keeps by position (engine/mcts/eval_cache.py), as self-play's
    cache_positions; 0 keeps none. 2^16 is 3.9 MB a side for Connect Four."""

    @model_validator(mode="after")
    def _sprt_hypotheses_in_order(self) -> GatingConfig:
        # as engine.gating.GatingRule checks, but at start rather than at the first match
        if self.rule == "sprt" and not self.elo0 < self.elo1:
            raise ValueError(f"SPRT needs elo0 < elo1, got elo0={self.elo0}, elo1={self.elo1}")
        return self


class EvaluationConfig(_Strict):
    """Strength against fixed references (workers/strength.py): the best model, each time it changes, measured
    against what does not move while it trains (tic-tac-toe: perfect play; Connect Four: solver-labelled positions
    and pure MCTS; Go: pure MCTS and GNU Go), in a process of its own at low priority; the results go to
    evaluations.jsonl with their standard errors. At these defaults one Connect Four evaluation (256 positions, 40
    games against MCTS-400) took 5-6 s of CPU on one core (2026-12-06, configs/connect4.yaml's untrained net)."""

    enabled: bool = True
    """measure the best model against the references while the run trains"""
    min_interval_s: float = Field(default=300.0, ge=0, le=7 * 86_400)
    """the least seconds from one evaluation's start to the next: when it has passed and the best changed, the
    newest best is measured (the versions promoted between are not: no backlog)"""
    positions: int = Field(default=256, ge=1, le=100_000)
    """positions the model's moves are graded on: a fixed sample of tic-tac-toe's reachable positions or of
    Connect Four's 1,012 labelled ones (the same at every evaluation)"""
    games: int = Field(default=40, ge=1, le=10_000)
    """games against each opponent, colours alternated (the standard error of a score is about 0.5 / sqrt(games))"""
    mcts_simulations: int = Field(default=400, ge=1, le=1_000_000)
    """simulations per move of the pure MCTS opponent (random-rollout leaves), Connect Four, Go and gomoku"""
    gnugo_level: int = Field(default=1, ge=0, le=10)
    """GNU Go's level (Go), when gnugo is on the PATH of the evaluator's machine or in /usr/games (Debian's
    package); without it the reference is recorded as skipped"""
    simulations: int | None = Field(default=None, ge=1)
    """the model's simulations per move (default: gating.simulations, else mcts.simulations)"""
    nice: int = Field(default=19, ge=0, le=19)
    """the evaluator's nice value: at 19 it runs on what the main job leaves of the cores, so on a machine the main
    job keeps busy its evaluations come late; a lower value lets them through (the CPU share still bounds them)"""
    cpu_share: float = Field(default=0.5, gt=0, le=64)
    """the cores the evaluator may use on average (its process runs at nice 19 and sleeps off what it used past
    this share); on a Ray cluster its actor asks for no CPU (as the gatekeeper's: a worker's or the learner's
    place is never taken by it), so this share is what bounds it. The share spreads an evaluation's CPU out; what an
    evaluation costs in all is set by evaluation.min_interval_s. Measured with the evaluator busy all the time
    (bench/evaluator_cost.py, min_interval_s 0, 2 cores, one pair of runs each, about ±10% apart by chance):
    single-process Connect Four 1.04x the positions/min with it off (2026-12-06); the main job, Connect Four
    1.10x (6 minutes, 4 evaluations) and go9 0.83x (8 minutes, one evaluation against MCTS-400 and GNU Go of
    274 s, 92 s of CPU: 0.34 of a core, under 0.5) (2026-12-08)"""
    deadline_s: float = Field(default=3600.0, gt=0, le=7 * 86_400)
    """an evaluation not back within this (plus cluster.hang_grace_s) is taken for a hung evaluator, which is
    replaced"""


class StopConfig(_Strict):
    """The run stops at the first limit reached (none: until interrupted)."""

    minutes: float | None = Field(default=None, gt=0)
    """stop after this many minutes (none: no time limit; --minutes sets it)"""
    steps: int | None = Field(default=None, ge=1)
    """stop at this learner step (counted over the whole run)"""
    promotions: int | None = Field(default=None, ge=1)
    """stop after this many promotions"""


class RayConfig(_Strict):
    """Where the actors run: a Ray address (``auto``, ``ray://HOST:PORT``) or, when
    absent, a local Ray started for the run."""

    address: str | None = None
    """a Ray address (auto, ray://HOST:PORT); none: a local Ray started for the run (--address sets it)"""
    metrics_export_port: int | None = Field(default=None, ge=1024, le=65535)
    """the local Ray's metrics port, so that a Prometheus config can name it (deploy/monitoring uses 8080);
    default: a free port Ray picks. On a cluster, ``ray start --metrics-export-port`` sets each node's
    instead."""

    @model_validator(mode="after")
    def _metrics_port_is_local(self) -> RayConfig:
        if self.address and self.metrics_export_port is not None:
            raise ValueError("metrics_export_port applies to a local Ray only; on a cluster pass "
                             "--metrics-export-port to `ray start`")
        return self


class RedisConfig(_Strict):
    """The sample stream and model registry: a Redis URL (password from the
    ``TENGEN_REDIS_PASSWORD`` environment variable, never in the URL) or, when absent,
    an embedded Redis server started for the run."""

    url: str | None = None
    """the run's Redis, redis://HOST:PORT/DB (the password from TENGEN_REDIS_PASSWORD); none: an embedded server
    (--redis sets it)"""
    outage_s: float = Field(default=900.0, gt=0, le=86_400)
    """how long every client of the run waits through an outage (a restart, an AOF replay, a full server) before
    the run stops with a message. 15 minutes: the slowest way back of the Redis on deploy/kubernetes is its
    pod moved off a lost node with its ReadWriteOnce volume, ~8 min measured on EKS with EBS (kubernetes-
    sigs/aws-ebs-csi-driver#861) and 11.5 min before the detach even starts by Kubernetes' own timers (5 min
    40 s to evict the pod, 6 min to force the detach: kubernetes/kubernetes#28671), then the attach and the
    AOF replay. Waiting costs little (workers keep their games, the learner pauses); stopping ends a run of
    days. README.md, "Runs of days"."""
    maxmemory_mb: int | None = Field(default=None, ge=16)
    """the embedded server's ``maxmemory`` (writes are refused past it, never evicted); default: a quarter of
    this machine's memory, at least 256 MiB"""
    keep_candidates: int = Field(default=3, ge=1)
    """candidates whose weights stay in the registry besides the best (older ones are deleted; every promoted
    model is also kept in the run directory)"""

    @model_validator(mode="after")
    def _no_password_in_url(self) -> RedisConfig:
        if self.url and "@" in self.url.split("//", 1)[-1]:
            raise ValueError("put the Redis password in TENGEN_REDIS_PASSWORD, not in the URL")
        return self


class ClusterConfig(_Strict):
    """How many actors and how they batch (the distributed run)."""

    workers: int | None = Field(default=None, ge=1)
    """self-play workers (1 CPU each); default: the CPUs left after the others"""
    workers_per_gpu: int = Field(default=14, ge=1)
    """self-play workers started per GPU node (KataGo-style: many CPU workers feed one GPU)"""
    games_per_worker: int = Field(default=64, ge=2)
    """games each worker plays at once (two halves of this)"""
    max_batch: int = Field(default=1024, ge=1)
    """the most positions an inference server evaluates in one network call"""
    batch_timeout_ms: float = Field(default=5.0, gt=0, le=1000)
    """how long an inference server waits to fill a batch before it evaluates what it has (a second's wait costs
    more than any batch saves)"""
    cpu_server_model_calls: int = Field(default=2, ge=1, le=64)
    """batches the CPU inference server evaluates at once, the cores split among them (on 2 cores two calls of
    one thread each evaluate ~1.5x the rows of one call on both); a GPU server runs one at a time"""
    worker_chunk_seconds: float = Field(default=2.0, gt=0, le=3600)
    """seconds a worker plays between two check-ins with the driver; at most an hour, since a stop or a new model
    waits for the check-in"""
    worker_buffer_games: int = Field(default=1000, ge=1)
    """finished games a worker holds while Redis is away (then it waits for Redis)"""
    crash_loop_failures: int = Field(default=5, ge=1)
    """an actor that fails this many times in a row, each within ``crash_loop_s`` of the one before, stops the
    run (a config that cannot work) instead of restarting"""
    crash_loop_s: float = Field(default=300.0, gt=0, le=86_400)
    """a part that fails again within this many seconds of its last failure counts toward a crash loop, which stops
    the run"""
    start_timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    """seconds a part (a self-play worker, an inference server, the learner) may wait for Ray to place it before
    the run reports it (the status and the log: Ray's state, what it asks for, what the nodes have free) and
    starts it again, placed anew, once per this many seconds (cluster/placement.py); an autoscaler adds nodes
    for what waits meanwhile"""
    hang_grace_s: float = Field(default=120.0, gt=0, le=86_400)
    """a call the driver waits for (a learner step, a worker's chunk, a gating match) not back within its own
    length, plus the outages its part may sit out, plus this, is taken for a hung part: it is stopped and
    replaced (cluster/deadlines.py)"""
    match_deadline_s: float = Field(default=3600.0, gt=0, le=7 * 86_400)
    """the first gating match's length for its deadline; later ones: 3x the longest so far, and at least this"""
    evaluation_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """how long a worker waits for one leaf evaluation before it calls its server lost"""


class RunConfig(_Strict):
    """What the run directory keeps besides models and status (run/run_dir.py)."""

    keep_game_every: int = Field(default=50, ge=0)
    """keep every K-th finished self-play game of each worker (by its number there) in games/, as its codec entry
    and as SGF or a plain line; 0 keeps none"""
    keep_games_max: int = Field(default=200, ge=1)
    """the most self-play games kept there (the oldest go first)"""
    keep_gating_matches: int = Field(default=10, ge=0)
    """the newest gating matches whose games games/gating/ keeps, each game as SGF or a plain line; 0 keeps none"""
    status_history_mb: float = Field(default=32.0, gt=0, le=100_000)
    """status.jsonl's bound: past it the older half is thinned to every other line, so a run of days keeps its
    whole history (at 5 s a line, 64 workers: ~50 MB a day unbound)"""
    log_mb: float = Field(default=32.0, gt=0, le=100_000)
    """log.txt is rotated past this (log.1.txt the newest old one), keeping ``log_files``"""
    log_files: int = Field(default=5, ge=1, le=1000)
    """rotated log files kept besides log.txt"""
    keep_models: int = Field(default=100, ge=1)
    """models/ keeps the newest ``keep_models`` promoted models whole, and of the older ones every
    ``keep_model_every``-th version's (0: none; ladder.json keeps them all)"""
    keep_model_every: int = Field(default=10, ge=0)
    """besides the best, every this-many-th promoted model is kept in models/ (0: the best only)"""


class TengenConfig(_Strict):
    game: GameConfig
    network: NetworkConfig = NetworkConfig()
    mcts: MctsConfig = MctsConfig()
    selfplay: SelfPlayConfig = SelfPlayConfig()
    train: TrainConfig = TrainConfig()
    gating: GatingConfig = GatingConfig()
    stop: StopConfig = StopConfig()
    ray: RayConfig = RayConfig()
    redis: RedisConfig = RedisConfig()
    cluster: ClusterConfig = ClusterConfig()
    run: RunConfig = RunConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    storage: str | None = None
    """where checkpoints go: a local path or any fsspec URL (``s3://``, ``gs://``, ``sftp://``;
    learner/storage.py); default: the run directory (on a cluster, the driver keeps them there, whatever node
    the learner runs on)"""
    storage_outage_s: float = Field(default=900.0, gt=0, le=86_400)
    """how long the checkpoint storage, or the run directory's disk (full, failing), may be away before the run
    stops on it: the same budget as Redis's (``redis.outage_s`` says why 900 s); each storage call also has a
    deadline (run/outage.py), since a backend may hang rather than fail"""
    seed: int = Field(default=0, ge=0, lt=2**32)
    """the run's random seed: 32 bits, what every seeder in the stack takes (numba's np.random.seed among them)"""

    @model_validator(mode="after")
    def _cheap_searches_fit_the_full_ones(self) -> TengenConfig:
        sp = self.selfplay
        if sp.full_search_fraction < 1 and sp.cheap_simulations > self.mcts.simulations:
            raise ValueError(f"selfplay.cheap_simulations={sp.cheap_simulations} is more than "
                             f"mcts.simulations={self.mcts.simulations}")
        return self

    @model_validator(mode="after")
    def _forced_playouts_are_puct_s(self) -> TengenConfig:
        if self.selfplay.forced_playouts_k > 0 and self.mcts.search != "puct":
            raise ValueError("selfplay.forced_playouts_k needs mcts.search: puct (Gumbel search explores by its own "
                             "noise)")
        return self

    @model_validator(mode="after")
    def _ownership_is_for_go(self) -> TengenConfig:
        if self.network.ownership and self.game.name != "go":
            raise ValueError(f"network.ownership applies to go only, not {self.game.name}: "
                             "its target is the final position's territory")
        if self.network.score and self.game.name != "go":
            raise ValueError(f"network.score applies to go only, not {self.game.name}: "
                             "its target is the final position's area score")
        if self.mcts.score_utility > 0 and not self.network.score:
            raise ValueError("mcts.score_utility needs network.score: the utility reads the score head's mean")
        return self

    @model_validator(mode="after")
    def _avoid_eyes_are_for_go(self) -> TengenConfig:
        if self.mcts.avoid_own_eyes and self.game.name != "go":
            raise ValueError(f"mcts.avoid_own_eyes applies to go only, not {self.game.name}: "
                             "it has no pass")
        return self

    @model_validator(mode="after")
    def _fits_in_memory(self) -> TengenConfig:
        budget, where = _memory_budget()
        m, sp, g = self.mcts, self.selfplay, self.gating
        game = self.game.make()
        leaves = f"mcts.leaves_per_round={m.leaves_per_round}"
        sims = f"mcts.simulations={m.simulations}"
        gating_sims = f"gating.simulations={g.simulations}" if g.simulations else sims
        cached = f"selfplay.cache_positions={sp.cache_positions}"
        what = {
            "selfplay": f"selfplay.games_in_flight={sp.games_in_flight} x {sims} x {leaves} and {cached}: "
                        f"the {game.name} self-play search and its evaluation cache",
            "worker": f"cluster.games_per_worker={self.cluster.games_per_worker} x {sims} x {leaves} and {cached}: "
                      f"a worker's {game.name} self-play search and its evaluation cache",
            "gating": f"gating.games_in_flight={g.games_in_flight} x {gating_sims} x {leaves} and "
                      f"gating.cache_positions={g.cache_positions}: the two {game.name} gating searches and caches",
            "replay": f"train.replay_window={self.train.replay_window}: the {game.name} replay window",
        }
        too_big = [f"{what[part]} would take {_bytes_text(n)}, more than {where}"
                   for part, n in self.memory_estimates(game).items() if n > budget]
        if too_big:
            raise ValueError("; ".join(too_big) + f" (set {MEMORY_BUDGET_VARIABLE} to another budget)")
        return self

    def memory_estimates(self, game: Game | None = None) -> dict[str, int]:
        """Bytes of the big arrays each part preallocates, counted without allocating:
        ``selfplay`` (the single-process run's search and evaluation cache), ``worker``
        (one self-play worker's two half searches and its cache), ``gating`` (the two
        players' searches and caches), ``replay`` (the learner's window: planes
        uint8[N, H, W, C], policy and value float32, and with the ownership head int8
        owners [N, H*W] and a bool mask, with the opponent-policy head a bool mask of replies,
        with the score head a float32 score and a bool mask,
        as learner/replay.py stores them). Each must
        fit alone: the parts run in different processes, on different nodes in a cluster."""
        game = game or self.game.make()
        search, gating = self.search_settings(), self.gating_options()
        per_worker = self.cluster.games_per_worker
        halves = (per_worker // 2, per_worker - per_worker // 2)  # as workers/selfplay_worker.py splits them
        position = math.prod(game.planes_shape) + 4 * game.num_actions + 4
        if self.network.ownership:
            position += math.prod(game.board_shape) + 1
        if self.network.opponent_policy:
            position += 1  # the replies' mask: the reply itself is the next slot's policy
        if self.network.score:
            position += 4 + 1
        cache = cache_bytes(self.selfplay.cache_positions, game.num_actions)
        return {
            "selfplay": cache + search_bytes(game, games=self.selfplay.games_in_flight, settings=search),
            "worker": cache + sum(search_bytes(game, games=n, settings=search) for n in halves),
            "gating": 2 * (cache_bytes(gating.cache_positions, game.num_actions)
                           + search_bytes(game, games=gating.games_in_flight, settings=gating.player.search)),
            "replay": self.train.replay_window * position,
        }

    @field_validator("storage")
    @classmethod
    def _storage_opens_here(cls, storage: str | None) -> str | None:
        # Here, before any actor starts: otherwise a missing s3fs shows only as the
        # learner actor failing on its node, again and again.
        if storage is not None:
            check_storage_url(storage)
        return storage

    # -- the config as the library's typed options (one mapping for both drivers)
    def network_spec(self) -> NetworkSpec:
        game = self.game.make()
        height, width, channels = game.planes_shape
        return NetworkSpec(input_shape=(height, width, channels), num_actions=game.num_actions,
                           blocks=self.network.blocks, filters=self.network.filters, l2=self.network.l2,
                           value_hidden=self.network.value_hidden, ownership=self.network.ownership,
                           global_pooling_every=self.network.global_pooling_every,
                           opponent_policy=self.network.opponent_policy, score=self.network.score,
                           backend=self.network.backend)

    def search_settings(self) -> SearchSettings:
        """How the run searches (the ``mcts`` section as one value): self-play's search,
        and with ``gating.simulations`` the gatekeeper's."""
        m = self.mcts
        return SearchSettings(simulations=m.simulations, search=m.search, c_puct=m.c_puct,
                              fpu_reduction=m.fpu_reduction, leaves_per_round=m.leaves_per_round,
                              virtual_loss=m.virtual_loss, dirichlet_alpha=m.dirichlet_alpha,
                              dirichlet_fraction=m.dirichlet_fraction, gumbel_considered=m.gumbel_considered,
                              gumbel_c_visit=m.gumbel_c_visit, gumbel_c_scale=m.gumbel_c_scale,
                              avoid_own_eyes=m.avoid_own_eyes, discount=m.discount, solver=m.solver,
                              lcb_z=m.lcb_z, lcb_min_visit_share=m.lcb_min_visit_share)

    def play_search(self) -> SearchSettings:
        """How a trained model of this run searches where it plays people and engines
        (GTP, the play page, ``tengen bestmove``, ``tengen match``): the run's search
        without what is for training's games (``SearchSettings.TRAINING_ONLY``)."""
        return dataclasses.replace(self.search_settings().for_play(), score_utility=self.mcts.score_utility)

    def selfplay_settings(self) -> SelfPlaySettings:
        """What a self-play worker plays by (both wirings give it these)."""
        sp = self.selfplay
        return SelfPlaySettings(
            search=self.search_settings().for_selfplay(), temperature_schedule=sp.temperature_schedule,
            temperature_moves=sp.temperature_moves, temperature=sp.temperature,
            full_search_fraction=sp.full_search_fraction, cheap_simulations=sp.cheap_simulations,
            resign_threshold=sp.resign_threshold, no_resign_fraction=sp.no_resign_fraction,
            resign_max_false_positives=sp.resign_max_false_positives, fork_fraction=sp.fork_fraction,
            forced_playouts_k=sp.forced_playouts_k,
        )

    def learner_options(self) -> LearnerOptions:
        """``Learner``'s training options (both wirings build it from these)."""
        train = self.train
        rate = train.learning_rate
        return LearnerOptions(batch_size=train.batch_size, optimizer=train.optimizer,
                              learning_rate=[list(x) for x in rate] if isinstance(rate, list) else rate,
                              momentum=train.momentum, replay_window=train.replay_window,
                              min_positions=train.min_positions, max_reuse=train.max_reuse,
                              candidate_every=train.candidate_every, ownership_weight=train.ownership_weight,
                              opponent_policy_weight=train.opponent_policy_weight, score_weight=train.score_weight,
                              value_q_weight=train.value_q_weight)

    def gating_options(self) -> GatingOptions:
        """``Gatekeeper``'s match options (both wirings build it from these): both sides
        search as self-play does (a player adds no root noise), with ``gating.simulations``."""
        g = self.gating
        search = dataclasses.replace(self.search_settings(), simulations=g.simulations or self.mcts.simulations)
        player = MctsPlayerSettings(search=search, temperature_moves=g.temperature_moves)
        return GatingOptions(rule=self.gating_rule(), games_in_flight=g.games_in_flight, player=player,
                             cache_positions=g.cache_positions)

    def match_player(self) -> MctsPlayerSettings:
        """The model as ``tengen match`` and the benches play it: the gating players'
        visits and opening temperature, searching as play does (``play_search``: the
        eye rule of training's games, ``mcts.avoid_own_eyes``, is left out; against an
        engine that passes once it deems the game over, it left the model filling its
        own area alone until its groups had one eye each, and GNU Go then took every
        stone: W+88.5 in most of 20 games)."""
        gating = self.gating_options().player
        search = dataclasses.replace(self.play_search(), simulations=gating.search.simulations)
        return MctsPlayerSettings(search=search, temperature_moves=gating.temperature_moves)

    def strength_options(self) -> StrengthOptions:
        """How the strength evaluator measures the best model (both wirings build it
        from these): the model searches as the gating players do (``gating_options``),
        with ``evaluation.simulations`` when given."""
        e = self.evaluation
        player = self.gating_options().player
        if e.simulations is not None:
            player = player.with_simulations(e.simulations)
        return StrengthOptions(player=player, positions=e.positions, games=e.games,
                               mcts_simulations=e.mcts_simulations, gnugo_level=e.gnugo_level,
                               cpu_share=e.cpu_share, seed=self.seed)

    def gating_rule(self) -> GatingRule:
        g = self.gating
        return GatingRule(g.rule, elo0=g.elo0, elo1=g.elo1, alpha=g.alpha, beta=g.beta, max_games=g.max_games,
                          threshold=g.threshold, games=g.games, at_cap=g.at_cap, cap_threshold=g.cap_threshold)

    def with_changes(self, changes: Mapping[str, object], source: str = "the command line") -> TengenConfig:
        """This config with ``changes`` (dotted keys: ``{"stop.minutes": 5}``) made through
        the schema, so an override meets the same checks as the key in a file and the
        run directory's config.yaml says what the run used. A None value changes nothing."""
        return self._changed({key: value for key, value in changes.items() if value is not None}, source)

    def with_settings(self, settings: Mapping[str, object], source: str = "--set") -> TengenConfig:
        """This config with each dotted key in ``settings`` set to its value, None too
        (``tengen train --set stop.minutes=null`` lifts a stop limit), through the schema."""
        return self._changed(settings, source)

    def _changed(self, changes: Mapping[str, object], source: str) -> TengenConfig:
        data = self.model_dump(mode="json")
        for key, value in changes.items():
            section, _, name = key.partition(".")
            if not name and section in data and not isinstance(data[section], dict):
                data[section] = value  # a top-level key (seed, storage)
                continue
            if section not in data or not isinstance(data[section], dict) or name not in data[section]:
                raise ConfigError(f"{source}: {key} is not a config key (`tengen config show` lists them)")
            data[section][name] = value
        return parse_config(data, source)

    def to_yaml(self) -> str:
        """The config as written into a run directory (every default spelled out)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def stream_maxlen(config: TengenConfig) -> int:
    """The stream's MAXLEN (in games) that holds about ``replay_window`` positions.

    A game records about half its board in moves, times the share of full searches;
    erring long keeps a little more than the window, never less.
    """
    height, width = config.game.make().board_shape
    positions_per_game = max(1.0, height * width / 2 * config.selfplay.full_search_fraction)
    return max(100, int(config.train.replay_window / positions_per_game))


#: the memory, in bytes, that each part's preallocated arrays must fit in. The default
#: is this machine's: the config is checked where it is loaded (the driver, then each
#: actor on its node), and a small head node that launches onto big ones, or a
#: container whose limit is below the host's memory, needs to say otherwise.
MEMORY_BUDGET_VARIABLE = "TENGEN_MEMORY_BUDGET_BYTES"
#: where the system does not report its memory (no os.sysconf, as on Windows)
_FALLBACK_MEMORY_BYTES = 16 * 2**30


def _memory_budget() -> tuple[int, str]:
    """The budget in bytes, and where it comes from in words."""
    text = os.environ.get(MEMORY_BUDGET_VARIABLE)
    if text is not None:
        try:
            budget = int(text)
        except ValueError:
            budget = 0
        if budget < 1:
            raise ValueError(f"{MEMORY_BUDGET_VARIABLE} must be a positive number of bytes, not {text!r}")
        return budget, f"the {_bytes_text(budget)} that {MEMORY_BUDGET_VARIABLE} allows"
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = -1
    if total > 0:
        return total, f"this machine's {_bytes_text(total)}"
    return _FALLBACK_MEMORY_BYTES, f"the {_bytes_text(_FALLBACK_MEMORY_BYTES)} assumed where the system does not say"


def _bytes_text(n: int) -> str:
    """``412.3 GiB``; integer arithmetic first, since an absurd size overflows a float."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    power = 0
    while power < len(units) - 1 and n >= 1024 ** (power + 1):
        power += 1
    if power == 0:
        return f"{n} B"
    whole = n // 1024**power
    if whole >= 2**53:
        return f"{whole} {units[power]}"
    return f"{n / 1024**power:.1f} {units[power]}"


def parse_config(data: object, source: str = "config") -> TengenConfig:
    """Validate a parsed YAML/JSON document; ConfigError names each bad field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    try:
        return TengenConfig.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown key"
            # a check across sections names its fields in the message itself
            field = ".".join(str(p) for p in err["loc"])
            problems.append(f"{field}: {message}" if field else message)
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def packaged_configs() -> dict[str, Path]:
    """The run configs that ship with tengen, by name (``connect4``, ``go9``, ...)."""
    from importlib.resources import files

    folder = Path(str(files("tengen") / "configs"))
    return {path.stem: path for path in sorted(folder.glob("*.yaml"))}


def config_path(name_or_path: str | Path) -> Path:
    """A config file: ``name_or_path`` itself when it is a file (or looks like a path),
    else the packaged config of that name, so that ``tengen train connect4`` works
    from any directory. ConfigError names the packaged ones when neither fits."""
    path = Path(name_or_path)
    if path.exists() or path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        return path
    packaged = packaged_configs()
    if str(name_or_path) in packaged:
        return packaged[str(name_or_path)]
    raise ConfigError(f"{name_or_path}: no such file, and no packaged config of that name "
                      f"(packaged: {', '.join(packaged)})")


def load_config(path: str | Path) -> TengenConfig:
    """The config in a file, or the packaged config of that name (``connect4``)."""
    path = config_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} on line {line}): save it as "
                          "UTF-8") from None
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        # ValueError: an integer of more than 4300 digits; RecursionError: absurd nesting
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse_config(data, str(path))
