"""The run's names in Redis: every key of a run, model version ids, and the few
helpers that read names back.

Every key of a run lives under ``tengen:{<run_id>}:`` (``RunKeys``, the one place that
spells them). The braces are literal: they are a Redis Cluster hash tag, so all of a
run's keys hash to one slot and the registry's MULTI/EXEC also works on a cluster.
"""

from __future__ import annotations

import operator
import re
from typing import Any

__all__ = ["RunKeys", "version_id", "as_bytes"]

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")


def version_id(version: int) -> str:
    """A model generation as the zero-padded id used in keys, paths and labels: ``000042``."""
    try:  # ints and numpy's integers; not bools, floats or strings
        index = None if isinstance(version, bool) else operator.index(version)
    except TypeError:
        index = None
    if index is None or index < 0:
        raise ValueError(f"a model version is a non-negative integer, got {version!r}")
    return f"{index:06d}"


class RunKeys:
    """The Redis keys of one run."""

    def __init__(self, run_id: str):
        if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"run_id must be 1-128 characters of letters, digits, '_', '.', '-', got {run_id!r}")
        self.run_id = run_id
        self.prefix = f"tengen:{{{run_id}}}"
        self.samples = f"{self.prefix}:samples"  # stream: one entry per game
        self.sample_counts = f"{self.prefix}:samples:counts"  # hash: added, delivered:<group>
        self.models = f"{self.prefix}:models"  # sorted set: published versions
        self.best = f"{self.prefix}:best"  # string: the best version
        self.ladder = f"{self.prefix}:ladder"  # list: JSON promotion records, oldest first
        self.promotions = f"{self.prefix}:promotions"  # pub/sub channel
        self.status_prefix = f"{self.prefix}:status:"
        self.desired_workers = f"{self.prefix}:control:workers"  # string: `tengen scale` asks for N

    def model(self, version: int) -> str:
        """Hash: ``blob``, ``sha256``, ``metadata`` (JSON), ``published`` (unix s)."""
        return f"{self.prefix}:model:{version_id(version)}"

    def status(self, component: str) -> str:
        return self.status_prefix + component

    def status_pattern(self) -> str:
        """The SCAN pattern of every component's status key (the prefix glob-escaped)."""
        return re.sub(r"([*?\[\]\\])", r"\\\1", self.status_prefix) + "*"


def as_bytes(value: Any) -> bytes:
    """An id or a key name as Redis gives it back (bytes, or str with decoding on)."""
    return value if isinstance(value, bytes) else str(value).encode()
