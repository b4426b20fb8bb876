"""Match statistics and the gating decision: Elo from a score, its interval, and SPRT.

A gating match is summed up as the candidate's wins, draws and losses against the
current best. Every figure here comes from the *score* per game (1 win, 1/2 draw,
0 loss) and the logistic Elo model, ``score = 1 / (1 + 10 ** (-elo / 400))``:

- ``estimate_elo``: the mean score and its standard error (the trinomial variance of
  one game's score), mapped through ``elo_from_score`` to an Elo and an interval.
- ``sprt_llr``: the generalized SPRT of fishtest (the normal approximation to the
  log-likelihood ratio of "the candidate is ``elo1`` stronger" against "``elo0``").
- ``GatingRule``: the decision the Gatekeeper asks after every game, built from the
  config's ``kind`` (``sprt``, ``threshold`` as in AlphaGo Zero, or ``none``).

Pure Python: ``math`` and the standard library's ``statistics.NormalDist`` only.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from statistics import NormalDist
from typing import Literal, TypedDict

__all__ = [
    "MAX_ELO",
    "Decision",
    "EloEstimate",
    "GatingRule",
    "GatingSummary",
    "elo_from_score",
    "estimate_elo",
    "score_from_elo",
    "sprt_bounds",
    "sprt_llr",
]

#: |Elo| reported for a score of 0 or 1 (score 1 - 1e-4 is 400 * log10(9999) ~ 1600).
#: A finite match cannot tell a perfect score from a near-perfect one, and a finite
#: number keeps logs, metrics and dashboards usable.
MAX_ELO = 1600.0
_SCORE_LIMIT = 1.0 / (1.0 + 10.0 ** (MAX_ELO / 400.0))  # the score whose Elo is -MAX_ELO

GatingKind = Literal["sprt", "threshold", "none"]
#: how an SPRT that reaches ``max_games`` undecided is decided (see GatingRule)
CapFallback = Literal["reject", "llr", "score"]


class Decision(StrEnum):
    """What the Gatekeeper does next; compares equal to the plain strings."""

    PROMOTE = "promote"
    REJECT = "reject"
    CONTINUE = "continue"


def elo_from_score(score: float) -> float:
    """The Elo difference whose expected score is ``score`` (in 0..1).

    ``-400 * log10(1 / score - 1)``; scores at or beyond 0 and 1 give -/+ ``MAX_ELO``
    rather than infinities.
    """
    clamped = min(max(score, _SCORE_LIMIT), 1.0 - _SCORE_LIMIT)
    return -400.0 * math.log10(1.0 / clamped - 1.0)


def score_from_elo(elo: float) -> float:
    """The expected score per game of a player ``elo`` points stronger."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


@dataclass(frozen=True)
class EloEstimate:
    """An Elo difference with its confidence interval, from ``games`` games."""

    elo: float
    low: float
    high: float
    games: int
    score: float


