"""The AlphaZero dual residual network, its compiled inference call and its weights blob.

Three parts, all pure (numpy and Keras 3 on any of its backends: engine/backend.py):

- ``build_network``: the AlphaGo Zero / AlphaZero tower (Silver et al. 2017, 2018):
  a 3x3 convolution stem, ``blocks`` residual blocks, a policy head giving move
  LOGITS ``[B, A]`` and a value head giving ``tanh`` values ``[B]``; optionally
  (``ownership=True``, Go) KataGo's ownership head (Wu 2019, "Accelerating
  Self-Play Learning in Go"), ``tanh`` owners ``[B, H*W]`` of every point from the
  mover's view, an auxiliary target that also speeds learning; and optionally
  (``opponent_policy=True``, any game) KataGo's opponent-policy head: LOGITS
  ``[B, A]`` of the opponent's reply, an auxiliary target that only the learner reads;
  and optionally (``score=True``, Go) KataGo's score head: the final score difference
  from the mover's view as a mean and a spread ``[B, 2]`` (scoreMean, scoreStdev).
- ``CompiledModel``: the one inference entry point (an ``Evaluator``). Where the
  backend compiles one program per shape (XLA, JAX) it pads every batch to one of a few
  fixed bucket sizes, so that a new batch size never triggers a retrace (a retrace
  costs seconds; XLA recompiles more). The compiled call itself is
  engine/compiled_call.py's, one per backend.
- The weights blob: safetensors (never pickle) with a format tag and version in its
  metadata, validated name by name and shape by shape before anything is assigned.
  ``pack_tensors`` / ``unpack_tensors`` / ``assign_checked`` are the shared pieces that
  the learner's checkpoints reuse.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np
import safetensors.numpy

from tengen.engine.backend import gpu_available, mixed_precision_policy
from tengen.engine.compiled_call import compile_inference, needs_fixed_shapes

__all__ = [
    "WEIGHTS_FORMAT",
    "WEIGHTS_FORMAT_VERSION",
    "DEFAULT_BUCKETS",
    "OWNERSHIP_CHANNELS",
    "WeightsError",
    "build_network",
    "has_ownership",
    "has_opponent_policy",
    "has_score",
    "ownership_output",
    "opponent_policy_output",
    "score_output",
    "score_scale",
    "weights_have_ownership",
    "weights_have_opponent_policy",
    "weights_have_score",
    "weights_input_planes",
    "weights_global_pooling_every",
    "CompiledModel",
    "weights_to_bytes",
    "weights_from_bytes",
    "blob_sha256",
    "save_weights_file",
    "write_atomically",
    "load_weights_file",
    "model_variables",
    "variable_array",
    "pack_tensors",
    "unpack_tensors",
    "assign_checked",
]

WEIGHTS_FORMAT = "tengen-weights"
WEIGHTS_FORMAT_VERSION = "1"
#: batch sizes the inference call is compiled for; anything else is padded up to one
DEFAULT_BUCKETS = (1, 8, 32, 128, 256, 512, 1024)
#: the ownership head's hidden 1x1 convolution (KataGo's value-head trunk, c_v1, is 32
#: wide in its small nets): a few thousand weights, small beside any tower
OWNERSHIP_CHANNELS = 32
#: every layer of the ownership head is named with this prefix, so that a blob's
#: tensors say whether it has the head
_OWNERSHIP_PREFIX = "ownership_"
#: the same for the opponent-policy head
_OPPONENT_POLICY_PREFIX = "opponent_policy_"
#: and for the score head
_SCORE_PREFIX = "score_"
#: the score head's hidden 1x1 convolution, as wide as the ownership head's
SCORE_CHANNELS = 32
#: the score head's hidden dense layer on the pooled features
SCORE_HIDDEN = 32
#: the least spread (scoreStdev) the head gives, in points: a final score is a whole
#: number plus komi's fraction, so half a point is as sure as a prediction gets, and
#: the likelihood's log(stdev) stays finite
MIN_SCORE_STDEV = 0.5
#: each optional head's output layer, by which a model says whether it has the head
#: (its outputs are policy, value, then those of these it has, in this order)
_OWNERSHIP_OUTPUT = "ownership_flatten"
_OPPONENT_POLICY_OUTPUT = "opponent_policy_logits"
_SCORE_OUTPUT = "score_belief"


class WeightsError(ValueError):
    """A weights blob or checkpoint that cannot be loaded into this model (bad bytes,
    unknown format or version, missing or extra tensors, wrong shapes)."""


# -- the network -------------------------------------------------------------------------


def score_scale(height: int, width: int) -> float:
    """The score head's unit in points: a quarter of the board's points (20.25 on 9x9,
    about KataGo's fixed 20 for its 19x19-sized outputs), so that a raw output near 1
    means a lead of a sizeable part of any board."""
    return height * width / 4


@keras.saving.register_keras_serializable(package="tengen")
class ScoreBelief(keras.layers.Layer):
    """``raw[B, 2] -> [B, 2]``: (scoreMean, scoreStdev) in points from the score head's
    last dense layer: the mean linear (``scale * raw0``), the spread positive
    (``scale * softplus(raw1) + MIN_SCORE_STDEV``). No weights of its own."""

    def __init__(self, scale: float, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)

    def call(self, raw):
        ops = keras.ops
        raw = ops.cast(raw, "float32")
        mean = raw[:, 0] * self.scale
        stdev = ops.softplus(raw[:, 1]) * self.scale + MIN_SCORE_STDEV
        return ops.stack([mean, stdev], axis=-1)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale}


def build_network(
    *,
    input_shape: Sequence[int],
    num_actions: int,
    blocks: int,
    filters: int,
    l2: float = 1e-4,
    value_hidden: int = 64,
    ownership: bool = False,
    global_pooling_every: int = 0,
    opponent_policy: bool = False,
    score: bool = False,
    mixed_precision: bool = False,
) -> keras.Model:
    """The AlphaZero dual residual network.

    Input ``planes_nhwc[B, H, W, C]`` float32; outputs the tuple
    ``(policy_logits[B, A], value[B])``, both float32 whatever the precision, and
    with ``ownership`` a third, ``ownership[B, H*W]`` float32 in [-1, 1]: the expected
    final owner of each point (row-major) from the mover's view, +1 the mover's.
    The head reads the trunk: 1x1 convolution, batch norm, ReLU, 1x1 convolution
    to one plane, tanh (KataGo's ownership head, without its global pooling).
    With ``opponent_policy`` one more output follows the others:
    ``opponent_policy_logits[B, A]``, the move the opponent will reply with, from the
    policy head's features (KataGo's auxiliary opponent-policy target, Wu 2019,
    "Auxiliary Policy Targets": a regulariser that speeds early learning; the search
    never reads it). With ``score`` (Go) the last output is ``score[B, 2]`` float32:
    the final score difference from the mover's view (its area minus the opponent's,
    komi counted: > 0 the mover wins) as KataGo's scoreMean and scoreStdev, in points
    (``ScoreBelief``). The head reads the trunk as the ownership head does (1x1
    convolution, batch norm, ReLU) then pools it over the board (mean and max, as
    KataGo's value head does) into a small dense layer: a score is a sum over the
    board, which a convolution alone does not see.

    With ``global_pooling_every`` = k > 0, every k-th residual block (the k-th, the
    2k-th...) has KataGo's global pooling bias: a third of ``filters`` channels from
    a 3x3 convolution of the block's input, batch-normed and rectified, are averaged
    and maxed over the board, and a dense layer turns those into a bias per channel
    added to the block's first convolution. A convolution sees a few points around
    each point; the bias carries the whole board into every point (who is ahead, where
    a ko threat is), at the cost of a small dense layer (KataGo: Wu 2019, section 4.1).

    Every layer has an explicit name (``block3_conv2``...) so that variable paths, the
    keys of the weights blob, are the same for every network built with these
    arguments, in any process. ``l2`` is the paper's ``c`` in ``c * ||theta||^2``: an
    L2 regulariser on every kernel, summed in ``model.losses``. ``mixed_precision``
    sets the backend's mixed policy (``mixed_precision_policy``: float16 maths on
    TensorFlow, bfloat16 on JAX and PyTorch, float32 variables) on these layers only,
    never the global policy; the output layers stay float32 for a stable softmax/tanh.
    """
    height, width, channels = (int(n) for n in input_shape)
    dtype: Any = keras.DTypePolicy(mixed_precision_policy()) if mixed_precision else None
    reg = keras.regularizers.L2(l2) if l2 else None

    def conv(x, n_filters: int, kernel: int, name: str):
        # no bias: the batch norm that follows has its own shift (beta)
        return keras.layers.Conv2D(
            n_filters, kernel, padding="same", use_bias=False, kernel_regularizer=reg, dtype=dtype, name=name
        )(x)

    def bn(x, name: str):
        return keras.layers.BatchNormalization(dtype=dtype, name=name)(x)

    def relu(x, name: str):
        return keras.layers.ReLU(dtype=dtype, name=name)(x)

    planes = keras.Input(shape=(height, width, channels), dtype="float32", name="planes")
    x = relu(bn(conv(planes, filters, 3, "stem_conv"), "stem_bn"), "stem_relu")
    def global_bias(x, name: str):
        pool_channels = max(filters // 3, 1)
        g = relu(bn(conv(x, pool_channels, 3, f"{name}_gpool_conv"), f"{name}_gpool_bn"), f"{name}_gpool_relu")
        mean = keras.layers.GlobalAveragePooling2D(dtype=dtype, name=f"{name}_gpool_mean")(g)
        high = keras.layers.GlobalMaxPooling2D(dtype=dtype, name=f"{name}_gpool_max")(g)
        pooled = keras.layers.Concatenate(dtype=dtype, name=f"{name}_gpool_both")([mean, high])
        bias = keras.layers.Dense(filters, use_bias=False, kernel_regularizer=reg, dtype=dtype,
                                  name=f"{name}_gpool_dense")(pooled)
        return keras.layers.Reshape((1, 1, filters), dtype=dtype, name=f"{name}_gpool_bias")(bias)

    for b in range(blocks):
        y = conv(x, filters, 3, f"block{b}_conv1")
        if global_pooling_every and (b + 1) % global_pooling_every == 0:
            y = keras.layers.Add(dtype=dtype, name=f"block{b}_gpool_add")([y, global_bias(x, f"block{b}")])
        y = relu(bn(y, f"block{b}_bn1"), f"block{b}_relu1")
        y = bn(conv(y, filters, 3, f"block{b}_conv2"), f"block{b}_bn2")
        x = relu(keras.layers.Add(dtype=dtype, name=f"block{b}_add")([x, y]), f"block{b}_relu2")

    p = relu(bn(conv(x, 2, 1, "policy_conv"), "policy_bn"), "policy_relu")
    p = keras.layers.Flatten(dtype=dtype, name="policy_flatten")(p)
    policy_logits = keras.layers.Dense(num_actions, kernel_regularizer=reg, dtype="float32", name="policy_logits")(p)

    v = relu(bn(conv(x, 1, 1, "value_conv"), "value_bn"), "value_relu")
    v = keras.layers.Flatten(dtype=dtype, name="value_flatten")(v)
    v = keras.layers.Dense(value_hidden, activation="relu", kernel_regularizer=reg, dtype=dtype, name="value_hidden")(v)
    v = keras.layers.Dense(1, activation="tanh", kernel_regularizer=reg, dtype="float32", name="value")(v)
    value = keras.layers.Reshape((), dtype="float32", name="value_squeeze")(v)
    outputs = [policy_logits, value]
    if ownership:
        o = relu(bn(conv(x, OWNERSHIP_CHANNELS, 1, "ownership_conv"), "ownership_bn"), "ownership_relu")
        o = keras.layers.Conv2D(1, 1, padding="same", activation="tanh", kernel_regularizer=reg, dtype="float32",
                                name="ownership_out")(o)
        outputs.append(keras.layers.Reshape((height * width,), dtype="float32", name=_OWNERSHIP_OUTPUT)(o))
    if opponent_policy:
        # KataGo's is a second channel of its policy head's last convolution; here the
        # policy's last layer is a dense one (an action need not be a point: Connect
        # Four's columns), so its twin is a second dense layer on the same features,
        # the policy head's convolution shared. That costs one more policy-sized dense
        # layer, and only in training: the search's call leaves it out (CompiledModel).
        outputs.append(keras.layers.Dense(num_actions, kernel_regularizer=reg, dtype="float32",
                                          name=_OPPONENT_POLICY_OUTPUT)(p))
    if score:
        s = relu(bn(conv(x, SCORE_CHANNELS, 1, "score_conv"), "score_bn"), "score_relu")
        mean = keras.layers.GlobalAveragePooling2D(dtype=dtype, name="score_mean_pool")(s)
        high = keras.layers.GlobalMaxPooling2D(dtype=dtype, name="score_max_pool")(s)
        s = keras.layers.Concatenate(dtype=dtype, name="score_pooled")([mean, high])
        s = keras.layers.Dense(SCORE_HIDDEN, activation="relu", kernel_regularizer=reg, dtype=dtype,
                               name="score_hidden")(s)
        s = keras.layers.Dense(2, kernel_regularizer=reg, dtype="float32", name="score_out")(s)
        outputs.append(ScoreBelief(score_scale(height, width), dtype="float32", name=_SCORE_OUTPUT)(s))
    return keras.Model(planes, tuple(outputs), name="alphazero")


def has_ownership(model: keras.Model) -> bool:
    """Whether ``model`` (from ``build_network``) has the ownership head."""
    return _OWNERSHIP_OUTPUT in model.output_names


def has_opponent_policy(model: keras.Model) -> bool:
    """Whether ``model`` (from ``build_network``) has the opponent-policy head."""
    return _OPPONENT_POLICY_OUTPUT in model.output_names


def has_score(model: keras.Model) -> bool:
    """Whether ``model`` (from ``build_network``) has the score head."""
    return _SCORE_OUTPUT in model.output_names


def ownership_output(model: keras.Model) -> int:
    """The index of the ownership head's output in ``model``'s outputs."""
    return model.output_names.index(_OWNERSHIP_OUTPUT)


def opponent_policy_output(model: keras.Model) -> int:
    """The index of the opponent-policy head's output in ``model``'s outputs."""
    return model.output_names.index(_OPPONENT_POLICY_OUTPUT)


def score_output(model: keras.Model) -> int:
    """The index of the score head's output in ``model``'s outputs."""
    return model.output_names.index(_SCORE_OUTPUT)


# -- inference ---------------------------------------------------------------------------


class CompiledModel:
    """``evaluate(planes[B, H, W, C]) -> (policy[B, A] probabilities, value[B])``.

    With XLA (``jit_compile`` on TensorFlow, the default when a GPU is visible) and
    always on JAX, every call is padded up to the smallest bucket that holds it
    (batches above the largest bucket are cut into largest-bucket chunks), because XLA
    compiles one program per shape: the compiled function is traced at most once per
    bucket. Pad rows are zeros; they cost compute but batch norm in inference mode keeps
    rows independent, so they never change the real rows' answers. Without XLA (a CPU,
    by default) TensorFlow's kernels, and PyTorch's, take any batch, so the function is
    traced once, for all batch sizes (``buckets`` is empty), and nothing is padded:
    padding a CPU's batches to the buckets cost a quarter of its throughput on
    self-play's batch sizes (measured 2026-12-05 on 2 cores, Connect Four's 4x32 net,
    batches of 300-1,024 rows: 13,700 rows/s padded, 17,200 not). ``trace_count``
    counts the traces and ``traced_batch_sizes`` lists the shapes they were traced
    for (None: any).

    A model with the ownership head answers ``ownership(planes) -> float32[B, H*W]``
    too, a second function traced only when called (by GTP and analysis); the
    ``evaluate`` call above never computes the head, so self-play pays nothing for it.
    A model with the score head answers ``score(planes) -> float32[B, 2]`` (scoreMean,
    scoreStdev) likewise, and ``with_score(planes) -> (policy, value, score_mean)``,
    the evaluation of a search with KataGo's score utility (a ``ScoredEvaluator``).

    ``jit_compile`` (XLA on TensorFlow; JAX always compiles, PyTorch runs eager)
    defaults to on when a GPU is visible and off on CPU, where it gains
    little and not everywhere: measured on 2 cores (2026-12-05), 1.07-1.13x at batches
    128-1024 for Connect Four's 4x32 net, 0.91-1.02x for a 5x64 one at 256-1024 (the
    Trainer's step, by contrast, gains 1.27x on Connect Four's net). Weights can be
    swapped in place
    (``load_weights_blob``, ``set_weights_from``) without a retrace: the function reads
    the same variables. Calls may run on several threads at once (the model server
    does); a weights swap must not overlap them.
    """

    def __init__(
        self,
        model: keras.Model,
        *,
        buckets: Sequence[int] | None = None,
        jit_compile: bool | None = None,
    ):
        self.jit_compile = gpu_available() if jit_compile is None else bool(jit_compile)
        if buckets is None:
            buckets = DEFAULT_BUCKETS if needs_fixed_shapes(self.jit_compile) else ()
        if any(int(b) < 1 for b in buckets):
            raise ValueError(f"buckets must be positive batch sizes, got {buckets!r}")
        self.model = model
        #: the padded batch sizes (empty: any batch runs as it is, one trace)
        self.buckets = tuple(sorted({int(b) for b in buckets}))
        self.input_shape = tuple(int(n) for n in model.input_shape[1:])
        self.has_ownership = has_ownership(model)
        self.has_score = has_score(model)
        # the two evaluation outputs alone (an auxiliary head is never computed for a
        # search): the layers (and variables) are the model's
        two_heads = keras.Model(model.inputs, model.outputs[:2]) if len(model.outputs) > 2 else model
        self.trace_count = 0
        #: batch sizes the function was traced for, in order (None: any)
        self.traced_batch_sizes: list[int | None] = []
        #: how many times the compiled function ran (a call of B > largest bucket runs several)
        self.calls = 0
        #: the positions evaluated (pad rows left out), and the seconds spent inside the
        #: compiled function with its numpy copies: a run reports its mean batch and how
        #: busy the model kept (calls on several threads at once add up their seconds)
        self.rows = 0
        self.seconds = 0.0

        def traced(batch: int | None) -> None:
            self.trace_count += 1
            self.traced_batch_sizes.append(batch)

        def probabilities(outputs):
            logits, value = outputs
            return (keras.ops.softmax(keras.ops.cast(logits, "float32"), axis=-1),
                    keras.ops.cast(value, "float32"))

        def last_head(outputs):
            return (keras.ops.cast(outputs[-1], "float32"),)

        self._forward = compile_inference(two_heads, probabilities, traced=traced, input_shape=self.input_shape,
                                          jit_compile=self.jit_compile, any_batch=not self.buckets)
        # traced only when first called (by GTP and analysis): self-play never is;
        # each computes the two evaluation heads and its own, last
        def with_head(index: int) -> keras.Model:
            return keras.Model(model.inputs, (*model.outputs[:2], model.outputs[index]))

        self._owners = compile_inference(with_head(ownership_output(model)) if self.has_ownership else model, last_head,
                                         traced=lambda batch: None, input_shape=self.input_shape,
                                         jit_compile=self.jit_compile, any_batch=not self.buckets)
        def scored(outputs):
            policy, value = probabilities(outputs[:2])
            return policy, value, keras.ops.cast(outputs[-1], "float32")[:, 0]

        self._score = self._scored = None
        if self.has_score:
            self._score = compile_inference(with_head(score_output(model)), last_head, traced=lambda batch: None,
                                            input_shape=self.input_shape, jit_compile=self.jit_compile,
                                            any_batch=not self.buckets)
            self._scored = compile_inference(with_head(score_output(model)), scored, traced=lambda batch: None,
                                             input_shape=self.input_shape, jit_compile=self.jit_compile,
                                             any_batch=not self.buckets)

    def bucket_for(self, batch: int) -> int:
        """The padded size a batch of ``batch`` positions runs at (for one chunk)."""
        if not self.buckets:
            return batch
        for b in self.buckets:
            if batch <= b:
                return b
        return self.buckets[-1]

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``planes[B, H, W, C]`` (float32 or uint8) -> ``(policy float32[B, A], value float32[B])``."""
        policy, value = self._run(self._forward, planes, [(self.model.output_shape[0][-1],), ()])
        return policy, value

    def ownership(self, planes: np.ndarray) -> np.ndarray:
        """``planes[B, H, W, C]`` -> ``ownership float32[B, H*W]`` in [-1, 1], +1 for the
        mover's points; ValueError for a model without the ownership head."""
        if not self.has_ownership:
            raise ValueError("this model has no ownership head (built with network.ownership false)")
        (owners,) = self._run(self._owners, planes, [(self.input_shape[0] * self.input_shape[1],)])
        return owners

    def score(self, planes: np.ndarray) -> np.ndarray:
        """``planes[B, H, W, C]`` -> ``float32[B, 2]``: (scoreMean, scoreStdev) in points,
        the final score difference from the mover's view (> 0 the mover leads);
        ValueError for a model without the score head."""
        if self._score is None:
            raise ValueError("this model has no score head (built with network.score false)")
        (belief,) = self._run(self._score, planes, [(2,)])
        return belief

    def with_score(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``planes[B, H, W, C]`` -> ``(policy float32[B, A], value float32[B], score_mean
        float32[B])``: the evaluation and the score head's mean in one call (the search's,
        with ``SearchSettings.score_utility``); ValueError for a model without the head."""
        if self._scored is None:
            raise ValueError("this model has no score head (built with network.score false)")
        policy, value, mean = self._run(self._scored, planes, [(self.model.output_shape[0][-1],), (), ()])
        return policy, value, mean

    def _run(self, function: Any, planes: np.ndarray, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
        """``function``'s outputs (``shapes``: each one's per-row shape) over ``planes``,
        padded to buckets and cut into largest-bucket chunks (without buckets: one call)."""
        planes = np.asarray(planes)
        if planes.ndim != 4 or tuple(planes.shape[1:]) != self.input_shape:
            raise ValueError(f"planes must be [B, {', '.join(map(str, self.input_shape))}], got {planes.shape}")
        total = planes.shape[0]
        if total == 0:
            return [np.zeros((0, *shape), np.float32) for shape in shapes]
        largest = self.buckets[-1] if self.buckets else total
        parts: list[list[np.ndarray]] = [[] for _ in shapes]
        for start in range(0, total, largest):
            chunk = planes[start : start + largest]
            n = chunk.shape[0]
            size = self.bucket_for(n)
            if n == size and chunk.dtype == np.float32:
                padded = chunk
            else:
                padded = np.zeros((size, *self.input_shape), np.float32)
                padded[:n] = chunk
            called = time.perf_counter()
            outputs = function(padded)
            self.seconds += time.perf_counter() - called
            self.calls += 1
            self.rows += n
            for part, out in zip(parts, outputs, strict=True):
                part.append(out[:n])
        return [part[0] if len(part) == 1 else np.concatenate(part) for part in parts]

    def load_weights_blob(self, blob: bytes) -> dict:
        """Swap in the weights of a blob (validated first); returns its metadata."""
        return weights_from_bytes(self.model, blob)

    def set_weights_from(self, source: keras.Model | bytes) -> None:
        """Hot-swap from another model of the same architecture or from a blob."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.load_weights_blob(bytes(source))
            return
        tensors = {name: variable_array(v) for name, v in model_variables(source).items()}
        assign_checked(model_variables(self.model), tensors)


