"""The network backend's start-up (engine/backend.py) without its noise on the
terminal: the commands that load a model (cli.py, run/checkpoint.py) and the strength
evaluator's child process (run/strength_process.py) start it through here, quietly
unless ``tengen --verbose`` asked for everything."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from tengen import QUIET_ENV
from tengen.engine.backend import Backend, use_backend

__all__ = ["held_native_stderr", "start_backend", "quiet_asked"]


def quiet_asked() -> bool:
    """Whether this process, or the ``tengen`` command that started it, was asked to
    keep the terminal quiet (``QUIET_ENV``)."""
    return os.environ.get(QUIET_ENV) == "1"


@contextlib.contextmanager
def held_native_stderr() -> Iterator[None]:
    """Hold file descriptor 2 in a temporary file for the block, and replay what it
    caught to the real stderr only if the block fails (not when the process is stopped
    in it: SystemExit, KeyboardInterrupt).

    TensorFlow's C++ start-up writes to fd 2 whatever TF_CPP_MIN_LOG_LEVEL says: absl
    sends every message before its ``InitializeLog`` there ("All log messages before
    absl::InitializeLog() ...", oneDNN's notice, "Could not find cuda drivers"), and
    on a CPU machine the CUDA platform's failed ``cuInit`` comes when devices are first
    listed. Python's own ``sys.stderr`` shares fd 2, so it is held too."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except (SystemExit, KeyboardInterrupt):
            raise  # a process being stopped, not a start-up that failed: nothing to show
        except BaseException:
            sys.stderr.flush()
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode("utf-8", "replace"))
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def start_backend(name: str | None = None, *, strict: bool = True, quiet: bool | None = None) -> Backend:
    """Choose the backend (``use_backend``; with ``strict`` False, one Keras already
    runs on is kept: weights load on any), import Keras and list its devices, which
    probes CUDA: all it writes at start-up is written by the time this returns, and
    with ``quiet`` (default: ``quiet_asked()``) held and dropped unless it fails."""
    if not strict and "keras" in sys.modules:
        name = None
    chosen = use_backend(name)
    with held_native_stderr() if (quiet_asked() if quiet is None else quiet) else contextlib.nullcontext():
        if chosen == "tensorflow":
            import tensorflow as tf

            tf.config.list_physical_devices()
        elif chosen == "jax":
            import jax

            jax.devices()
        import keras  # noqa: F401  (Keras's own start-up, on the chosen backend)
    return chosen
