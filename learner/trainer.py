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
the positions that have a target (games that resigned have none).

Checkpoints are the weights blob format of engine/network.py (safetensors, never
pickle) with a different tag: the model's weights under ``model/<path>``, the
optimizer's variables (step counter, momentum...) under ``optimizer/<index>/<name>``,
and the caller's ``extra`` (RNG state, stream position) as JSON metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tengen.engine.network import assign_checked, has_ownership, model_variables, pack_tensors, unpack_tensors

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMAT_VERSION",
    "ALPHAGO_ZERO_SCHEDULE",
    "StepSchedule",
    "Trainer",
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
        self._steps = tf.constant(steps, tf.int64)
        self._rates = tf.constant(rates, tf.float32)

    def __call__(self, step):
        # index of the last boundary at or below the step
        passed = tf.reduce_sum(tf.cast(tf.cast(step, tf.int64) >= self._steps, tf.int32))
        return tf.gather(self._rates, passed - 1)

    def get_config(self) -> dict:
        return {"schedule": self.schedule}


def _uses_float16(model: keras.Model) -> bool:
    return any(getattr(layer, "compute_dtype", "float32") == "float16" for layer in model.layers)


class Trainer:
    """Trains a ``build_network`` model on ``(planes, policy, value)`` minibatches, and
    a model with the ownership head on ``ownership`` targets too.

    ``optimizer`` is "sgd" (with ``momentum``, AlphaZero's choice) or "adam";
    ``learning_rate`` is a float or a ``[[step, lr], ...]`` schedule. A model built
    with mixed precision gets dynamic loss scaling. ``train_step`` is one
    ``tf.function`` with a fixed ``[None, ...]`` signature: any batch size, one trace.

    ``jit_compile`` (default on, as Keras' own ``fit`` does on TensorFlow) compiles the
    step with XLA, once per batch size it meets (2-4 s on CPU, against 1-3 s for the plain
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
        jit_compile: bool = True,
    ):
        self.model = model
        self.value_weight = float(value_weight)
        self.ownership_weight = float(ownership_weight)
        self.has_ownership = has_ownership(model)
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

        height, width, channels = (int(n) for n in model.input_shape[1:])
        num_actions = int(model.output_shape[0][-1])
        signature = [
            tf.TensorSpec([None, height, width, channels], tf.float32, name="planes_nhwc"),
            tf.TensorSpec([None, num_actions], tf.float32, name="policy"),
            tf.TensorSpec([None], tf.float32, name="value"),
            tf.TensorSpec([None], tf.float32, name="has_policy"),
        ]
        self.points = height * width
        if self.has_ownership:
            signature += [
                tf.TensorSpec([None, self.points], tf.float32, name="ownership"),
                tf.TensorSpec([None], tf.float32, name="has_ownership"),
            ]
        self.jit_compile = bool(jit_compile)
        self._train_step = tf.function(self._step, input_signature=signature, jit_compile=self.jit_compile)

    @property
    def step(self) -> int:
        """Optimizer updates applied so far (the learning-rate schedule's step)."""
        return int(self.optimizer.iterations.numpy())

    @property
    def learning_rate(self) -> float:
        """The learning rate the next update will use."""
        return float(self.optimizer.learning_rate.numpy())

    def _step(self, planes, policy, value, has_policy, ownership=None, has_target=None):
        self.trace_count += 1  # runs only while tracing
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(planes, training=True)
            logits, v = tf.cast(outputs[0], tf.float32), tf.cast(outputs[1], tf.float32)
            # masked, not zero targets: the fused op's gradient (softmax - labels) is not
            # zero for a row of zeros
            cross_entropy = tf.nn.softmax_cross_entropy_with_logits(labels=policy, logits=logits)
            policy_loss = tf.math.divide_no_nan(tf.reduce_sum(cross_entropy * has_policy), tf.reduce_sum(has_policy))
            value_loss = tf.reduce_mean(tf.square(v - value))
            losses = self.model.losses
            l2 = tf.add_n([tf.cast(x, tf.float32) for x in losses]) if losses else tf.constant(0.0)
            loss = policy_loss + self.value_weight * value_loss + l2
            if self.has_ownership:
                per_position = tf.reduce_mean(tf.square(tf.cast(outputs[2], tf.float32) - ownership), axis=-1)
                # the mean over the positions with a target (0 when the batch has none)
                ownership_loss = tf.math.divide_no_nan(tf.reduce_sum(per_position * has_target),
                                                       tf.reduce_sum(has_target))
                loss += self.ownership_weight * ownership_loss
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, variables)
        learning_rate = tf.cast(self.optimizer.learning_rate, tf.float32)  # before the step moves on
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        out = {
            "loss": loss,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "l2": l2,
            "learning_rate": learning_rate,
        }
        if self.has_ownership:
            out["ownership_loss"] = ownership_loss
        return out

    def train_step(self, planes: np.ndarray, policy: np.ndarray, value: np.ndarray,
                   ownership: np.ndarray | None = None, has_ownership: np.ndarray | None = None, *,
                   has_policy: np.ndarray | None = None) -> dict[str, float]:
        """One update on ``planes[B, H, W, C]``, ``policy[B, A]`` (targets summing to 1),
        ``value[B]`` (outcomes in [-1, 1]) and, for a model with the ownership head,
        ``ownership[B, H*W]`` (final owners from the mover's view, in [-1, 1]) with
        ``has_ownership[B]`` (1 where a position has that target; without both, none has).
        ``has_policy[B]`` is 1 where ``policy`` is a target (default: every row); the
        other rows' policies are ignored.

        Returns the losses before the update (``loss``, ``policy_loss``,
        ``value_loss``, ``l2``, and ``ownership_loss`` with the head) and the
        ``learning_rate`` it used.
        """
        batch = len(value)
        if has_policy is not None and len(has_policy) != batch:
            raise ValueError(f"has_policy has {len(has_policy)} rows for a batch of {batch}")
        args = [
            tf.constant(np.asarray(planes, np.float32)),
            tf.constant(np.asarray(policy, np.float32)),
            tf.constant(np.asarray(value, np.float32)),
            tf.constant(np.ones(batch, np.float32) if has_policy is None else np.asarray(has_policy, np.float32)),
        ]
        if (ownership is None) != (has_ownership is None):
            raise ValueError("ownership and has_ownership go together")
        if self.has_ownership:
            if ownership is None:
                ownership, has_ownership = np.zeros((batch, self.points), np.float32), np.zeros(batch, np.float32)
            args += [tf.constant(np.asarray(ownership, np.float32)), tf.constant(np.asarray(has_ownership, np.float32))]
        elif ownership is not None:
            raise ValueError("ownership targets for a model without the ownership head")
        out = self._train_step(*args)
        return {name: float(t.numpy()) for name, t in out.items()}

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
        tensors = {name: v.numpy() for name, v in self._variables().items()}
        metadata = {"step": self.step, "extra": dict(extra or {})}
        return pack_tensors(tensors, fmt=CHECKPOINT_FORMAT, version=CHECKPOINT_FORMAT_VERSION, metadata=metadata,
                            checksum=True)

    def restore_from_bytes(self, blob: bytes) -> dict:
        """Restore a ``checkpoint_to_bytes`` blob (all checked before anything changes);
        returns its ``extra``. Raises ``WeightsError`` when it does not fit."""
        tensors, metadata = unpack_tensors(blob, fmt=CHECKPOINT_FORMAT, versions=_CHECKPOINT_VERSIONS)
        assign_checked(self._variables(), tensors)
        extra = metadata.get("extra", {})
        return extra if isinstance(extra, dict) else {}
