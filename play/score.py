"""The final score a network's score head expects for a Go position, for analysis.

One narrow interface, like play/ownership.py's:

    ``Score``: ``score(state, history) -> ScoreBelief(mean, stdev)``

in points from Black's point of view (> 0: Black leads, komi counted), KataGo's
scoreMean and scoreStdev. ``NetworkScore`` reads a network's score head
(engine/network.py, ``CompiledModel.score``). Without the head, analysis counts the
ownership estimate instead (play/analysis_engine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from tengen.engine.games.go import GoGame

__all__ = ["Score", "ScoreBelief", "ScoreHead", "NetworkScore"]


class ScoreBelief(NamedTuple):
    """The expected final score difference and its spread, in points."""

    mean: float
    stdev: float


#: ``score(state, history) -> ScoreBelief``, Black's point of view
Score = Callable[[np.ndarray, Sequence[np.ndarray]], ScoreBelief]
#: a network's score head: ``planes uint8[B, H, W, C] -> float32[B, 2]`` (mean, stdev),
#: the mover's view (``CompiledModel.score``)
ScoreHead = Callable[[np.ndarray], np.ndarray]


class NetworkScore:
    """The ``Score`` of a network's score head: the position's planes under each of the
    board's 8 symmetries in one batch, the means averaged and the spreads' variances
    averaged (a score has no orientation, so the images differ only by the net's own
    error), turned from the mover's view to Black's. Deterministic, like a network call."""

    def __init__(self, game: GoGame, head: ScoreHead, *, symmetries: bool = True):
        self.game = game
        self.head = head
        self._ks = range(len(game.symmetries)) if symmetries else range(1)

    def __call__(self, state: np.ndarray, history: Sequence[np.ndarray] = ()) -> ScoreBelief:
        game = self.game
        planes = game.encode(state, history).astype(np.uint8)
        images = np.stack([game.transform_planes(planes, k) for k in self._ks])
        belief = np.asarray(self.head(images), dtype=np.float64)
        if belief.shape != (len(images), 2):
            raise ValueError(f"the score head answered {belief.shape} for {len(images)} positions, not (mean, stdev)")
        mean = float(belief[:, 0].mean())
        stdev = float(np.sqrt(np.mean(np.square(belief[:, 1]))))
        return ScoreBelief(mean if game.to_play(state) == 0 else -mean, stdev)
