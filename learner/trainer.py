"""One AlphaZero training step, learning-rate schedules and checkpoints.

The loss is AlphaGo Zero's ``l = (z - v)^2 - pi^T log p + c ||theta||^2``: the value
MSE (weighted by ``value_weight``), the cross-entropy between the search policy
``pi`` and the network's softmax, and the L2 term the network's kernel regularisers
put in ``model.losses``. The cross-entropy is averaged over the positions that have a
policy target (``has_policy``; all of them unless told): a position without one, such as
an exactly valued child in bench/supervised_ceiling.py, trains the value alone (as
KataGo's positions without a full search do). A network with the ownership head adds
``ownership_weight`` times its mean per-point squared error (KataGo's auxiliary
ownership target; a squared error of a tanh output like the value's), averaged over
the positions that have a target (games that resigned have none). A network with the
opponent-policy head adds ``opponent_policy_weight`` times the cross-entropy between
the next position's search policy (the opponent's reply) and that head's softmax,
averaged over the positions that have a next one (KataGo's auxiliary target, weight
0.15: Wu 2019, "Auxiliary Policy Targets"). A network with the score head adds
``score_weight`` times the Gaussian negative log likelihood of the final score under
the head's (scoreMean, scoreStdev), ``score_nll``, averaged over the positions of
games played to the end (those with an ownership target). The loss is written once,
in ``keras.ops``, for every backend.

Checkpoints are the weights blob format of engine/network.py (safetensors, never
pickle) with a different tag: the model's weights under ``model/<path>``, the
optimizer's variables (step counter, momentum...) under ``optimizer/<index>/<name>``,
the backend that wrote them, and the caller's ``extra`` (RNG state, stream position)
as JSON metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np

from tengen.engine.backend import backend
from tengen.engine.network import (
    WeightsError,
    assign_checked,
    has_opponent_policy,
    has_ownership,
    has_score,
    model_variables,
    opponent_policy_output,
    ownership_output,
    pack_tensors,
    score_output,
    unpack_tensors,
    variable_array,
)
from tengen.learner.train_step import compile_train_step, learning_rate_now

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMAT_VERSION",
    "ALPHAGO_ZERO_SCHEDULE",
    "StepSchedule",
    "Trainer",
    "checkpoint_backend",
    "CheckpointBackendError",
    "score_nll",
]

CHECKPOINT_FORMAT = "tengen-checkpoint"
#: 2: the data section's sha256 in the header, checked on read (1 still reads)
CHECKPOINT_FORMAT_VERSION = "2"
_CHECKPOINT_VERSIONS = ("1", CHECKPOINT_FORMAT_VERSION)
#: AlphaGo Zero's annealing (Methods, "Optimization"): 1e-2, then 1e-3 from step 400K,
#: then 1e-4 from 600K
ALPHAGO_ZERO_SCHEDULE = ((0, 1e-2), (400_000, 1e-3), (600_000, 1e-4))


class StepSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Piecewise-constant learning rate: ``[[step, lr], ...]``, each ``lr`` used from
    its ``step`` on (the first step must be 0; steps strictly increase).

    Keras's PiecewiseConstantDecay switches one step later (after ``step > boundary``);
    this one switches at the boundary, as the configs read.
    """

    def __init__(self, schedule: Sequence[Sequence[float]]):
        steps = [int(s) for s, _ in schedule]
        rates = [float(lr) for _, lr in schedule]
        if not steps or steps[0] != 0:
            raise ValueError(f"a learning-rate schedule starts at step 0, got {schedule!r}")
        if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
            raise ValueError(f"learning-rate schedule steps must increase, got {steps}")
        self.schedule = [[s, lr] for s, lr in zip(steps, rates, strict=True)]
        self._steps = np.asarray(steps, np.int32)  # JAX's integers are 32-bit unless told
        self._rates = np.asarray(rates, np.float32)

    def __call__(self, step):
        ops = keras.ops
        # index of the last boundary at or below the step
        passed = ops.sum(ops.cast(ops.greater_equal(ops.cast(step, "int32"), self._steps), "int32"))
        return ops.take(ops.convert_to_tensor(self._rates), passed - 1)

    def get_config(self) -> dict:
        return {"schedule": self.schedule}


class CheckpointBackendError(WeightsError):
    """A learner checkpoint of another backend: whole, and not to be passed over for an
    older one (its predecessor is of the same backend), but converted or resumed there."""