# -- the weights blob --------------------------------------------------------------------


def model_variables(model: keras.Model) -> dict[str, Any]:
    """Every weight of ``model`` (trainable and batch-norm statistics) by its path."""
    variables: dict[str, Any] = {}
    for v in model.weights:
        if v.path in variables:
            raise WeightsError(f"two weights share the path {v.path!r}; name the layers")
        variables[v.path] = v
    return variables


def variable_array(variable: Any) -> np.ndarray:
    """A copy of a Keras variable's value as numpy, on any backend (a PyTorch
    parameter needs its gradient link cut first)."""
    return np.array(keras.ops.convert_to_numpy(keras.ops.stop_gradient(variable.value)))


#: the header field that holds a checksummed blob's data sha256 (``pack_tensors``)
DATA_SHA256 = "data_sha256"


def pack_tensors(tensors: Mapping[str, np.ndarray], *, fmt: str, version: str, metadata: Mapping,
                 checksum: bool = False) -> bytes:
    """A safetensors blob of ``tensors`` tagged ``fmt``/``version`` with JSON ``metadata``;
    ``checksum``: the header also holds the sha256 of the data section, which
    ``unpack_tensors`` checks (a flipped or lost byte of a stored blob is found on read).

    The header is rewritten with sorted keys: safetensors writes its metadata map in
    hash order, which differs from call to call, and a blob's sha256 must depend on
    its content only.
    """
    header_meta = {
        "format": fmt,
        "format_version": version,
        "metadata": json.dumps(dict(metadata), sort_keys=True),
    }
    blob = safetensors.numpy.save({name: np.asarray(t, order="C") for name, t in tensors.items()}, metadata=header_meta)
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + length])
    data = blob[8 + length :]
    if checksum:
        header["__metadata__"][DATA_SHA256] = hashlib.sha256(data).hexdigest()
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors aligns the data section to 8 bytes
    return struct.pack("<Q", len(text)) + text + data


