"""``tengen checkpoint-convert RUN_DIR --backend NAME``: a run's learner checkpoints
moved to another network backend, so that the run resumes there.

A checkpoint holds the optimizer's state as its backend wrote it, and a learner
refuses one of another backend (learner/trainer.py) rather than guess. Converting
loads each checkpoint into a learner's trainer built on the new backend, from the
run's own config, and writes it back from there: what the new backend cannot read
fails here, with the file named, before anything is written. The run's config.yaml
then names the new backend, so ``tengen train --resume`` runs on it.
"""

from __future__ import annotations

from pathlib import Path

from tengen.engine.backend_start import start_backend
from tengen.learner.storage import open_storage
from tengen.run.config import load_config
from tengen.run.run_dir import RunDir

__all__ = ["convert_checkpoints"]


def convert_checkpoints(run_dir: str | Path, backend: str) -> list[str]:
    """Convert the run's learner checkpoints (in its ``storage``, else its own folder)
    to ``backend``; returns the names converted. FileNotFoundError when it has none."""
    start_backend(backend, quiet=True)  # before anything imports Keras
    from tengen.engine.network import write_atomically
    from tengen.learner.learner import CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE
    from tengen.learner.trainer import Trainer

    files = RunDir(str(run_dir))
    config = load_config(files.config)
    storage = open_storage(config.storage or files.learner)
    options = config.learner_options()
    converted: dict[str, bytes] = {}
    for name in (CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE):
        blob = storage.read_bytes(name)
        if blob is None:
            continue
        # a fresh trainer for each: the previous checkpoint's state must not leak into the newest
        trainer = Trainer(model=config.network_spec().build(), optimizer=options.optimizer,
                          learning_rate=options.learning_rate, momentum=options.momentum,
                          ownership_weight=options.ownership_weight,
                          opponent_policy_weight=options.opponent_policy_weight,
                          score_weight=options.score_weight)
        extra = trainer.restore_from_bytes(blob, any_backend=True)
        converted[name] = trainer.checkpoint_to_bytes(extra)
    if not converted:
        raise FileNotFoundError(f"no learner checkpoint in {config.storage or files.learner}")
    for name, blob in converted.items():
        storage.write_bytes(name, blob)
    write_atomically(files.config, config.with_changes({"network.backend": backend}).to_yaml().encode())
    return list(converted)
