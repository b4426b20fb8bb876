"""``NetworkSpec``: what a network is built from, as one typed value that crosses
process boundaries (Ray pickles it to the learner, the inference servers and the
gatekeeper) without TensorFlow: building is ``spec.build()``.

The run config makes it (``TengenConfig.network_spec()``: the game's planes and
actions, the config's network section), so its defaults are the schema's alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras

__all__ = ["NetworkSpec"]


@dataclass(frozen=True)
class NetworkSpec:
    input_shape: tuple[int, int, int]  # the game's planes, (H, W, C)
    num_actions: int
    blocks: int
    filters: int
    l2: float
    value_hidden: int
    #: KataGo's ownership head (Go only): the network's third output
    ownership: bool
    #: every this many residual blocks, one with KataGo's global pooling bias (0: none)
    global_pooling_every: int = 0
    #: KataGo's opponent-policy head (any game): one more output, the opponent's reply
    opponent_policy: bool = False
    #: KataGo's score head (Go only): one more output, the final score's mean and spread
    score: bool = False
    #: the Keras backend it runs on (None: KERAS_BACKEND, else TensorFlow; engine/backend.py)
    backend: str | None = None

    def build(self, *, mixed_precision: bool = False) -> keras.Model:
        """The network (engine/network.py's ``build_network``), untrained: on its backend
        where Keras has not started yet in this process, else on the one it runs (weights
        are the same on every backend; a run's processes start on its backend)."""
        import sys

        from tengen.engine.backend import use_backend

        if "keras" not in sys.modules:
            use_backend(self.backend)
        from tengen.engine.network import build_network

        return build_network(input_shape=self.input_shape, num_actions=self.num_actions, blocks=self.blocks,
                             filters=self.filters, l2=self.l2, value_hidden=self.value_hidden,
                             ownership=self.ownership, global_pooling_every=self.global_pooling_every,
                             opponent_policy=self.opponent_policy, score=self.score,
                             mixed_precision=mixed_precision)
