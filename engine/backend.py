"""Which Keras 3 backend runs the network (TensorFlow, JAX or PyTorch), and the few
device settings that differ between them.

Keras reads ``KERAS_BACKEND`` once, when it is first imported, so the choice is made
before that: ``use_backend`` sets it from the config (``network.backend``), or keeps
the one the environment names, or takes TensorFlow, the project's own dependency. A
process that has already imported Keras on another backend cannot switch: it says so.
Ray's workers get the driver's choice through the job's ``runtime_env``.

The network itself (engine/network.py) is written in Keras layers and ``keras.ops``
and runs on any of the three; only the compiled call and the train step differ, and
they ask ``backend()`` which one they are on.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Literal, get_args

__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "use_backend", "backend", "install_hint",
           "gpu_available", "share_gpu_memory", "share_cpu_threads", "limit_cpu_threads", "mixed_precision_policy"]

Backend = Literal["tensorflow", "jax", "torch"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
DEFAULT_BACKEND: Backend = "tensorflow"


class BackendUnavailable(RuntimeError):
    """A backend that is not installed, unknown, or not the one this process already runs."""


def install_hint(name: str) -> str:
    """The command that installs a backend: tengen-zero's extra of its name."""
    if name == "torch":
        # a bare `torch` from PyPI is the CUDA build, several GB
        return ("pip install 'tengen-zero[torch]' (CPU only: pip install torch "
                "--index-url https://download.pytorch.org/whl/cpu)")
    return f"pip install 'tengen-zero[{name}]'"


def use_backend(name: str | None = None) -> Backend:
    """Make ``name`` (else ``KERAS_BACKEND``, else TensorFlow) the backend of this
    process and of the processes it starts; returns it. Call before Keras is imported.
    ``BackendUnavailable`` for an unknown name, one that is not installed (with the
    command that installs it), or one other than Keras already runs here."""
    keras = sys.modules.get("keras")
    if name is None and keras is not None:
        return keras.backend.backend()  # type: ignore[no-any-return]
    chosen = name or os.environ.get("KERAS_BACKEND") or DEFAULT_BACKEND
    if chosen not in BACKENDS:
        raise BackendUnavailable(f"unknown network backend {chosen!r}; choose one of {', '.join(BACKENDS)}")
    if importlib.util.find_spec(chosen) is None:  # each backend's module is its name
        raise BackendUnavailable(f"the {chosen} backend is not installed: {install_hint(chosen)}")
    if keras is not None and keras.backend.backend() != chosen:
        raise BackendUnavailable(f"this process already runs Keras on {keras.backend.backend()}; the {chosen} "
                                 f"backend must be chosen before Keras is imported (set KERAS_BACKEND={chosen})")
    os.environ["KERAS_BACKEND"] = chosen
    if chosen == "jax":
        # JAX takes 75% of a GPU's memory at start by default; an inference server and
        # the learner share one GPU, as they do on TensorFlow (share_gpu_memory)
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return chosen  # type: ignore[return-value]


def backend() -> Backend:
    """The backend Keras runs on in this process."""
    import keras

    return keras.backend.backend()  # type: ignore[return-value]


def gpu_available() -> bool:
    """Whether the backend sees a GPU (decides compilation and mixed precision)."""
    which = backend()
    if which == "jax":
        import jax

        return any(device.platform == "gpu" for device in jax.devices())
    if which == "torch":
        import torch

        return bool(torch.cuda.is_available())
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def mixed_precision_policy() -> str:
    """The Keras dtype policy of a mixed-precision network on this backend: float16 on
    TensorFlow (with loss scaling in the trainer), bfloat16 on JAX and PyTorch, where
    the GPUs we run on (H100, H200) have it and it needs no loss scaling."""
    return "mixed_float16" if backend() == "tensorflow" else "mixed_bfloat16"


def share_gpu_memory() -> None:
    """Let the backend take GPU memory as it needs it instead of all at start, so that
    an inference server and the learner can share one GPU. Call before the first op.
    (JAX's is set by ``use_backend``; PyTorch's allocator grows by itself.)"""
    if backend() != "tensorflow":
        return
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # already initialised: the setting stands as it was
            pass


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def share_cpu_threads(calls: int) -> None:
    """Split this process's cores among ``calls`` model calls that run side by side:
    each op runs on at most its share of the backend's intra-op threads. Call before the
    first op; once the backend has started, the setting stands as it was. (JAX's CPU
    threads are XLA's, fixed at its start: unchanged.)"""
    _set_threads(max(1, _cores() // calls), between=None)


def limit_cpu_threads(threads: int) -> None:
    """At most ``threads`` threads per op and between ops in this process (a process
    that must stay within a CPU share: the strength evaluator). Call before the first op."""
    _set_threads(max(1, threads), between=max(1, threads))


def _set_threads(within: int, *, between: int | None) -> None:
    which = backend()
    if which == "torch":
        import torch

        torch.set_num_threads(within)
        if between is not None:
            try:
                torch.set_interop_threads(between)
            except RuntimeError:  # only before the first parallel work
                pass
    elif which == "tensorflow":
        import tensorflow as tf

        try:
            tf.config.threading.set_intra_op_parallelism_threads(within)
            if between is not None:
                tf.config.threading.set_inter_op_parallelism_threads(between)
        except RuntimeError:
            pass