def _read_header(blob: bytes) -> dict:
    if len(blob) < 8:
        raise WeightsError(f"not a weights blob: {len(blob)} bytes")
    (length,) = struct.unpack("<Q", blob[:8])
    if length > len(blob) - 8:
        raise WeightsError(f"truncated blob: header of {length} bytes in a {len(blob)}-byte blob")
    try:
        header = json.loads(blob[8 : 8 + length])
    except ValueError as err:
        raise WeightsError(f"not a weights blob: unreadable header ({err})") from None
    if not isinstance(header, dict):
        raise WeightsError("not a weights blob: header is not a JSON object")
    return header


def unpack_tensors(blob: bytes, *, fmt: str, versions: Sequence[str]) -> tuple[dict[str, np.ndarray], dict]:
    """The tensors and JSON metadata of a ``pack_tensors`` blob, after checking its tag.

    Raises ``WeightsError`` for bytes that are not such a blob, another format, or a
    version not in ``versions``.
    """
    blob = bytes(blob)
    header = _read_header(blob)
    meta = header.get("__metadata__") or {}
    if meta.get("format") != fmt:
        raise WeightsError(f"not a {fmt} blob (format tag {meta.get('format')!r})")
    version = meta.get("format_version")
    if version not in versions:
        raise WeightsError(f"unknown {fmt} format_version {version!r}; this reader knows {', '.join(versions)}")
    expected = meta.get(DATA_SHA256)
    if expected is not None:
        (length,) = struct.unpack("<Q", blob[:8])
        actual = hashlib.sha256(blob[8 + length :]).hexdigest()
        if actual != expected:
            raise WeightsError(f"corrupt {fmt} blob: its data's sha256 {actual[:12]}... is not the "
                               f"{expected[:12]}... it was written with (truncated or changed)")
    try:
        metadata = json.loads(meta.get("metadata", "{}"))
        tensors = safetensors.numpy.load(blob)
    except Exception as err:  # safetensors raises its own error type for every bad layout
        raise WeightsError(f"corrupt {fmt} blob: {err}") from None
    if not isinstance(metadata, dict):
        raise WeightsError(f"corrupt {fmt} blob: metadata is not a JSON object")
    return tensors, metadata


