"""One backend's side of tests/test_backends.py, run in its own process (Keras picks
its backend once per process): ``python backend_probe.py BACKEND DIR train`` trains
tic-tac-toe's network three steps and leaves its weights, its learner checkpoint and
its answers on fixed positions in DIR; ``... load`` loads every other backend's
weights there and prints, as JSON, how far its answers are from theirs, and what
restoring their checkpoints says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from tengen.engine.backend import use_backend

backend, folder, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
use_backend(backend)

from tengen.engine.network import CompiledModel, WeightsError, weights_from_bytes, weights_to_bytes  # noqa: E402
from tengen.learner.trainer import Trainer  # noqa: E402
from tengen.run.config import load_config  # noqa: E402

config = load_config("tictactoe")
game = config.game.make()
options = config.learner_options()
rng = np.random.default_rng(0)
planes = rng.integers(0, 2, (16, *game.planes_shape)).astype(np.float32)


def trainer() -> Trainer:
    # the run's own optimizer and schedule: its checkpoints are what checkpoint-convert reads
    return Trainer(model=config.network_spec().build(), optimizer=options.optimizer,
                   learning_rate=options.learning_rate, momentum=options.momentum)


if mode == "train":
    t = trainer()
    policy = rng.dirichlet(np.ones(game.num_actions), 16).astype(np.float32)
    value = rng.choice([-1.0, 0.0, 1.0], 16).astype(np.float32)
    losses = [t.train_step(planes, policy, value)["loss"] for _ in range(3)]
    (folder / f"{backend}.weights").write_bytes(weights_to_bytes(t.model, metadata={"backend": backend}))
    (folder / f"{backend}.ckpt").write_bytes(t.checkpoint_to_bytes({"by": backend}))
    np.savez(folder / f"{backend}.npz", *CompiledModel(t.model)(planes))
    print(json.dumps({"losses": losses}))
elif mode == "load":
    report: dict[str, dict] = {}
    for weights in sorted(folder.glob("*.weights")):
        other = weights.stem
        model = config.network_spec().build()
        weights_from_bytes(model, weights.read_bytes())
        mine = CompiledModel(model)(planes)
        theirs = np.load(folder / f"{other}.npz")
        t = trainer()
        try:
            t.restore_from_bytes((folder / f"{other}.ckpt").read_bytes())
            refused = None
        except WeightsError as e:
            refused = str(e)
        report[other] = {"policy": float(np.abs(mine[0] - theirs["arr_0"]).max()),
                         "value": float(np.abs(mine[1] - theirs["arr_1"]).max()), "refused": refused,
                         "step": t.step}
    print(json.dumps(report))
