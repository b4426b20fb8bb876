"""The training loop in one process, without Ray or Redis: the same parts as the
cluster run, wired by plain calls in turn.

``SingleProcessRun`` holds a ``SelfPlayWorker`` whose leaves go straight to the best
network, an in-process sample stream, the ``Learner``, an in-process model registry
and the ``Gatekeeper``, and drives them with run/loop.py's ``TrainingLoop``, the
one the Ray driver drives: reuse control, candidate cadence, gating, the ladder,
checkpoints, the run directory and its status lines are the same code in both. A
pass of the loop (``iterate``): a chunk of self-play, training as far as the reuse
ratio allows, a match when a candidate is due, the best model's strength asked of the
evaluator's child process when the loop says it is due (run/strength_process.py: at
``evaluation.nice``, held to ``evaluation.cpu_share``; its answer taken at a later pass,
never waited for), a status line every few seconds.

The run directory is the cluster run's (run/run_dir.py). ``--resume`` continues
from the learner's checkpoint and the ladder on disk (the in-process stream does not
outlive the process, so the replay window refills from new games, with the reuse
ratio where it was). A directory made by the single-process run of tengen 0.1.0
(``checkpoint.safetensors``, its own ladder format) is refused with a message.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path

from tengen.engine.backend import gpu_available
from tengen.engine.mcts.evaluators import utility_scale, with_score_utility
from tengen.engine.network import CompiledModel
from tengen.learner.learner import Learner
from tengen.learner.storage import open_storage
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import TengenConfig, stream_maxlen
from tengen.run.loop import TrainingLoop, stop_on_sigterm
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.outage import ResilientStorage, StorageUnavailable
from tengen.run.run_dir import RunDir, RunDirError, version_id
from tengen.run.run_log import RunLog
from tengen.run.sample_stream import LocalSampleStream
from tengen.run.strength_process import EvaluationFailed, StrengthProcess
from tengen.workers.gatekeeper import Gatekeeper
from tengen.workers.selfplay_worker import AllGamesRefused, SelfPlayWorker

__all__ = ["SingleProcessRun"]

_WORKER = "w000"
#: seconds of self-play per pass, and the most training a pass may do
_CHUNK_S = 2.0
_TRAIN_S = 30.0
_REPORT_S = 5.0


class SingleProcessRun:
    """One training run in this process, stopped by the config's ``stop`` section or
    ``minutes``; ``resume=True`` continues the run in ``run_dir``."""

    def __init__(self, config: TengenConfig, run_dir: str | Path, *, minutes: float | None = None,
                 resume: bool = False, log: Callable[[str], None] = print):
        config = self.config = config.with_changes({"stop.minutes": minutes})  # into config.yaml too
        self.files = RunDir(run_dir)
        self.run_dir = self.files.path
        old = self.files.old_checkpoint
        if resume and old.exists() and not self.files.identity.exists():
            raise RunDirError(f"{self.run_dir} was made by an older tengen's --single-process (its "
                              f"{old.name} and ladder have another format) and cannot be resumed; "
                              "start a new run (its best/ model still loads with --checkpoint)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = self.files.create_identity()
        self.files.write(self.files.config, config.to_yaml().encode())
        self._log_file = RunLog(self.files, max_bytes=int(config.run.log_mb * 2**20), keep=config.run.log_files)
        self._print = log
        self.resume = resume
        self.game = config.game.make()
        self.registry = LocalModelRegistry(self.run_id)
        self.stream = LocalSampleStream(self.run_id, maxlen=stream_maxlen(config))
        self.loop = TrainingLoop(config, self.files, self.registry, log=self.log)
        best = self.loop.begin(resume=resume)
        # self-play's model computes as the Ray run's inference servers do: in mixed
        # precision where there is a GPU (its variables, and so its weights, stay float32)
        self.best = config.network_spec().build(mixed_precision=gpu_available())
        self.best_eval = CompiledModel(self.best)
        self.best_eval.load_weights_blob(self.registry.fetch(best)[0])
        storage = config.storage or str(self.files.learner)
        self.learner = Learner(game=self.game, network=config.network_spec(), options=config.learner_options(),
                               source=self.stream, registry=self.registry, decode=game_decoder(self.game),
                               storage=ResilientStorage(lambda: open_storage(storage), url=storage,
                                                        outage_s=config.storage_outage_s, log=self.log),
                               seed=config.seed)
        self.gatekeeper = Gatekeeper(game=self.game, network=config.network_spec(), registry=self.registry,
                                     options=config.gating_options(), seed=config.seed + 1)
        # A fresh incarnation per process: its games' ids never repeat an earlier session's.
        self._incarnation = f"{_WORKER}.{secrets.token_hex(3)}"
        self._games = 0
        self.worker = SelfPlayWorker(game=self.game, selfplay=config.selfplay_settings(), submit=lambda planes: planes,
                                     resolve=self._selfplay_evaluator(), sink=self._send, seed=config.seed * 1000,
                                     halves=1,
                                     games=config.selfplay.games_in_flight, model_version=best,
                                     cache_positions=config.selfplay.cache_positions)
        #: the strength evaluator's child process (started with the first evaluation)
        self.strength = StrengthProcess(config) if config.evaluation.enabled else None
        self._last_report = time.monotonic()
        #: the model's seconds in its compiled call at the last report, and when that was
        self._model_mark = (0.0, self._last_report)
        if resume:
            self.log(f"resumed at step {self.learner.trainer.step}, best {version_id(self.loop.best_version)}")

    # -- what the rest of the program reads ----------------------------------------------
    @property
    def version(self) -> int:
        """The best model's version."""
        return self.loop.best_version

    @property
    def promotions(self) -> int:
        return self.loop.promotions

    @property
    def games_played(self) -> int:
        return self.loop.totals["games"]

    @property
    def trainer(self):
        return self.learner.trainer

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> dict:
        """Iterate until the stop condition; returns a summary."""
        c = self.config
        self.log(f"run {self.run_id}: {self.game.name} in this process, {c.network.blocks}x{c.network.filters} net, "
                 f"{c.mcts.simulations} simulations, {c.selfplay.games_in_flight} games"
                 + (", resumed" if self.resume else ""))
        stopped: list[str] = []
        restore = stop_on_sigterm(stopped.append)
        try:
            while not (self.should_stop() or stopped):
                self.iterate()
        except KeyboardInterrupt:
            stopped.append("interrupted")
        except (StorageUnavailable, AllGamesRefused) as e:
            # the checkpoints' storage or the run directory's disk away too long, or self-play
            # making only games the stream refuses: no worker to replace here
            self.loop.error = str(e)
            self.log(f"stopping: {e}")
        finally:
            restore()
        if stopped:
            self.log(f"{stopped[0]}: stopping cleanly")
        return self.finish()

    def _selfplay_evaluator(self):
        """What self-play's search calls: the best model, its values with the score
        utility where the config asks for it (as the Ray run's servers answer)."""
        weight = self.config.mcts.score_utility
        if weight <= 0:
            return self.best_eval
        height, width = self.game.board_shape
        return with_score_utility(self.best_eval.with_score, weight=weight, side=utility_scale(height, width))

    def should_stop(self) -> bool:
        return self.loop.should_stop()

    def iterate(self) -> None:
        """A chunk of self-play, the training it allows, a match when a candidate is due.
        The evaluator is seen to first: the best model a pass starts with is the one
        asked for (the initial network at the first pass, even when that pass promotes)."""
        self._strength()
        refused = self.worker.games_refused
        stats = self.worker.run_for(_CHUNK_S)
        refusals = self.worker.refusals_since(refused)
        if refusals:
            self.log(f"self-play: {refusals}")
        self.loop.worker_reported(_WORKER, self._incarnation, stats)
        self.loop.learner_reported(self.learner.step(seconds=_TRAIN_S, best_version=self.loop.best_version,
                                                     wait_for_data=False, until_step=self.config.stop.steps))
        candidate = self.loop.next_match()
        if candidate is not None:
            promoted = self.loop.gated(self.gatekeeper.gate(candidate, self.loop.best_version))
            if promoted is not None:
                self.best_eval.load_weights_blob(self.registry.fetch(promoted)[0])
                self.worker.set_model_version(promoted)
        if time.monotonic() - self._last_report >= _REPORT_S:
            self._report()

    def _strength(self) -> None:
        """Take the evaluator's answer if it has come; ask for the next evaluation when
        the loop says one is due."""
        if self.strength is None:
            return
        try:
            result = self.strength.poll()
        except EvaluationFailed as e:
            self.loop.evaluation_cut_off(str(e))
        else:
            if result is not None:
                self.loop.evaluated(result)
        version = self.loop.next_evaluation()
        if version is not None:
            self.strength.ask(version, self.registry.fetch(version)[0])

    def finish(self) -> dict:
        if self.strength is not None:
            self.strength.close()  # an evaluation in flight is dropped: the run is over
        try:
            self.learner.checkpoint()
        except StorageUnavailable as e:
            self.log(f"final learner checkpoint failed ({e}); the last one stands")
        self.loop.on_disk(self.loop.save_best, stop=False)
        self.loop.prune_registry()
        self._report(final=True)
        summary = self.loop.summary()
        self._log_file.close()
        return summary

    def _send(self, record) -> None:
        record.game_id = f"{self._incarnation}:{self._games}"
        self._games += 1
        self.stream.add(encode_game(record, worker_id=_WORKER))

    def _report(self, *, final: bool = False) -> None:
        self._last_report = time.monotonic()
        self.loop.keep_games(self.stream)
        model = self.best_eval
        seconds, since = self._model_mark
        self._model_mark = (model.seconds, self._last_report)
        self.loop.report(final=final, mode="single-process", workers=1, inference_servers=0,
                         stream_length=self.stream.length(), reuse=round(float(self.learner.window.reuse), 3),
                         mean_batch=round(model.rows / model.calls, 1) if model.calls else 0.0,
                         model_busy=round((model.seconds - seconds) / max(self._last_report - since, 1e-9), 3),
                         model_s=round(model.seconds, 4))

    def log(self, line: str) -> None:
        self._print(line)
        self._log_file.write(line)