def assign_checked(variables: Mapping[str, Any], tensors: Mapping[str, np.ndarray]) -> None:
    """Assign ``tensors`` to ``variables`` by name, all or nothing.

    Every name must be on both sides with the same shape and dtype; the first
    mismatch raises ``WeightsError`` naming the tensor (and both shapes) before any
    variable has changed.
    """
    missing = [name for name in variables if name not in tensors]
    extra = [name for name in tensors if name not in variables]
    # Whether a head is there is the first thing to tell: it also shifts the
    # optimizer's variables of a learner's checkpoint, which would be named instead.
    for prefix, what, key in _OPTIONAL_HEADS:
        blob_has, model_has = (any(_in_head(name, prefix) for name in names) for names in (tensors, variables))
        if model_has and not blob_has:
            raise WeightsError(f"the blob has no {what} head (weights from before it, or trained with "
                               f"{key} false): build the network with {key} false to load it")
        if blob_has and not model_has:
            raise WeightsError(f"the blob has an {what} head that this network lacks: build it with "
                               f"{key} true to load the blob")
    if missing:
        raise WeightsError(f"blob lacks tensor {missing[0]!r} ({len(missing)} missing)")
    if extra:
        raise WeightsError(f"blob has tensor {extra[0]!r} that this model lacks ({len(extra)} extra)")
    for name, v in variables.items():
        t = tensors[name]
        if tuple(t.shape) != tuple(v.shape):
            if name.split("/")[-2:] == ["stem_conv", "kernel"] and t.shape[2] != v.shape[2]:
                # the first layer reads the input planes: the game's encoding differs
                raise WeightsError(
                    f"the weights read {t.shape[2]} input planes and this config's game gives {v.shape[2]}: "
                    "it encodes positions otherwise (Go: two planes a position of game.history_length, Go's feature "
                    "planes with game.features, the colour to move); use the config the model was trained with")
            raise WeightsError(
                f"tensor {name!r} has shape {tuple(t.shape)} in the blob but {tuple(v.shape)} in the model"
            )
        if np.dtype(t.dtype) != np.dtype(v.dtype):
            raise WeightsError(f"tensor {name!r} is {t.dtype} in the blob but {v.dtype} in the model")
    for name, v in variables.items():
        v.assign(tensors[name])


