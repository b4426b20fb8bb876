"""One optimizer update of a Keras model, the way its backend takes gradients: a
``tf.function`` around a ``GradientTape`` on TensorFlow (XLA when asked), a
``jax.jit`` of the model's and the optimizer's stateless calls on JAX, and autograd on
PyTorch (eager: ``torch.compile`` of a Keras functional model recompiles at every layer
on torch 2.13, its guards failing on Keras's call context). The loss itself is
the caller's, written once in ``keras.ops`` (learner/trainer.py).

Each takes the batch as numpy arrays and returns the loss parts as floats; the model's
and the optimizer's variables hold the new values afterwards on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

from tengen.engine.backend import backend

__all__ = ["LossFunction", "TrainStep", "compile_train_step", "learning_rate_now"]

#: (model outputs, the model's regularisation losses, *targets) -> (loss to minimise, parts to report)
LossFunction = Callable[..., tuple[Any, dict[str, Any]]]
#: the batch (planes, then the targets) -> the loss parts as floats
TrainStep = Callable[[Sequence[np.ndarray]], dict[str, float]]


def compile_train_step(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss: LossFunction, *,
                       jit_compile: bool, traced: Callable[[], None]) -> TrainStep:
    """``batch -> parts`` after one update of ``model`` by ``optimizer`` on ``loss``.
    ``traced()`` is called each time a program is built (on PyTorch: never; its
    ``jit_compile`` is ignored)."""
    which = backend()
    if which == "jax":
        return _jax_step(model, optimizer, loss, traced)
    if which == "torch":
        return _torch_step(model, optimizer, loss)
    return _tensorflow_step(model, optimizer, loss, jit_compile, traced)


def _floats(parts: dict[str, Any]) -> dict[str, float]:
    return {name: float(keras.ops.convert_to_numpy(value)) for name, value in parts.items()}


def learning_rate_now(optimizer: keras.optimizers.Optimizer) -> float:
    """The rate the optimizer's next update uses (a schedule's, at its step)."""
    return float(keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(optimizer.learning_rate)))


def _tensorflow_step(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss: LossFunction,
                     jit_compile: bool, traced: Callable[[], None]) -> TrainStep:
    import tensorflow as tf

    variables = model.trainable_variables

    def step(planes, *targets):
        traced()  # a Python side effect: runs while tracing only
        with tf.GradientTape() as tape:
            total, parts = loss(model(planes, training=True), model.losses, *targets)
            scaled = optimizer.scale_loss(total)
        grads = tape.gradient(scaled, variables)
        parts["learning_rate"] = tf.cast(optimizer.learning_rate, tf.float32)  # before the step moves on
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return parts

    # any batch size, one trace: every input is [None, ...]
    function: Any = None

    def call(batch: Sequence[np.ndarray]) -> dict[str, float]:
        nonlocal function
        if function is None:
            signature = [tf.TensorSpec([None, *np.shape(x)[1:]], tf.float32) for x in batch]
            function = tf.function(step, input_signature=signature, jit_compile=jit_compile)
        return _floats(function(*(tf.constant(x) for x in batch)))

    return call


def _jax_step(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss: LossFunction,
              traced: Callable[[], None]) -> TrainStep:
    import jax

    def compute(trainable, non_trainable, planes, targets):
        outputs, non_trainable, losses = model.stateless_call(trainable, non_trainable, planes, training=True,
                                                              return_losses=True)
        total, parts = loss(outputs, losses, *targets)
        return total, (parts, non_trainable)

    gradient = jax.value_and_grad(compute, has_aux=True)

    def step(trainable, non_trainable, optimizer_state, planes, targets):
        traced()
        (_, (parts, non_trainable)), grads = gradient(trainable, non_trainable, planes, targets)
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return trainable, non_trainable, optimizer_state, parts

    function = jax.jit(step)

    def call(batch: Sequence[np.ndarray]) -> dict[str, float]:
        learning_rate = learning_rate_now(optimizer)  # before the step moves on
        trainable, non_trainable, optimizer_state, parts = function(
            [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
            [v.value for v in optimizer.variables], batch[0], tuple(batch[1:]))
        for group, values in ((model.trainable_variables, trainable), (model.non_trainable_variables, non_trainable),
                              (optimizer.variables, optimizer_state)):
            for variable, value in zip(group, values, strict=True):
                variable.assign(value)
        return {**_floats(parts), "learning_rate": learning_rate}

    return call


def _torch_step(model: keras.Model, optimizer: keras.optimizers.Optimizer, loss: LossFunction) -> TrainStep:
    import torch

    variables = model.trainable_variables

    def call(batch: Sequence[np.ndarray]) -> dict[str, float]:
        planes, *targets = (keras.ops.convert_to_tensor(x) for x in batch)
        learning_rate = learning_rate_now(optimizer)  # before the step moves on
        total, parts = loss(model(planes, training=True), model.losses, *targets)
        model.zero_grad()
        optimizer.scale_loss(total).backward()
        with torch.no_grad():
            optimizer.apply([v.value.grad for v in variables], variables)
        return {**_floats({name: value.detach() for name, value in parts.items()}), "learning_rate": learning_rate}

    return call
