"""How strong configs/connect4.yaml's net and search get from exact targets: the ceiling
of what self-play could teach them, for bench/learn_connect4.py's targets.

Trains the config's network, fresh, on solver-labelled positions: files written by
bench/label_connect4.py with ``--exclude play/data/connect4_positions.txt``, so that
no graded position (nor its mirror image) is trained on.

- Each position trains the policy (uniform over its optimal moves) and the value (its
  best score's sign: +1 when the player to move wins).
- Each child of it that is not a finished game trains the value alone: minus the sign
  of that column's score, since the child's mover is the other player. These are
  exact values of the nodes the search expands next, about six per position. Without
  them, 14,720 exactly labelled positions graded 0.71 optimal; with them, 0.80.
- Every sample comes with its mirror image (the game's symmetries).

Half of each batch is positions (with a policy), half any sample. The steps are the
learner's (learner/trainer.py: SGD with momentum, the config's batch size and L2), at a
learning rate of 0.02, then 0.002 from ``--drop-at``; a child trains no policy
(``has_policy``). The model is saved in ``--out`` (model.safetensors and config.yaml, as
a run's ``best``) every ``--save-every`` minutes and at the end (``last``), which is then
graded on the bench's positions with the config's search, as bench/learn_connect4.py
grades; ``learn_connect4.py --grade-only OUT/last`` adds the matches against MCTS.

    python bench/supervised_ceiling.py --labels runs/labels/*.txt --minutes 45 --out runs/ceiling

Measured on 2 cores (2026-12-04) with 116,720 positions at 8-30 stones (seeds 7-13, about
35 minutes of labelling on 2 cores), 1,634,268 samples. This script graded optimal 0.889 ±
0.010 and outcome kept 0.972 ± 0.005 after 15 minutes (11,302 steps), and 0.930 ± 0.008 and
0.983 ± 0.004 after 42 (32,255 steps). The session script it came from, 45 minutes (35,065
steps): 0.916, 0.984, and 0.995 against MCTS-1000 (200 games). Self-play's 60-minute main
jobs with this net and search reach 0.79-0.82, 0.92-0.95 and 0.91-0.94.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.network import CompiledModel, save_weights_file
from tengen.learner.trainer import Trainer
from tengen.play.grading import (
    DEFAULT_PATH,
    TARGET_OPTIMAL,
    TARGET_OUTCOME,
    LabelledPosition,
    Share,
    grade_moves,
    grade_network,
    position_keys,
    read_positions,
    search_chooser,
)
from tengen.play.solvers import NO_SCORE
from tengen.run.checkpoint import build_model
from tengen.run.config import TengenConfig, load_config
from tengen.run.run_dir import CONFIG_FILE, MODEL_FILE


@dataclass(frozen=True)
class Samples:
    """``planes[N, H, W, C]``, ``policy[N, A]`` (zeros where ``has_policy`` is false),
    ``value[N]`` in {-1, 0, 1} from the mover's view, ``has_policy[N]``."""

    planes: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    has_policy: np.ndarray

    def __len__(self) -> int:
        return len(self.value)


def training_samples(game: Game, positions: Sequence[LabelledPosition]) -> Samples:
    """Every position with its exact policy and value, its unfinished children with their
    exact values, and all of it under every symmetry of the game."""
    planes, policy, value, has_policy = [], [], [], []
    no_policy = np.zeros(game.num_actions, np.float32)
    for position in positions:
        optimal = (position.scores == position.best).astype(np.float32)
        planes.append(game.encode(position.state))
        policy.append(optimal / optimal.sum())
        value.append(np.sign(position.best))
        has_policy.append(True)
        for column in np.flatnonzero(position.scores != NO_SCORE):
            child = game.next_state(position.state, int(column))
            if game.is_terminal(child):
                continue
            planes.append(game.encode(child))
            policy.append(no_policy)
            value.append(-np.sign(position.scores[column]))
            has_policy.append(False)
    base_planes, base_policy = np.stack(planes).astype(np.float32), np.stack(policy)
    symmetries = range(len(game.symmetries))
    return Samples(
        planes=np.concatenate([game.transform_planes(base_planes, k) for k in symmetries]),
        policy=np.concatenate([game.transform_policy(base_policy, k) for k in symmetries]),
        value=np.tile(np.asarray(value, np.float32), len(symmetries)),
        has_policy=np.tile(np.asarray(has_policy, bool), len(symmetries)),
    )