#: the optional heads: their layers' prefix, their name and the config key that asks for them
_OPTIONAL_HEADS = (
    (_OWNERSHIP_PREFIX, "ownership", "network.ownership"),
    (_OPPONENT_POLICY_PREFIX, "opponent-policy", "network.opponent_policy"),
    (_SCORE_PREFIX, "score", "network.score"),
)


def _in_head(name: str, prefix: str) -> bool:
    # a model path ("ownership_conv/kernel") or a checkpoint's ("model/ownership_conv/kernel")
    return any(part.startswith(prefix) for part in name.split("/"))


def _blob_has_head(blob: bytes, prefix: str) -> bool:
    header = _read_header(bytes(blob))
    return any(_in_head(name, prefix) for name in header if name != "__metadata__")


def weights_have_ownership(blob: bytes) -> bool:
    """Whether a weights blob holds an ownership head (read from its header alone)."""
    return _blob_has_head(blob, _OWNERSHIP_PREFIX)


def weights_have_opponent_policy(blob: bytes) -> bool:
    """Whether a weights blob holds an opponent-policy head (read from its header alone)."""
    return _blob_has_head(blob, _OPPONENT_POLICY_PREFIX)


def weights_have_score(blob: bytes) -> bool:
    """Whether a weights blob holds a score head (read from its header alone)."""
    return _blob_has_head(blob, _SCORE_PREFIX)