def _score_and_variance(wins: float, draws: float, losses: float) -> tuple[float, float]:
    """The mean score per game and the (population) variance of one game's score."""
    games = wins + draws + losses
    score = (wins + 0.5 * draws) / games
    variance = (wins * (1.0 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
    return score, variance


def _check_counts(wins: int, draws: int, losses: int) -> None:
    if min(wins, draws, losses) < 0:
        raise ValueError(f"game counts must be >= 0, got W/D/L {wins}/{draws}/{losses}")


def estimate_elo(wins: int, draws: int, losses: int, *, confidence: float = 0.95) -> EloEstimate:
    """The Elo of the player with these results, with a ``confidence`` interval.

    The interval is the normal one on the mean score, ``score +- z * sqrt(var / n)``
    with ``var`` the trinomial variance of one game's score, mapped through
    ``elo_from_score`` (monotone, so the coverage carries over). With no games the
    estimate is 0 with the widest interval.
    """
    _check_counts(wins, draws, losses)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    games = wins + draws + losses
    if games == 0:
        return EloEstimate(elo=0.0, low=-MAX_ELO, high=MAX_ELO, games=0, score=0.5)
    score, variance = _score_and_variance(wins, draws, losses)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    half_width = z * math.sqrt(variance / games)
    return EloEstimate(
        elo=elo_from_score(score),
        low=elo_from_score(score - half_width),
        high=elo_from_score(score + half_width),
        games=games,
        score=score,
    )


def sprt_bounds(*, alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """Wald's (lower, upper) LLR bounds: ``log(beta / (1 - alpha))``, ``log((1 - beta) / alpha)``.

    ``alpha`` is the chance of promoting a candidate that is only ``elo0`` stronger,
    ``beta`` of rejecting one that is ``elo1`` stronger; 0.05 each gives +-2.944.
    """
    if not (0.0 < alpha < 1.0 and 0.0 < beta < 1.0):
        raise ValueError(f"alpha and beta must be in (0, 1), got {alpha}, {beta}")
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def sprt_llr(wins: int, draws: int, losses: int, *, elo0: float, elo1: float) -> float:
    """The generalized SPRT log-likelihood ratio of H1 (``elo1``) against H0 (``elo0``).

    fishtest's normal approximation on the per-game score:
    ``(s1 - s0) * (2 * s_hat - s0 - s1) * N / (2 * var_hat)`` with ``s0``, ``s1`` the
    expected scores of ``elo0`` and ``elo1``, ``s_hat`` the mean score and ``var_hat``
    the variance of one game's score over the ``N`` games.

    When every game had the same result the variance is zero; then ``var_hat`` is the
    variance with half a game added to each of win, draw and loss (the counts only
    feed the variance, ``s_hat`` stays the observed mean). Five straight wins thus
    give an LLR of about 1.4 for the default hypotheses, not infinity: one lucky
    streak must not promote a network.
    """
    _check_counts(wins, draws, losses)
    games = wins + draws + losses
    if games == 0:
        return 0.0
    s0, s1 = score_from_elo(elo0), score_from_elo(elo1)
    score, variance = _score_and_variance(wins, draws, losses)
    if variance <= 0.0:
        _, variance = _score_and_variance(wins + 0.5, draws + 0.5, losses + 0.5)
    return (s1 - s0) * (2.0 * score - s0 - s1) * games / (2.0 * variance)


@dataclass(frozen=True)
class GatingRule:
    """When a candidate replaces the best network, asked after every gating game.

    - ``sprt``: Wald's sequential test of ``elo0`` against ``elo1`` with error rates
      ``alpha``/``beta`` (Leela Zero and fishtest gate this way); promote once the LLR
      reaches the upper bound, reject at the lower bound. A test that reaches
      ``max_games`` without a verdict is decided by ``at_cap``: ``reject`` keeps the
      current best, since the test never showed the candidate to be stronger;
      ``llr`` promotes when the LLR is above zero (the results sit nearer ``elo1``
      than ``elo0``); ``score`` promotes when the score is above ``cap_threshold``
      (AlphaGo Zero's 55%). Rejecting at the cap threw away clearly better
      candidates in 60-game tests (37-7-16, LLR 2.4 of 2.94 needed), so a run
      that gates on few games wants one of the others.
    - ``threshold``: AlphaGo Zero's rule, promote when the score over ``games`` games
      exceeds ``threshold`` (0.55 over 400 there; the classic Connect Four tutorial
      used 0.5 over 10). It stops early once the remaining games can no longer
      change the verdict.
    - ``none``: promote every candidate at once, without games (AlphaZero's
      continual update).
    """

    kind: GatingKind
    _: KW_ONLY
    elo0: float = 0.0
    elo1: float = 35.0
    alpha: float = 0.05
    beta: float = 0.05
    max_games: int = 400
    threshold: float = 0.55
    games: int = 400
    at_cap: CapFallback = "llr"
    cap_threshold: float = 0.55

    def __post_init__(self) -> None:
        self._validate()

    def _validate(self) -> None:
        if self.kind not in ("sprt", "threshold", "none"):
            raise ValueError(f"gating kind must be 'sprt', 'threshold' or 'none', got {self.kind!r}")
        if self.kind == "sprt":
            if not self.elo1 > self.elo0:
                raise ValueError(f"SPRT needs elo1 > elo0, got elo0={self.elo0}, elo1={self.elo1}")
            sprt_bounds(alpha=self.alpha, beta=self.beta)  # raises on bad error rates
            if self.max_games < 1:
                raise ValueError(f"max_games must be >= 1, got {self.max_games}")
            if self.at_cap not in ("reject", "llr", "score"):
                raise ValueError(f"at_cap must be 'reject', 'llr' or 'score', got {self.at_cap!r}")
            if not 0.0 <= self.cap_threshold < 1.0:
                raise ValueError(f"cap_threshold must be in [0, 1), got {self.cap_threshold}")
        if self.kind == "threshold":
            if not 0.0 <= self.threshold < 1.0:
                raise ValueError(f"threshold must be in [0, 1), got {self.threshold}")
            if self.games < 1:
                raise ValueError(f"games must be >= 1, got {self.games}")

    @property
    def games_needed_max(self) -> int:
        """The most games ``decide`` can ask for before a verdict (0 for ``none``)."""
        if self.kind == "sprt":
            return self.max_games
        if self.kind == "threshold":
            return self.games
        return 0

    @property
    def bounds(self) -> tuple[float, float]:
        """The SPRT's (lower, upper) LLR bounds, for logs and dashboards."""
        return sprt_bounds(alpha=self.alpha, beta=self.beta)

    def llr(self, wins: int, draws: int, losses: int) -> float:
        """The SPRT log-likelihood ratio under this rule's hypotheses."""
        return sprt_llr(wins, draws, losses, elo0=self.elo0, elo1=self.elo1)

    def decide(self, wins: int, draws: int, losses: int) -> Decision:
        """The verdict after these results of the candidate against the best."""
        _check_counts(wins, draws, losses)
        if self.kind == "none":
            return Decision.PROMOTE
        played = wins + draws + losses
        if self.kind == "sprt":
            lower, upper = self.bounds
            llr = self.llr(wins, draws, losses)
            if llr >= upper:
                return Decision.PROMOTE
            if llr <= lower:
                return Decision.REJECT
            if played >= self.max_games:
                return self._decide_at_cap(wins, draws, played, llr)
            return Decision.CONTINUE
        return self._decide_threshold(wins, draws, played)

    def decided_by(self, wins: int, draws: int, losses: int) -> str:
        """What made the verdict on these results: ``sprt``, ``cap:<at_cap>``,
        ``threshold`` or ``none`` (for the ladder and the logs)."""
        if self.kind != "sprt":
            return self.kind
        lower, upper = self.bounds
        llr = self.llr(wins, draws, losses)
        return "sprt" if llr >= upper or llr <= lower else f"cap:{self.at_cap}"

    def _decide_at_cap(self, wins: int, draws: int, played: int, llr: float) -> Decision:
        if self.at_cap == "llr":
            return Decision.PROMOTE if llr > 0.0 else Decision.REJECT
        if self.at_cap == "score":
            return Decision.PROMOTE if wins + 0.5 * draws > self.cap_threshold * played else Decision.REJECT
        return Decision.REJECT

    def _decide_threshold(self, wins: int, draws: int, played: int) -> Decision:
        points = wins + 0.5 * draws
        if played >= self.games:
            # Extra games (a batch that overshot) count too: the score over all played.
            return Decision.PROMOTE if points > self.threshold * played else Decision.REJECT
        remaining = self.games - played
        # Compare points rather than scores so that exact ties stay exact in floats:
        # score > threshold  <=>  points > threshold * games.
        needed = self.threshold * self.games
        if points > needed:  # even losing every remaining game keeps the score above
            return Decision.PROMOTE
        if points + remaining <= needed:  # even winning every remaining game is not enough
            return Decision.REJECT
        return Decision.CONTINUE


class GatingSummary(TypedDict):
    """One gating match's verdict, as the ladder, gating.jsonl and the status line keep
    it. ``Gatekeeper.gate`` (workers/gatekeeper.py) makes it; it is defined here, in the
    engine, because the model registry's interface (engine/interfaces.py), which only
    the engine may hold, carries it onto the ladder with a promotion."""

    candidate: int
    best: int
    decision: str  # a Decision's value: "promote" or "reject"
    wins: int  # the candidate's
    draws: int
    losses: int
    elo: float  # the candidate's Elo over the best, with its interval
    elo_low: float
    elo_high: float
    llr: float | None  # the SPRT's log-likelihood ratio; None under another rule
    by: str  # what made the verdict (GatingRule.decided_by)
