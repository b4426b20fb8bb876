"""The learner: samples in from a stream, training, candidates and checkpoints out.

A plain class; the cluster makes it a Ray actor. It talks to the rest of the run
through three narrow interfaces, passed in:

- ``source``: a sample stream with ``ensure_group(group)``, ``read(group, consumer,
  *, count, block_ms, decode) -> [(id, GameRecord)]``, ``ack(group, ids)``,
  ``move_group_to_end(group) -> last id`` and ``replay(decode, *, end) -> [GameRecord]``
  (Redis streams, or an in-process list);
- ``registry``: ``publish(version, blob, metadata) -> sha256`` for candidates and
  ``latest_candidate()``, so that a version is never taken twice;
- ``storage``: where checkpoints go, a local path or any fsspec URL, or a storage
  object (learner/storage.py; the cluster's default holds them for the driver).

Each checkpoint holds its own checksum (learner/trainer.py, format 2), and the one
before it is kept beside it (``PREVIOUS_CHECKPOINT_FILE``): a restarted learner that
finds the newest truncated or changed restores the previous one and says so
(``restored_from``). Without any, it still rebuilds its window from the stream, and
its next candidate takes the version after the registry's newest, so that no version
is published twice.

Samples are acknowledged only after they are in the replay window, and a game whose
id was read before (a worker's write retried after a lost reply) is dropped, so a
learner that dies loses nothing and reads nothing twice: a new one rebuilds the
window from the stream (the durable replay window), restores weights, optimiser, step
and RNG from the last checkpoint, and goes on from there. Training keeps the sample-reuse ratio: at most ``max_reuse``
passes per position that entered the window; it waits when data is short.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.interfaces import CandidateSink, SampleSource
from tengen.engine.network import WeightsError, weights_to_bytes
from tengen.engine.network_spec import NetworkSpec
from tengen.engine.selfplay import GameRecord
from tengen.learner.options import LearnerOptions
from tengen.learner.replay import ReplayWindow, mover_ownership, mover_score, reply_follows
from tengen.learner.storage import CheckpointStorage, open_storage
from tengen.learner.trainer import CheckpointBackendError, Trainer

__all__ = ["Learner", "LearnerStats", "LearnerStep", "CHECKPOINT_FILE", "PREVIOUS_CHECKPOINT_FILE", "value_target"]

CHECKPOINT_FILE = "learner.ckpt"
#: the checkpoint before the newest, restored when the newest does not read back whole
PREVIOUS_CHECKPOINT_FILE = "learner.previous.ckpt"
GROUP = "learner"
#: game ids remembered for dropping repeats (a repeat follows its original closely)
SEEN_GAMES = 100_000


def value_target(record: GameRecord, q_weight: float) -> np.ndarray:
    """The value head's targets for a game's recorded positions, float32 [L]:
    ``(1 - q_weight) * z + q_weight * q``, z the result self-play recorded
    (``record.value``) and q the root value of the full search at each recorded
    position. A record without the search's values (before format 3) keeps z."""
    if q_weight == 0.0 or record.search_value is None or record.full_search is None:
        return record.value
    # Only full searches are recorded positions, in the order they were played.
    q = record.search_value[record.full_search]
    if q.shape != record.value.shape:
        raise ValueError(f"{len(q)} full searches for {len(record.value)} recorded positions")
    return ((1.0 - q_weight) * record.value + q_weight * q).astype(np.float32)


class LearnerStats(TypedDict):
    """The learner's counters (``Learner.stats``): what the training loop reports and
    stops on (run/loop.py) and the cluster's LearnerActor records as metrics."""

    step: int  # training steps taken
    window: int  # positions in the replay window
    positions_read: int  # positions read from the stream since the start
    reuse: float  # samples drawn per position added to the window
    losses: dict[str, float]  # the last step's loss parts and its learning_rate ({} before one)
    sample_age_versions: float  # how many versions the recent samples' models trail the best
    next_version: int  # the version the next candidate is published as
    resumed: bool  # whether the learner started from a checkpoint
    #: which checkpoint it started from, and why not the newest when it was not: a
    #: file name, or None for none (a fresh run, or storage that held nothing whole)
    restored_from: str | None
    duplicate_games: int  # games read twice and dropped
    trimmed_unread: int  # games the stream trimmed before this learner's group read them
    #: stream entries that did not decode, counted and skipped by the stream: the
    #: cluster's LearnerActor adds its Redis stream's count, the in-process run none
    bad_entries: NotRequired[int]
    #: the checkpoints written since the last report, by file name, when the learner's
    #: owner keeps them (the cluster's LearnerActor hands its HeldStorage's to the driver)
    checkpoint_files: NotRequired[dict[str, bytes]]
    #: what the learner's owner logged since the last report (the cluster's LearnerActor:
    #: its storage's outages, which the driver writes into the run's log)
    said: NotRequired[list[str]]