def weights_input_planes(blob: bytes) -> int | None:
    """How many input planes a weights blob's network reads (its first layer's kernel,
    from the header alone), or None when it has no stem."""
    header = _read_header(bytes(blob))
    for name, entry in header.items():
        if name != "__metadata__" and name.split("/")[-2:] == ["stem_conv", "kernel"]:
            return int(entry["shape"][2])
    return None


def weights_global_pooling_every(blob: bytes, blocks: int) -> int | None:
    """The ``global_pooling_every`` that builds a net of ``blocks`` residual blocks with
    the global pooling a weights blob has (0 for none, from the header alone), or None
    when no setting gives its blocks (another depth, another layout)."""
    pooled = {int(m.group(1)) for name in _read_header(bytes(blob))
              if (m := re.search(r"(?:^|/)block(\d+)_gpool_", name))}
    if not pooled:
        return 0
    for every in range(1, blocks + 1):
        if pooled == {b for b in range(blocks) if (b + 1) % every == 0}:
            return every
    return None


def weights_metadata(blob: bytes) -> dict:
    """The JSON metadata of a weights blob (the learner's ``version`` and ``step``),
    read from its header alone; {} when it has none."""
    meta = _read_header(bytes(blob)).get("__metadata__") or {}
    try:
        metadata = json.loads(meta.get("metadata", "{}"))
    except ValueError:
        raise WeightsError("corrupt weights blob: its metadata is not JSON") from None
    return metadata if isinstance(metadata, dict) else {}


