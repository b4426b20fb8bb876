"""The whole AlphaZero loop in one process: self-play -> train -> gate -> promote.

For debugging and tests, and the reference the cluster's actors must match: it
uses exactly the engine's and the learner's functions (SelfPlay, ReplayWindow,
Trainer, play_match) with no Ray and no Redis.

A run directory holds:

    config.yaml             the config used, every default spelled out
    log.txt                 one line per iteration and per gating match
    best/model.safetensors  the best network (what ``--checkpoint`` accepts)
    best/config.yaml        the config, so the model can be loaded on its own
    checkpoint.safetensors  the learner (weights, optimiser, step) for inspection
    ladder.json             every promotion with its gating result and Elo
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tengen.cluster.config import TengenConfig, load_config
from tengen.engine.arena import MctsPlayer, play_match
from tengen.engine.gating import Decision, GatingRule
from tengen.engine.network import CompiledModel, build_network, load_weights_file, save_weights_file, write_atomically
from tengen.engine.selfplay import SelfPlay
from tengen.learner.replay import ReplayWindow
from tengen.learner.trainer import Trainer

__all__ = ["SingleProcessRun", "build_model", "load_model", "model_version_id"]


def model_version_id(version: int) -> str:
    """Model generations as zero-padded ids, alike in paths, logs and SGF names."""
    return f"{version:06d}"


def build_model(config: TengenConfig):
    return build_network(**config.network_kwargs())


def load_model(checkpoint: str | Path, config: TengenConfig | None = None):
    """(config, game, model) from a ``best`` directory or a ``.safetensors`` file; the
    config defaults to the one saved beside the weights."""
    path = Path(checkpoint)
    weights = path / "model.safetensors" if path.is_dir() else path
    if config is None:
        saved = weights.parent / "config.yaml"
        if not saved.exists():
            raise FileNotFoundError(f"no config.yaml beside {weights}: pass --config")
        config = load_config(saved)
    game = config.game.make()
    model = build_model(config)
    if not weights.exists():
        raise FileNotFoundError(f"no weights at {weights}")
    load_weights_file(model, weights)
    return config, game, model


#: the trainer's checkpoint in the run directory
CHECKPOINT_FILE = "checkpoint.safetensors"


class SingleProcessRun:
    """One training run in this process, stopped by the config's ``stop`` section or
    ``minutes``. ``resume=True`` continues the run in ``run_dir`` from its checkpoint:
    trainer (weights, optimizer, step), best network, ladder and RNG; the replay window
    refills from new games, with the reuse ratio where it was."""

    def __init__(self, config: TengenConfig, run_dir: str | Path, *, minutes: float | None = None,
                 resume: bool = False, log: Callable[[str], None] = print):
        self.config = config
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "best").mkdir(exist_ok=True)
        (self.run_dir / "config.yaml").write_text(config.to_yaml())
        (self.run_dir / "best" / "config.yaml").write_text(config.to_yaml())
        self._log_file = open(self.run_dir / "log.txt", "a", encoding="utf-8")  # noqa: SIM115
        self._print = log
        self.minutes = minutes if minutes is not None else config.stop.minutes
        self.game = config.game.make()
        self.rng = np.random.default_rng(config.seed)
        self.model = build_model(config)
        self.best = build_model(config)
        self.best.set_weights(self.model.get_weights())
        train = config.train
        self.trainer = Trainer(model=self.model, optimizer=train.optimizer, learning_rate=config.learning_rate(),
                               momentum=train.momentum)
        self.best_eval = CompiledModel(self.best)
        self.candidate_eval = CompiledModel(self.model)
        self.selfplay = SelfPlay(self.game, games=config.selfplay.games_in_flight, seed=config.seed,
                                 **config.selfplay_kwargs())
        self.window = ReplayWindow(capacity=train.replay_window, planes_shape=self.game.planes_shape,
                                   num_actions=self.game.num_actions)
        self.rule = GatingRule(**config.gating_rule_kwargs())
        self.version = 0
        self.promotions = 0
        self.games_played = 0
        self.ladder: list[dict] = [{"version": model_version_id(0), "elo": 0.0, "step": 0}]
        self._last_candidate_step = 0
        self._losses: dict[str, float] = {}
        self._start = time.monotonic()
        if resume:
            self._restore()
        self._save_best()

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> dict:
        """Iterate until the stop condition; returns a summary."""
        self._start = time.monotonic()
        self.log(f"run {self.run_dir}: {self.game.name}, {self.config.network.blocks}x{self.config.network.filters} "
                 f"net, {self.config.mcts.simulations} simulations, {self.config.selfplay.games_in_flight} games")
        while not self.should_stop():
            self.iterate()
        return self.finish()

    def iterate(self) -> None:
        """One generation of self-play games, the training it allows, gating when due."""
        positions = self._self_play()
        steps = self._train()
        if self.trainer.step - self._last_candidate_step >= self.config.train.candidate_every:
            self._gate()
        elapsed = time.monotonic() - self._start
        losses = " ".join(f"{k} {v:.3f}" for k, v in self._losses.items() if k != "learning_rate")
        self.log(f"{elapsed:7.0f}s games {self.games_played} window {len(self.window)} +{positions} "
                 f"steps {self.trainer.step} (+{steps}) reuse {self.window.reuse:.2f} {losses} "
                 f"best {model_version_id(self.version)}")

    def finish(self) -> dict:
        self._checkpoint()
        summary = {"games": self.games_played, "steps": self.trainer.step, "best": model_version_id(self.version),
                   "promotions": self.promotions, "minutes": (time.monotonic() - self._start) / 60}
        self.log("done: " + json.dumps(summary))
        self._log_file.close()
        return summary

    def should_stop(self) -> bool:
        stop = self.config.stop
        if self.minutes is not None and time.monotonic() - self._start >= self.minutes * 60:
            return True
        if stop.steps is not None and self.trainer.step >= stop.steps:
            return True
        return stop.promotions is not None and self.promotions >= stop.promotions

    def _self_play(self) -> int:
        """Play until a generation of games (as many as are in flight) has finished."""
        positions = finished = 0
        while finished < self.config.selfplay.games_in_flight:
            for record in self.selfplay.step(self.best_eval):
                self.window.add(record.planes, record.policy, record.value)
                positions += len(record.value)
                finished += 1
        self.games_played += finished
        return positions

    def _train(self) -> int:
        """Train while the sample reuse stays within ``max_reuse`` passes per position."""
        train = self.config.train
        if len(self.window) < min(train.min_positions, train.replay_window):
            return 0
        allowed = int(self.window.positions_added * train.max_reuse / train.batch_size)
        steps = 0
        while self.trainer.step < allowed:
            if self.config.stop.steps is not None and self.trainer.step >= self.config.stop.steps:
                break
            batch = self.window.sample(train.batch_size, self.rng, game=self.game)
            self._losses = self.trainer.train_step(*batch)
            steps += 1
            if self.trainer.step - self._last_candidate_step >= train.candidate_every:
                self._gate()
        return steps

    def _gate(self) -> None:
        self._last_candidate_step = self.trainer.step
        gating = self.config.gating
        simulations = gating.simulations or self.config.mcts.simulations
        players = [MctsPlayer(self.game, evaluate, slots=gating.games_in_flight, simulations=simulations,
                              name=name, c_puct=self.config.mcts.c_puct,
                              fpu_reduction=self.config.mcts.fpu_reduction,
                              leaves_per_round=self.config.mcts.leaves_per_round,
                              temperature_moves=gating.temperature_moves)
                   for evaluate, name in ((self.candidate_eval, "candidate"), (self.best_eval, "best"))]
        result = play_match(self.game, players[0], players[1], games=max(self.rule.games_needed_max, 1),
                            slots=gating.games_in_flight, rng=self.rng, rule=self.rule)
        self.log(f"gating at step {self.trainer.step}: candidate {result.wins}-{result.draws}-{result.losses} "
                 f"against {model_version_id(self.version)}, Elo {result.elo.elo:+.0f} "
                 f"[{result.elo.low:+.0f}, {result.elo.high:+.0f}] -> {result.decision}")
        self._checkpoint()
        if result.decision != Decision.PROMOTE:
            return
        self.best.set_weights(self.model.get_weights())
        self.version += 1
        self.promotions += 1
        self.selfplay.set_model_version(self.version)
        elo = self.ladder[-1]["elo"] + (result.elo.elo if result.games else 0.0)
        self.ladder.append({"version": model_version_id(self.version), "step": self.trainer.step, "elo": elo,
                            "wins": result.wins, "draws": result.draws, "losses": result.losses})
        self._save_best()
        self.log(f"promoted {model_version_id(self.version)} (Elo {elo:+.0f})")

    # -- files ------------------------------------------------------------------------
    def _save_best(self) -> None:
        meta = {"version": model_version_id(self.version), "step": self.trainer.step, "game": self.game.name}
        save_weights_file(self.best, self.run_dir / "best" / "model.safetensors", metadata=meta)
        write_atomically(self.run_dir / "ladder.json", json.dumps(self.ladder, indent=2).encode())

    def _checkpoint(self) -> None:
        extra = {"version": self.version, "games": self.games_played, "positions_added": self.window.positions_added,
                 "samples_drawn": self.window.samples_drawn, "rng": json.dumps(self.rng.bit_generator.state)}
        write_atomically(self.run_dir / CHECKPOINT_FILE, self.trainer.checkpoint_to_bytes(extra))

    def _restore(self) -> None:
        path = self.run_dir / CHECKPOINT_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: the run has no checkpoint to resume from")
        extra = self.trainer.restore_from_bytes(path.read_bytes())
        load_weights_file(self.best, self.run_dir / "best" / "model.safetensors")
        self.ladder = json.loads((self.run_dir / "ladder.json").read_text())
        self.version = int(extra["version"])
        self.games_played = int(extra["games"])
        # The window is empty, but the reuse budget is where it was: no burst of training
        # on the first few games, no pause either.
        self.window.positions_added = int(extra.get("positions_added", 0))
        self.window.samples_drawn = int(extra.get("samples_drawn", 0))
        if "rng" in extra:
            self.rng.bit_generator.state = json.loads(extra["rng"])
        self._last_candidate_step = self.trainer.step
        self.selfplay.set_model_version(self.version)
        self.log(f"resumed at step {self.trainer.step}, best {model_version_id(self.version)}")

    def log(self, line: str) -> None:
        self._print(line)
        self._log_file.write(line + "\n")
        self._log_file.flush()