def checkpoint_backend(metadata: Mapping) -> str:
    """The backend a checkpoint's learner ran on (before backends were a choice: TensorFlow)."""
    return str(metadata.get("backend", "tensorflow"))


def _as_this_backend_keeps(tensors: dict[str, np.ndarray], variables: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Another backend's tensors in this one's dtypes, where only the width differs (the
    optimizer's step counter is int64 on TensorFlow, int32 on JAX without x64); a value
    the narrower type cannot hold is a ``WeightsError``."""
    converted = dict(tensors)
    for name, variable in variables.items():
        tensor, dtype = tensors.get(name), np.dtype(variable.dtype)
        if tensor is None or tensor.dtype == dtype or tensor.dtype.kind != dtype.kind:
            continue
        cast = tensor.astype(dtype)
        if not np.array_equal(cast.astype(tensor.dtype), tensor, equal_nan=dtype.kind == "f"):
            raise WeightsError(f"tensor {name!r} does not fit {dtype} (the values of {tensor.dtype} change)")
        converted[name] = cast
    return converted


def _masked_mean(values, mask):
    """The mean of ``values`` over the rows where ``mask`` (0 or 1) is 1; 0 where none is."""
    ops = keras.ops
    return ops.sum(values * mask) / ops.maximum(ops.sum(mask), 1.0)


def _cross_entropy(target, logits):
    """``-sum(target * log softmax(logits))`` per row: a policy head's loss."""
    ops = keras.ops
    return -ops.sum(target * ops.log_softmax(logits, axis=-1), axis=-1)


def score_nll(score, mean, stdev):
    """Per row, the negative log likelihood of the final ``score`` under a Gaussian of
    the head's ``mean`` and ``stdev`` (points), less its constant ``log sqrt(2 pi)``:
    ``(score - mean)^2 / (2 stdev^2) + log(stdev)``. 0 where the mean is exact and the
    spread 1 point; for a given miss it is least where the spread equals the miss, so the
    spread learns how far off the mean tends to be (KataGo's scoreStdev). KataGo trains
    a score belief, a distribution over whole scores, by cross-entropy; a Gaussian's
    likelihood is that belief with two numbers."""
    ops = keras.ops
    return ops.square(score - mean) / (2.0 * ops.square(stdev)) + ops.log(stdev)


def _uses_float16(model: keras.Model) -> bool:
    return any(getattr(layer, "compute_dtype", "float32") == "float16" for layer in model.layers)


class Trainer:
    """Trains a ``build_network`` model on ``(planes, policy, value)`` minibatches, and
    a model with the ownership head on ``ownership`` targets too, and one with the
    opponent-policy head on ``opponent_policy`` targets, and one with the score head on
    ``score`` targets.

    ``optimizer`` is "sgd" (with ``momentum``, AlphaZero's choice) or "adam";
    ``learning_rate`` is a float or a ``[[step, lr], ...]`` schedule. A model built
    with mixed float16 (TensorFlow's) gets dynamic loss scaling. ``train_step`` is the
    backend's own update (learner/train_step.py): on TensorFlow one ``tf.function`` with
    a fixed ``[None, ...]`` signature (any batch size, one trace), on JAX one
    ``jax.jit`` per batch size, on PyTorch eager autograd.

    ``jit_compile`` (default on, as Keras' own ``fit`` does on TensorFlow) compiles the
    TensorFlow step with XLA, once per batch size it meets (2-4 s on CPU, against 1-3 s for the plain
    trace). Measured on 2 CPU cores (bench/train_step.py, 2026-12-05): 1.27x the plain
    step's rate for Connect Four's config, 1.29x for tic-tac-toe's, 1.00x for Go 9x9's and
    0.99x for Go 13x13's.
    """

    def __init__(
        self,
        *,
        model: keras.Model,
        optimizer: str = "sgd",
        learning_rate: float | Sequence[Sequence[float]] = ALPHAGO_ZERO_SCHEDULE,
        momentum: float = 0.9,
        value_weight: float = 1.0,
        ownership_weight: float = 1.0,
        opponent_policy_weight: float = 0.15,
        score_weight: float = 0.02,
        jit_compile: bool = True,
    ):
        self.model = model
        self.value_weight = float(value_weight)
        self.ownership_weight = float(ownership_weight)
        self.opponent_policy_weight = float(opponent_policy_weight)
        self.score_weight = float(score_weight)
        self.has_ownership = has_ownership(model)
        self.has_opponent_policy = has_opponent_policy(model)
        self.has_score = has_score(model)
        # where each auxiliary head's output is among the model's outputs
        self._ownership_at = ownership_output(model) if self.has_ownership else None
        self._opponent_policy_at = opponent_policy_output(model) if self.has_opponent_policy else None
        self._score_at = score_output(model) if self.has_score else None
        lr: Any = float(learning_rate) if isinstance(learning_rate, (int, float)) else StepSchedule(learning_rate)
        if optimizer == "sgd":
            opt: keras.optimizers.Optimizer = keras.optimizers.SGD(learning_rate=lr, momentum=momentum)
        elif optimizer == "adam":
            opt = keras.optimizers.Adam(learning_rate=lr)
        else:
            raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
        if _uses_float16(model):
            # float16 gradients underflow without it (Micikevicius et al. 2018)
            opt = keras.optimizers.LossScaleOptimizer(opt)
        # built now so that a checkpoint can be restored before the first step
        opt.build(model.trainable_variables)
        self.optimizer = opt
        self.trace_count = 0

        self.points = int(model.input_shape[1]) * int(model.input_shape[2])
        self.backend = backend()
        self.jit_compile = bool(jit_compile)

        def traced() -> None:
            self.trace_count += 1

        self._train_step = compile_train_step(model, opt, self._loss, jit_compile=self.jit_compile, traced=traced)

    @property
    def step(self) -> int:
        """Optimizer updates applied so far (the learning-rate schedule's step)."""
        return int(self.optimizer.iterations.numpy())

    @property
    def learning_rate(self) -> float:
        """The learning rate the next update will use."""
        return learning_rate_now(self.optimizer)

    def _loss(self, outputs, regularisation, policy, value, has_policy, *auxiliary):
        """The loss to minimise and its parts, in ``keras.ops`` (any backend).
        ``auxiliary``: ``ownership, has_ownership`` with that head, then
        ``opponent_policy, has_opponent_policy`` with that one, then ``score, has_score``."""
        ops = keras.ops
        logits, v = ops.cast(outputs[0], "float32"), ops.cast(outputs[1], "float32")
        # masked, not zero targets: a position without a policy target adds nothing
        policy_loss = _masked_mean(_cross_entropy(policy, logits), has_policy)
        value_loss = ops.mean(ops.square(v - value))
        l2 = ops.sum(ops.stack([ops.cast(x, "float32") for x in regularisation])) if regularisation else 0.0
        loss = policy_loss + self.value_weight * value_loss + l2
        parts = {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss, "l2": ops.convert_to_tensor(l2)}
        targets = list(auxiliary)
        if self.has_ownership:
            ownership, has_target = targets.pop(0), targets.pop(0)
            owners = ops.cast(outputs[self._ownership_at], "float32")
            ownership_loss = _masked_mean(ops.mean(ops.square(owners - ownership), axis=-1), has_target)
            parts["loss"] = loss = loss + self.ownership_weight * ownership_loss
            parts["ownership_loss"] = ownership_loss
        if self.has_opponent_policy:
            reply, has_reply = targets.pop(0), targets.pop(0)
            reply_logits = ops.cast(outputs[self._opponent_policy_at], "float32")
            opponent_loss = _masked_mean(_cross_entropy(reply, reply_logits), has_reply)
            parts["loss"] = loss = loss + self.opponent_policy_weight * opponent_loss
            parts["opponent_policy_loss"] = opponent_loss
        if self.has_score:
            score, has_target = targets.pop(0), targets.pop(0)
            belief = ops.cast(outputs[self._score_at], "float32")
            score_loss = _masked_mean(score_nll(score, belief[:, 0], belief[:, 1]), has_target)
            parts["loss"] = loss = loss + self.score_weight * score_loss
            parts["score_loss"] = score_loss
        return loss, parts

    def train_step(self, planes: np.ndarray, policy: np.ndarray, value: np.ndarray,
                   ownership: np.ndarray | None = None, has_ownership: np.ndarray | None = None, *,
                   has_policy: np.ndarray | None = None, opponent_policy: np.ndarray | None = None,
                   has_opponent_policy: np.ndarray | None = None, score: np.ndarray | None = None,
                   has_score: np.ndarray | None = None) -> dict[str, float]:
        """One update on ``planes[B, H, W, C]``, ``policy[B, A]`` (targets summing to 1),
        ``value[B]`` (outcomes in [-1, 1]) and, for a model with the ownership head,
        ``ownership[B, H*W]`` (final owners from the mover's view, in [-1, 1]) with
        ``has_ownership[B]`` (1 where a position has that target; without both, none has).
        ``has_policy[B]`` is 1 where ``policy`` is a target (default: every row); the
        other rows' policies are ignored. For a model with the opponent-policy head,
        ``opponent_policy[B, A]`` is the next position's policy target (the opponent's
        reply) with ``has_opponent_policy[B]`` (1 where there is one; without both, none).
        For a model with the score head, ``score[B]`` is the final score difference from
        the mover's view in points (``mover_score``) with ``has_score[B]`` (1 for a game
        played to the end; without both, none).

        Returns the losses before the update (``loss``, ``policy_loss``,
        ``value_loss``, ``l2``, ``ownership_loss``, ``opponent_policy_loss`` and
        ``score_loss`` with those heads) and the ``learning_rate`` it used.
        """
        batch = len(value)
        if has_policy is not None and len(has_policy) != batch:
            raise ValueError(f"has_policy has {len(has_policy)} rows for a batch of {batch}")
        policy = np.asarray(policy, np.float32)
        args = [
            np.asarray(planes, np.float32),
            policy,
            np.asarray(value, np.float32),
            np.ones(batch, np.float32) if has_policy is None else np.asarray(has_policy, np.float32),
        ]
        heads = (("ownership", self.has_ownership, ownership, has_ownership, (batch, self.points)),
                 ("opponent_policy", self.has_opponent_policy, opponent_policy, has_opponent_policy, policy.shape),
                 ("score", self.has_score, score, has_score, (batch,)))
        for name, has_head, target, mask, shape in heads:
            if (target is None) != (mask is None):
                raise ValueError(f"{name} and has_{name} go together")
            if has_head:
                if target is None:
                    target, mask = np.zeros(shape, np.float32), np.zeros(batch, np.float32)
                args += [np.asarray(target, np.float32), np.asarray(mask, np.float32)]
            elif target is not None:
                raise ValueError(f"{name} targets for a model without the {name.replace('_', '-')} head")
        return self._train_step(args)

    # -- checkpoints -----------------------------------------------------------------------
    def _variables(self) -> dict[str, Any]:
        named = {f"model/{path}": v for path, v in model_variables(self.model).items()}
        # optimizer variable paths carry an instance number (sgd_3/...); index + name
        # is what stays the same between two trainers built alike
        for i, v in enumerate(self.optimizer.variables):
            named[f"optimizer/{i:04d}/{v.name}"] = v
        return named

    def checkpoint_to_bytes(self, extra: Mapping | None = None) -> bytes:
        """Model weights, optimizer state and step as one blob; ``extra`` rides along as JSON."""
        tensors = {name: variable_array(v) for name, v in self._variables().items()}
        metadata = {"step": self.step, "backend": self.backend, "extra": dict(extra or {})}
        return pack_tensors(tensors, fmt=CHECKPOINT_FORMAT, version=CHECKPOINT_FORMAT_VERSION, metadata=metadata,
                            checksum=True)

    def restore_from_bytes(self, blob: bytes, *, any_backend: bool = False) -> dict:
        """Restore a ``checkpoint_to_bytes`` blob (all checked before anything changes);
        returns its ``extra``. Raises ``WeightsError`` when it does not fit, or was
        written on another backend (unless ``any_backend``: a conversion)."""
        tensors, metadata = unpack_tensors(blob, fmt=CHECKPOINT_FORMAT, versions=_CHECKPOINT_VERSIONS)
        written_by = checkpoint_backend(metadata)
        if written_by != self.backend and not any_backend:
            raise CheckpointBackendError(
                f"this checkpoint was written by a learner on {written_by} and this one runs on {self.backend}: its "
                f"optimizer state is {written_by}'s. Resume on {written_by} (network.backend), or convert it: "
                f"tengen checkpoint-convert RUN_DIR --backend {self.backend}")
        variables = self._variables()
        if written_by != self.backend:
            tensors = _as_this_backend_keeps(tensors, variables)
        assign_checked(variables, tensors)
        extra = metadata.get("extra", {})
        return extra if isinstance(extra, dict) else {}