class LearnerStep(LearnerStats):
    """``Learner.step``'s result: the stats after the step, and what it published."""

    published: list[int]  # the candidates published during the step, oldest first


class Learner:
    """Trains the candidate network from the sample stream."""

    def __init__(
        self,
        *,
        game: Game,
        network: NetworkSpec,
        options: LearnerOptions,
        source: SampleSource,
        registry: CandidateSink,
        decode: Callable[[bytes], GameRecord],
        storage: str | Path | CheckpointStorage,
        seed: int,
        consumer: str = "learner-0",
    ):
        self.game = game
        self.source = source
        self.registry = registry
        self.decode = decode
        self.storage = open_storage(storage) if isinstance(storage, str | os.PathLike) else storage
        self.options = options
        self.batch_size = options.batch_size
        self.min_positions = options.min_positions
        self.max_reuse = options.max_reuse
        self.candidate_every = options.candidate_every
        self.consumer = consumer
        self.model = network.build()
        self.trainer = Trainer(model=self.model, optimizer=options.optimizer, learning_rate=options.learning_rate,
                               momentum=options.momentum, ownership_weight=options.ownership_weight,
                               opponent_policy_weight=options.opponent_policy_weight,
                               score_weight=options.score_weight)
        # the ownership target (the replies' mask, the score) are kept only for a network that learns them
        points = game.board_shape[0] * game.board_shape[1]
        self.window = ReplayWindow(capacity=options.replay_window, planes_shape=game.planes_shape,
                                   num_actions=game.num_actions, ownership_points=points if network.ownership else 0,
                                   opponent_policy=network.opponent_policy, score=network.score)
        self.rng = np.random.default_rng(seed)
        #: the version number the next candidate gets (the best is 0 at the start)
        self.next_version = 1
        self.losses: dict[str, float] = {}
        self.sample_versions: list[int] = []  # model versions of the positions read lately
        self.positions_read = 0
        #: games read twice (their ids seen before) and dropped
        self.duplicate_games = 0
        #: the stream's count as of the last step (stats() must not need Redis: the final
        #: checkpoint is taken when Redis may be gone)
        self.trimmed_unread = 0
        self._seen_games: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.resumed = False
        self.restored_from: str | None = None
        self._last_checkpoint: bytes | None = None  # the newest written or read: the next one's previous
        self.source.ensure_group(GROUP)
        self._restore()

    # -- the step -------------------------------------------------------------------
    def step(self, *, seconds: float = 1.0, best_version: int = 0, wait_for_data: bool = True,
             until_step: int | None = None) -> LearnerStep:
        """Read what the stream has, train as far as the reuse ratio allows (and not
        past ``until_step``, a run's stop), publish a candidate when due; returns at the
        latest after ``seconds``, and at once when it may not train and
        ``wait_for_data`` is false (one process that also plays the games it would
        wait for)."""
        deadline = time.monotonic() + seconds
        self._read(block_ms=0)
        published: list[int] = []
        while (remaining := deadline - time.monotonic()) > 0:
            if until_step is not None and self.trainer.step >= until_step:
                break
            if not self._may_train():
                if not wait_for_data:
                    break
                # Wait for data in short blocking reads: a reply must come well within
                # the Redis client's socket timeout.
                self._read(block_ms=max(1, int(min(remaining, 0.5) * 1000)))
                continue
            batch = self.window.sample(self.batch_size, self.rng, game=self.game)
            self.losses = self.trainer.train_step(batch.planes, batch.policy, batch.value,
                                                  batch.ownership, batch.has_ownership,
                                                  opponent_policy=batch.opponent_policy,
                                                  has_opponent_policy=batch.has_opponent_policy,
                                                  score=batch.score, has_score=batch.has_score)
            if self.trainer.step % self.candidate_every == 0:
                published.append(self.publish_candidate())
            if self.trainer.step % 50 == 0:
                self._read(block_ms=0)
        self.trimmed_unread = self.source.trimmed_unread(GROUP)
        return {**self.stats(best_version), "published": published}

    def stats(self, best_version: int = 0) -> LearnerStats:
        ages = np.array(self.sample_versions[-1000:], dtype=np.float64)
        return {
            "step": self.trainer.step,
            "window": len(self.window),
            "positions_read": self.positions_read,
            "reuse": self.window.reuse,
            "losses": dict(self.losses),
            "sample_age_versions": float(best_version - ages.mean()) if len(ages) else 0.0,
            "next_version": self.next_version,
            "resumed": self.resumed,
            "restored_from": self.restored_from,
            "duplicate_games": self.duplicate_games,
            "trimmed_unread": self.trimmed_unread,
        }

    def _may_train(self) -> bool:
        if len(self.window) < self.min_positions:
            return False
        # One more step must keep the samples drawn within max_reuse per position added.
        return (self.trainer.step + 1) * self.batch_size <= self.window.positions_added * self.max_reuse

    def _read(self, *, block_ms: int) -> int:
        """Move what the stream has into the window, then acknowledge it."""
        added = 0
        while True:
            entries = self.source.read(GROUP, self.consumer, count=256, block_ms=block_ms, decode=self.decode)
            if not entries:
                return added
            for _, record in entries:
                self._add(record)
                added += len(record.value)
            self.source.ack(GROUP, [entry_id for entry_id, _ in entries])
            block_ms = 0

    def _add(self, record: GameRecord) -> None:
        if record.game_id is not None:
            # A worker's write retried after a lost reply is in the stream twice.
            if record.game_id in self._seen_games:
                self.duplicate_games += 1
                return
            self._seen_games[record.game_id] = None
            if len(self._seen_games) > SEEN_GAMES:
                self._seen_games.popitem(last=False)
        if len(record.value):
            ownership = None
            if self.window.keeps_ownership and record.ownership is not None:
                ownership = mover_ownership(record.planes, record.ownership)
            score = None
            if self.window.keeps_score and record.ownership is not None:
                # a network with the score head is Go's (the config says so), whose game has a komi
                score = mover_score(record.planes, record.ownership, getattr(self.game, "komi", 0.0))
            self.window.add(record.planes, record.policy, value_target(record, self.options.value_q_weight), ownership,
                            follows=reply_follows(record.full_search, len(record.value)), score=score)
            self.positions_read += len(record.value)
            self.sample_versions.extend([record.model_version] * len(record.value))
            del self.sample_versions[:-10_000]

    # -- candidates and checkpoints -------------------------------------------------
    def publish_candidate(self) -> int:
        """Put the current weights in the registry as the next version; checkpoint."""
        # The registry may be ahead of the checkpoint: a learner killed between a
        # publish and its checkpoint, or one resumed without the storage it wrote to.
        latest = self.registry.latest_candidate()
        version = self.next_version = max(self.next_version, (latest or 0) + 1)
        blob = weights_to_bytes(self.model, metadata={"version": version, "step": self.trainer.step})
        self.registry.publish(version, blob, {"step": self.trainer.step, "game": self.game.name})
        self.next_version += 1
        self.checkpoint()
        return version

    def checkpoint(self) -> None:
        """Write a checkpoint, keeping the one before it as the previous."""
        extra = {
            "next_version": self.next_version,
            "rng": json.dumps(self.rng.bit_generator.state),
            "positions_added": self.window.positions_added,
            "samples_drawn": self.window.samples_drawn,
        }
        data = self.trainer.checkpoint_to_bytes(extra)
        if self._last_checkpoint is not None:
            self.storage.write_bytes(PREVIOUS_CHECKPOINT_FILE, self._last_checkpoint)
        self.storage.write_bytes(CHECKPOINT_FILE, data)
        self._last_checkpoint = data

    def _restore(self) -> None:
        """The newest checkpoint that reads back whole (each checks its own sha256),
        then the window rebuilt from the stream, with or without one."""
        extra = None
        refused = []
        for name in (CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE):
            data = self.storage.read_bytes(name)
            if data is None:
                continue
            try:
                extra = self.trainer.restore_from_bytes(data)
            except CheckpointBackendError:
                raise  # whole, but another backend's: starting over would lose the run's training
            except WeightsError as e:
                refused.append(f"{name}: {e}")
                continue
            self._last_checkpoint = data
            self.restored_from = name + (f" ({'; '.join(refused)})" if refused else "")
            break
        if extra is None and refused:
            self.restored_from = f"none: {'; '.join(refused)}"
        if extra is not None:
            self.next_version = int(extra["next_version"])
            self.rng.bit_generator.state = json.loads(extra["rng"])
        # The stream is the durable replay window: rebuild from it, oldest first, with
        # a checkpoint or without one (a learner whose storage was lost with its node).
        # The group first jumps to the stream's end, so what the rebuild read is not
        # read again and what arrives after it is.
        last_id = self.source.move_group_to_end(GROUP)
        for record in self.source.replay(self.decode, end=last_id):
            self._add(record)
        if extra is not None:
            # Keep the reuse ratio where it was, so a restart neither retrains old data
            # nor skips ahead.
            self.window.positions_added = max(self.window.positions_added, int(extra["positions_added"]))
            self.window.samples_drawn = int(extra["samples_drawn"])
            self.resumed = True
