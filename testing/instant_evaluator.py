"""``InstantEvaluator``: a network stand-in that answers at once, for measuring the
path around the network (the self-play workers' tree work, the Ray calls, the
inference server's merging and splitting, the evaluation cache) without the
network's cost: bench/pipeline_ceiling.py gives it to a real InferenceServer
(its ``model`` argument) and to an in-process search alike.

It answers every position with a uniform policy over all actions and value zero, so
it knows nothing of the game and must never play one that counts: it lives here, in
the test harness, and no config can name it.
"""

from __future__ import annotations

import numpy as np

from tengen.engine.network_spec import NetworkSpec

__all__ = ["InstantEvaluator"]


class InstantEvaluator:
    """``evaluate(planes[B, H, W, C]) -> (policy float32[B, A], value float32[B])``,
    the shape of ``CompiledModel``'s answer: policy ``1 / A`` everywhere, value 0."""

    #: never traced: there is no program to build
    trace_count = 0

    def __init__(self, *, input_shape: tuple[int, ...], num_actions: int):
        self.input_shape = tuple(int(n) for n in input_shape)
        self.num_actions = int(num_actions)

    @classmethod
    def like(cls, network: NetworkSpec) -> InstantEvaluator:
        """A stand-in for ``network``: its planes in, its actions out."""
        return cls(input_shape=network.input_shape, num_actions=network.num_actions)

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if tuple(planes.shape[1:]) != self.input_shape:
            raise ValueError(f"planes must be [B, {', '.join(map(str, self.input_shape))}], got {planes.shape}")
        rows = planes.shape[0]
        return np.full((rows, self.num_actions), 1.0 / self.num_actions, np.float32), np.zeros(rows, np.float32)

    def load_weights_blob(self, blob: bytes) -> None:
        """Takes any weights and keeps none: the answers never change."""
