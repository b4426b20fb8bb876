"""A Keras model's inference call compiled the way its backend compiles: a
``tf.function`` (with XLA when asked) on TensorFlow, ``jax.jit`` over the model's
stateless call on JAX, and on PyTorch an eager call without autograd
(``torch.compile`` of a Keras functional model recompiles at every layer on torch
2.13: its guards fail on Keras's call context). Each takes and returns numpy arrays; the caller
(``CompiledModel``) pads, buckets and splits.

A JAX function is compiled once per input shape, always: ``needs_fixed_shapes`` tells
the caller to pad batches to a few sizes there, as it does for XLA on TensorFlow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

from tengen.engine.backend import backend

__all__ = ["InferenceCall", "compile_inference", "needs_fixed_shapes"]

#: planes in, the outputs as numpy arrays out
InferenceCall = Callable[[np.ndarray], tuple[np.ndarray, ...]]


def needs_fixed_shapes(jit_compile: bool) -> bool:
    """Whether a compiled call of this backend builds one program per batch size
    (then batches are padded to a few bucket sizes)."""
    which = backend()
    return which == "jax" or (jit_compile and which == "tensorflow")


def compile_inference(model: keras.Model, head: Callable[[Any], tuple], *, input_shape: Sequence[int],
                      jit_compile: bool, any_batch: bool, traced: Callable[[int | None], None]) -> InferenceCall:
    """``planes -> head(model(planes))`` as numpy arrays. ``head`` maps the model's
    outputs to the tensors wanted (in ``keras.ops``); ``traced(batch)`` is called each
    time a program is built (batch None: one for every size); ``any_batch`` asks for one
    program for all batch sizes where the backend can (TensorFlow without XLA)."""
    which = backend()
    if which == "jax":
        return _jax_call(model, head, traced)
    if which == "torch":
        return _torch_call(model, head, traced)
    return _tensorflow_call(model, head, input_shape=input_shape, jit_compile=jit_compile, any_batch=any_batch,
                            traced=traced)


class _BucketTracesAreExpected(logging.Filter):
    """TensorFlow warns when one Python function traced five times within its last few
    hundred calls, counting the traces of every ``tf.function`` made from it in the
    process. A CompiledModel traces once per bucket by design, and a process holds
    several (self-play's, the two gating sides'): the warning was noise on a training
    run's terminal. Only that warning about our own function is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("triggered tf.function retracing" in message and "_tensorflow_call" in message)


_FILTER = _BucketTracesAreExpected()


def _tensorflow_call(model: keras.Model, head: Callable[[Any], tuple], *, input_shape: Sequence[int],
                     jit_compile: bool, any_batch: bool, traced: Callable[[int | None], None]) -> InferenceCall:
    import tensorflow as tf

    if _FILTER not in tf.get_logger().filters:
        tf.get_logger().addFilter(_FILTER)

    def forward(planes_nhwc):
        traced(planes_nhwc.shape[0])  # a Python side effect: runs while tracing only
        return head(model(planes_nhwc, training=False))

    signature = [tf.TensorSpec([None, *input_shape], tf.float32)] if any_batch else None
    function = tf.function(forward, jit_compile=jit_compile, reduce_retracing=False, input_signature=signature)
    return lambda planes: tuple(out.numpy() for out in function(tf.constant(planes)))


def _jax_call(model: keras.Model, head: Callable[[Any], tuple],
              traced: Callable[[int | None], None]) -> InferenceCall:
    import jax

    def forward(trainable, non_trainable, planes_nhwc):
        traced(planes_nhwc.shape[0])
        outputs, _ = model.stateless_call(trainable, non_trainable, planes_nhwc, training=False)
        return head(outputs)

    function = jax.jit(forward)

    def call(planes: np.ndarray) -> tuple[np.ndarray, ...]:
        # the variables' current values, read at each call: a weights swap (assign)
        # replaces them without a recompile
        outputs = function([v.value for v in model.trainable_variables],
                           [v.value for v in model.non_trainable_variables], planes)
        return tuple(np.asarray(out) for out in outputs)

    return call


def _torch_call(model: keras.Model, head: Callable[[Any], tuple],
                traced: Callable[[int | None], None]) -> InferenceCall:
    import torch

    traced(None)  # eager: one "program" for every batch size

    def call(planes: np.ndarray) -> tuple[np.ndarray, ...]:
        with torch.inference_mode():
            outputs = head(model(keras.ops.convert_to_tensor(planes), training=False))
        return tuple(keras.ops.convert_to_numpy(out) for out in outputs)

    return call