def batch_rows(samples: Samples, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """Half the rows from the positions with a policy, half from all samples."""
    with_policy = np.flatnonzero(samples.has_policy)
    half = batch_size // 2
    return np.concatenate([rng.choice(with_policy, half), rng.integers(0, len(samples), batch_size - half)])


def save(model, config: TengenConfig, folder: Path, step: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_weights_file(model, folder / MODEL_FILE, metadata={"step": step, "trained_on": "exact labels"})
    (folder / CONFIG_FILE).write_text(config.to_yaml())


def train(config: TengenConfig, samples: Samples, *, minutes: float, drop_at: int, save_every: float,
          out: Path, seed: int = 0):
    model = build_model(config)
    train_config = config.train
    trainer = Trainer(model=model, optimizer=train_config.optimizer, momentum=train_config.momentum,
                      learning_rate=[[0, 0.02], [drop_at, 0.002]])
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    next_save = start + save_every * 60
    while time.monotonic() < start + minutes * 60:
        rows = batch_rows(samples, train_config.batch_size, rng)
        losses = trainer.train_step(samples.planes[rows], samples.policy[rows], samples.value[rows],
                                    has_policy=samples.has_policy[rows])
        if trainer.step % 1000 == 0:
            print(f"{time.monotonic() - start:5.0f} s  step {trainer.step}  policy {losses['policy_loss']:.3f}  "
                  f"value {losses['value_loss']:.3f}", flush=True)
        if time.monotonic() > next_save:
            save(model, config, out / f"{(time.monotonic() - start) / 60:.0f}min", trainer.step)
            next_save += save_every * 60
    save(model, config, out / "last", trainer.step)
    return model, trainer.step


def shown(share: Share) -> str:
    return f"{share.value:.3f} ± {share.se:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", nargs="+", required=True, help="positions files of bench/label_connect4.py")
    parser.add_argument("--config", default="connect4", help="the net and search (packaged name or YAML)")
    parser.add_argument("--minutes", type=float, default=45)
    parser.add_argument("--drop-at", type=int, default=24_000, help="the step the learning rate drops at")
    parser.add_argument("--save-every", type=float, default=15, help="minutes between saved models")
    parser.add_argument("--out", default="runs/supervised_ceiling")
    parser.add_argument("--simulations", type=int, default=400, help="the grading search's")
    args = parser.parse_args()

    config = load_config(args.config)
    game = config.game.make()
    bench = read_positions(DEFAULT_PATH)
    positions = [p for path in args.labels for p in read_positions(path)]
    if position_keys(positions) & position_keys(bench):
        raise SystemExit(f"the labels hold graded positions (or their mirrors): label with --exclude {DEFAULT_PATH}")
    samples = training_samples(game, positions)
    print(f"{len(positions)} positions, {len(samples)} samples ({int(samples.has_policy.sum())} with a policy)",
          flush=True)
    model, steps = train(config, samples, minutes=args.minutes, drop_at=args.drop_at, save_every=args.save_every,
                         out=Path(args.out))
    settings = dataclasses.replace(config.play_search(), simulations=args.simulations)
    evaluate = CompiledModel(model)
    moves = grade_moves(search_chooser(game, evaluate, settings), bench)
    network = grade_network(game, evaluate, bench)
    print(f"after {steps} steps: optimal {shown(moves.optimal)}, outcome kept {shown(moves.outcome)}; network "
          f"alone: policy optimal {shown(network.policy.optimal)}, value sign {shown(network.value_sign)}")
    print(f"RATIO supervised_ceiling_optimal_share {moves.optimal.value:.3f} vs solver target {TARGET_OPTIMAL}")
    print(f"RATIO supervised_ceiling_outcome_share {moves.outcome.value:.3f} vs solver target {TARGET_OUTCOME}")


if __name__ == "__main__":
    main()