def weights_to_bytes(model: keras.Model, *, metadata: Mapping) -> bytes:
    """Every weight of ``model`` as a tengen-weights blob, ``metadata`` as JSON in it."""
    tensors = {name: variable_array(v) for name, v in model_variables(model).items()}
    return pack_tensors(tensors, fmt=WEIGHTS_FORMAT, version=WEIGHTS_FORMAT_VERSION, metadata=metadata)


def weights_from_bytes(model: keras.Model, blob: bytes) -> dict:
    """Load a tengen-weights blob into ``model`` (validated first); returns its metadata."""
    tensors, metadata = unpack_tensors(blob, fmt=WEIGHTS_FORMAT, versions=(WEIGHTS_FORMAT_VERSION,))
    assign_checked(model_variables(model), tensors)
    return metadata


def blob_sha256(blob: bytes) -> str:
    """Hex sha256 of a blob: the identity servers check before a hot swap."""
    return hashlib.sha256(blob).hexdigest()


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``,
    so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_weights_file(model: keras.Model, path: str | os.PathLike, *, metadata: Mapping) -> str:
    """Write ``model``'s weights blob to ``path`` atomically; returns its sha256."""
    blob = weights_to_bytes(model, metadata=metadata)
    write_atomically(path, blob)
    return blob_sha256(blob)


def load_weights_file(model: keras.Model, path: str | os.PathLike) -> dict:
    """Load a weights file written by ``save_weights_file``; returns its metadata."""
    return weights_from_bytes(model, Path(path).read_bytes())
