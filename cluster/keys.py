"""The run's names in Redis: every key of a run.

Every key of a run lives under ``tengen:{<run_id>}:`` (``RunKeys``, the one place that
spells them). The braces are literal: they are a Redis Cluster hash tag, so all of a
run's keys hash to one slot and the registry's MULTI/EXEC also works on a cluster.
"""

from __future__ import annotations

import re

from tengen.run.run_dir import check_run_id, version_id

__all__ = ["RunKeys"]


class RunKeys:
    """The Redis keys of one run."""

    def __init__(self, run_id: str):
        self.run_id = check_run_id(run_id)
        self.prefix = f"tengen:{{{run_id}}}"
        self.samples = f"{self.prefix}:samples"  # stream: one entry per game
        self.sample_counts = f"{self.prefix}:samples:counts"  # hash: added, delivered:<group>
        self.models = f"{self.prefix}:models"  # sorted set: published versions
        self.held_models = f"{self.prefix}:models:held"  # set: the versions whose weights are stored
        self.best = f"{self.prefix}:best"  # string: the best version
        self.ladder = f"{self.prefix}:ladder"  # list: JSON promotion records, oldest first
        self.promotions = f"{self.prefix}:promotions"  # pub/sub channel
        self.decisions = f"{self.prefix}:decisions"  # hash: gating match id -> its verdict (JSON)
        self.driver = f"{self.prefix}:driver"  # string with a TTL: the lease of the run's one driver (JSON)
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
