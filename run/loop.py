"""The training loop, written once: what happens between self-play, the learner and
the gatekeeper, whichever way they are wired.

Both runs hold the same parts (``SelfPlayWorker`` -> a sample stream -> ``Learner``,
candidates in a model registry, ``Gatekeeper``) and drive this one class with what
the parts report; they differ only in how the parts are called: Ray actors with
futures, a Redis stream and registry (cluster/driver.py), or plain calls in turn with
in-process ones (run/single_process.py). So reuse control (the learner's),
candidate cadence (the learner's), which candidate is gated (the newest), what a
gating result does (the ladder, the best model on disk, pruning), the run's totals
and rates, its stop conditions, its status lines, and when the best model's strength
against fixed references is measured and what is recorded of it (``next_evaluation``,
``evaluated``: evaluations.jsonl) have one implementation.

A run directory ends up with the same files either way (run/run_dir.py):
``best/``, ``models/<version>.safetensors`` (every promoted model, as the registry's
blob), ``ladder.json`` (the registry's ladder), ``status.json`` and ``status.jsonl``
(the last status line, and all of them), ``gating.jsonl`` (every match's result),
``learner/learner.ckpt``, and ``games/``:
a sample of finished self-play games (``keep_games``, which each wiring calls with
its stream on its status pass) and the games of the latest gating matches
(run/game_sample.py). The status lines, the gating lines and the ladder are
run/records.py's records, written through it.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, Unpack, cast

from tengen.engine.gating import GatingSummary
from tengen.engine.interfaces import ModelRegistryLike
from tengen.engine.network import weights_from_bytes, weights_to_bytes, write_atomically
from tengen.run.config import TengenConfig
from tengen.run.game_sample import GameSample, NewestEntries
from tengen.run.model_registry import blob_sha256
from tengen.run.outage import Outage, StorageUnavailable
from tengen.run.records import (
    TOTALS,
    EvaluationLine,
    GatingLine,
    Ladder,
    StatusLine,
    Total,
    WiringStatus,
    append_evaluation,
    append_gating,
    read_evaluations,
    read_ladder,
    read_status,
    scores_text,
    write_ladder,
    write_status,
)
from tengen.run.run_dir import RunDir, RunDirError, version_id

if TYPE_CHECKING:
    from tengen.learner.learner import LearnerStats, LearnerStep
    from tengen.workers.gatekeeper import GatingResult
    from tengen.workers.selfplay_worker import WorkerStats
    from tengen.workers.strength import StrengthResult

__all__ = ["TrainingLoop", "Gauges", "progress_text", "stop_on_sigterm"]


class Gauges(Protocol):
    """What the loop records as metrics: a gauge set by name (cluster/metrics.py's
    ``RunMetrics`` inside Ray)."""

    def set(self, name: str, value: float, **tags: str) -> None: ...


class TrainingLoop:
    """The loop's state and decisions. ``registry`` is the run's model registry (Redis
    or in-process); ``metrics`` records Prometheus metrics inside Ray (None: none)."""

    def __init__(self, config: TengenConfig, files: RunDir, registry: ModelRegistryLike, *, log: Callable[[str], None],
                 metrics: Gauges | None = None, clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.files = files
        self.registry = registry
        self.log = log
        self.metrics = metrics
        self.minutes = config.stop.minutes
        self.game = config.game.make()
        self.best_version = 0
        self.promotions = 0
        self.last_gating: GatingSummary | None = None
        #: the learner's stats as it last reported them (None before its first report)
        self.learner_stats: LearnerStats | None = None
        self.totals: dict[Total, int] = dict.fromkeys(TOTALS, 0)
        #: games each worker incarnation said it finished (their ids are ``<incarnation>:0`` on)
        self.reported_games: dict[str, int] = {}
        #: candidates published and not yet gated, oldest first
        self.pending: list[int] = []
        #: the candidate in the match now (its weights stay until the match is decided)
        self.in_match: int | None = None
        #: why the run stopped early (a crash loop, Redis away too long), else None
        self.error: str | None = None
        self.started = time.monotonic()
        self.games = GameSample(files, self.game, every=config.run.keep_game_every, keep=config.run.keep_games_max,
                                matches=config.run.keep_gating_matches, log=log)
        self._last_counts: dict[str, tuple[str, WorkerStats]] = {}  # worker -> (incarnation, its counters)
        self._last_totals: tuple[dict[Total, int], float] = (dict(self.totals), self.started)
        #: the run directory's disk: full or failing, it is an outage like Redis's, ridden
        #: out for ``storage_outage_s`` (what it could not write is written again after)
        self.disk = Outage(f"run directory {files.path}", log, clock=clock)
        self.clock = clock
        #: the version the strength evaluator measures now (None: none asked for), when it
        #: was asked for, and where the run was then (learner step, self-play games)
        self.evaluating: int | None = None
        self._evaluation_asked: tuple[float, int, int] | None = None
        #: the newest version measured (or asked for, until its result or its cut-off)
        self.last_evaluated: int | None = None
        #: the newest evaluation recorded
        self.last_evaluation: EvaluationLine | None = None
        self._best_unsaved = False
        #: ladder entries the registry lacks (their models thinned out of models/ when a
        #: single-process run's ladder was rebuilt from it): ladder.json keeps them
        self._ladder_before: list = []

    # -- the start ---------------------------------------------------------------------
    def begin(self, *, resume: bool) -> int:
        """The best version to start from: a new run publishes its initial network as
        version 000000; a resumed one keeps its ladder and counts on from its last
        report. A resumed run whose registry is empty (an in-process one, or a Redis
        that was lost) gets its ladder back from the run directory."""
        best = self.registry.best_version()
        if best is None and resume:
            best = self._ladder_from_disk()
        if best is None:
            model = self.config.network_spec().build()
            self.registry.publish(0, weights_to_bytes(model, metadata={"version": 0}),
                                  {"step": 0, "game": self.game.name})
            self.registry.promote(0, elo=0.0, result={"initial": True})
            best = 0
        self.best_version = best
        if not self.files.model(best).exists():
            self.save_best()  # best/ loads from the start (and the ladder can be rebuilt)
        if resume:
            self._restore_totals()
            self._restore_evaluations()
        self.best_version = best
        self.started = time.monotonic()
        self._last_totals = (dict(self.totals), self.started)
        self._set_metric("tengen_best_version", best)
        return best

    def _ladder_from_disk(self) -> int | None:
        """Publish and promote, in order, every model on ladder.json from models/
        (their blobs, so their sha256 is the one on the ladder); the best version."""
        try:
            ladder = read_ladder(self.files).entries
        except FileNotFoundError:
            return None
        for i, entry in enumerate(ladder):
            version = entry["version"]
            path = self.files.model(version)
            if not path.exists():
                if i == len(ladder) - 1:
                    raise RunDirError(f"{path}, the best model, is missing: the ladder of {self.files.path} "
                                      "cannot be rebuilt")
                # thinned out of models/ (run.keep_models): on the ladder still, not in the registry
                self._ladder_before.append(entry)
                continue
            blob = path.read_bytes()
            if blob_sha256(blob) != entry["sha256"]:
                raise RunDirError(f"{path} does not hold the model the ladder names (sha256 differs)")
            # the learner step the weights are from is the registry's metadata, not the ladder's: unknown here
            self.registry.publish(version, blob, {"step": 0, "game": self.game.name})
            self.registry.promote(version, elo=entry["elo"], result=entry["result"], at=entry["time"])
        self.log(f"the ladder ({len(ladder)} models) is back from {self.files.models}")
        return ladder[-1]["version"] if ladder else None

    def _restore_evaluations(self) -> None:
        """A resumed run does not measure again the best its last evaluation measured."""
        try:
            lines = read_evaluations(self.files)
        except FileNotFoundError:
            return
        if lines:
            self.last_evaluation = lines[-1]
            self.last_evaluated = lines[-1].version

    def _restore_totals(self) -> None:
        try:
            self.totals = dict(read_status(self.files).totals)
        except FileNotFoundError:
            return  # stopped before its first report

    # -- what the parts report ------------------------------------------------------------
    def worker_reported(self, worker: str, incarnation: str, stats: WorkerStats) -> None:
        """Add a worker's counters since its last report to the run's totals;
        ``incarnation`` names the worker's process (the wiring's name for it)."""
        last = self._last_counts.get(worker)
        # A replacement (another incarnation) counts from zero.
        before = last[1] if last is not None and last[0] == incarnation else None
        for key in TOTALS:
            self.totals[key] += max(0, stats.get(key, 0) - (before.get(key, 0) if before is not None else 0))
        self._last_counts[worker] = (incarnation, stats)
        self.reported_games[incarnation or worker] = stats.get("games", 0)

    def learner_reported(self, stats: LearnerStep) -> None:
        self.learner_stats = stats
        published = stats.get("published", [])
        self.pending.extend(published)
        if published:  # bounded however slowly matches go, not only at each gating
            self.prune_registry()

    def next_match(self) -> int | None:
        """The candidate to gate now: only the newest is worth a match."""
        if not self.pending:
            return None
        candidate = self.in_match = self.pending[-1]
        self.pending.clear()
        return candidate

    def match_cut_off(self, candidate: int) -> None:
        """A match that did not finish decided nothing: play it again (or a newer one)."""
        self.pending.insert(0, candidate)
        self.in_match = None

    def gated(self, result: GatingResult) -> int | None:
        """A gating result: a promoted candidate becomes the best (on disk too), a
        rejected one's weights leave the registry; returns the version promoted. The
        match's ``games`` go to the run directory, not into the status line; the rest
        of the result is appended to gating.jsonl (the ladder holds only promotions)."""
        self.on_disk(lambda: self.games.write_match(result))
        # The result less its games: the summary the gatekeeper put on the ladder.
        summary = cast(GatingSummary, {key: value for key, value in result.items() if key != "games"})
        self.last_gating = summary
        self.on_disk(lambda: append_gating(self.files, GatingLine(time=round(time.time(), 1), summary=summary)))
        self.log(f"gating {version_id(summary['candidate'])} vs {version_id(summary['best'])}: "
                 f"{summary['wins']}-{summary['draws']}-{summary['losses']}, Elo {summary['elo']:+.0f} "
                 f"-> {summary['decision']}")
        promoted = None
        if summary["decision"] == "promote":
            promoted = self.best_version = int(summary["candidate"])
            self.promotions += 1
            self._best_unsaved = not self.on_disk(self.save_best)
            ladder = self.registry.ladder()
            self._set_metric("tengen_best_version", promoted)
            if ladder and (elo := ladder[-1].get("elo")) is not None:
                self._set_metric("tengen_best_elo", elo)
            self.log(f"promoted {version_id(promoted)}")
        else:
            self.registry.discard(summary["candidate"])
        self.in_match = None
        self.prune_registry()
        return promoted

    # -- strength against fixed references ------------------------------------------------
    def next_evaluation(self) -> int | None:
        """The version the strength evaluator should measure now, or None: the best, when
        ``evaluation.enabled``, no evaluation is in flight, the best is not the version
        measured last, and ``evaluation.min_interval_s`` has passed since the last one
        was asked for. Only the newest best is measured: the versions promoted while the
        evaluator was busy or the interval ran are passed over, never queued."""
        e = self.config.evaluation
        if not e.enabled or self.evaluating is not None or self.best_version == self.last_evaluated:
            return None
        now = self.clock()
        if self._evaluation_asked is not None and now - self._evaluation_asked[0] < e.min_interval_s:
            return None
        self.evaluating = self.last_evaluated = self.best_version
        self._evaluation_asked = (now, self.learner_step, self.totals["games"])
        return self.best_version

    def evaluated(self, result: StrengthResult) -> EvaluationLine:
        """An evaluation's result: appended to evaluations.jsonl with where the run was
        when it was asked for, logged, and each reference's score and standard error
        set as a metric."""
        asked = self._evaluation_asked
        step, games = (asked[1], asked[2]) if asked is not None else (self.learner_step, self.totals["games"])
        line = EvaluationLine(time=round(time.time(), 1), version=int(result["version"]),
                              elapsed_s=float(result["elapsed_s"]), cpu_s=float(result["cpu_s"]),
                              learner_step=step, games=games, scores=list(result["scores"]))
        self.evaluating = None
        self.last_evaluation = line
        self.on_disk(lambda: append_evaluation(self.files, line))
        self.log(f"strength of {version_id(line.version)}: {scores_text(line.scores)} ({line.elapsed_s:.0f} s)")
        for score in line.scores:
            if score["value"] is not None and score["se"] is not None:
                self._set_metric("tengen_strength_score", score["value"], reference=score["reference"])
                self._set_metric("tengen_strength_score_stderr", score["se"], reference=score["reference"])
        self._set_metric("tengen_strength_version", line.version)
        return line

    def evaluation_cut_off(self, why: str) -> None:
        """An evaluation that did not finish (its evaluator lost or hung) measured
        nothing: its version is asked for again once the interval has passed."""
        if self.evaluating is not None:
            self.log(f"the strength evaluation of {version_id(self.evaluating)} was cut off ({why})")
            self.last_evaluated = self.last_evaluation.version if self.last_evaluation is not None else None
        self.evaluating = None

    def prune_registry(self) -> None:
        """Weights in the registry: the best, the newest ``redis.keep_candidates``, the
        next to be gated (only the newest waiting is) and the one in a match (a match
        played again fetches it)."""
        keep = [*self.pending[-1:], *([] if self.in_match is None else [self.in_match])]
        self.registry.prune(keep_candidates=self.config.redis.keep_candidates, keep=keep)

    # -- the run directory ----------------------------------------------------------------
    def save_best(self) -> None:
        """best/ and models/<version> on disk (the registry keeps only the newest
        weights), and ladder.json."""
        files = self.files
        blob, _ = self.registry.fetch(self.best_version)
        weights_from_bytes(self.config.network_spec().build(), blob)  # fits the config
        files.best.mkdir(parents=True, exist_ok=True)
        write_atomically(files.best_model, blob)
        if not files.model(self.best_version).exists():
            write_atomically(files.model(self.best_version), blob)
        self._thin_models()
        files.write(files.best_config, self.config.to_yaml().encode())
        entries = sorted((*self._ladder_before, *self.registry.ladder()), key=lambda entry: entry["version"])
        write_ladder(files, Ladder(tuple(entries)))

    def _thin_models(self) -> None:
        """models/ within its bound: the newest ``run.keep_models`` whole, and of the
        older ones every ``run.keep_model_every``-th version (ladder.json names them all)."""
        run = self.config.run
        versions = sorted(int(path.stem) for path in self.files.models.glob("*.safetensors") if path.stem.isdigit())
        for version in versions[:-run.keep_models]:
            if version != self.best_version and not (run.keep_model_every and version % run.keep_model_every == 0):
                self.files.model(version).unlink(missing_ok=True)

    def keep_games(self, stream: NewestEntries) -> int:
        """Keep the sample's games among those the stream got since the last call;
        returns how many games were kept."""
        kept: list = []
        self.on_disk(lambda: kept.extend(self.games.scan(stream)))
        return len(kept) // 2

    def on_disk(self, write: Callable[[], object], *, stop: bool = True) -> bool:
        """``write()``, a write into the run directory; whether it went through. A disk
        that fails (full: ENOSPC, or any OSError) is an outage: logged once, the run goes
        on, and past ``storage_outage_s`` ``StorageUnavailable`` stops it, naming it
        (``stop=False``: never, for what a stopping run writes last)."""
        try:
            write()
        except OSError as error:
            seconds = self.disk.failed(error)
            if stop and seconds >= self.config.storage_outage_s:
                raise StorageUnavailable(f"the run directory {self.files.path} could not be written for "
                                         f"{seconds:.0f} s (storage_outage_s is {self.config.storage_outage_s:g}): "
                                         f"{type(error).__name__}: {error}", seconds=seconds, expired=True) from error
            return False
        self.disk.ended()
        return True

    # -- stop and report --------------------------------------------------------------------
    def should_stop(self) -> bool:
        stop = self.config.stop
        if self.minutes is not None and time.monotonic() - self.started >= self.minutes * 60:
            return True
        if stop.steps is not None and self.learner_step >= stop.steps:
            return True
        return stop.promotions is not None and self.promotions >= stop.promotions

    def report(self, *, final: bool = False, **wiring: Unpack[WiringStatus]) -> StatusLine:
        """The status line: rates over the last interval (start-up and slow phases do
        not dilute them), totals since the start, and what the wiring adds (workers,
        servers, Redis); written to status.json and appended to status.jsonl.
        ``final`` marks the run's last line, so that a reader (the run page) can tell a
        finished run from one that has stopped reporting."""
        now = time.monotonic()
        before, then = self._last_totals
        interval = max(now - then, 1e-9)
        rate = {key: (self.totals[key] - before.get(key, 0)) / interval for key in TOTALS}
        self._last_totals = (dict(self.totals), now)
        learner = self.learner_stats
        losses = learner.get("losses", {}) if learner is not None else {}
        line = StatusLine(
            time=round(time.time(), 1), elapsed_s=round(now - self.started, 1),
            games=self.totals["games"], totals=dict(self.totals),
            games_per_s=round(rate["games"], 2), moves_per_s=round(rate["moves"], 1),
            positions_per_s=round(rate["positions"], 1), evaluations_per_s=round(rate["evaluations"]),
            cache_hit_share=round(rate["cache_hits"] / rate["evaluations"], 3) if rate["evaluations"] else 0.0,
            learner_step=self.learner_step,
            loss=round(losses.get("loss", float("nan")), 3) if losses else None,
            losses={k: round(v, 4) for k, v in losses.items()},
            window=learner.get("window", 0) if learner is not None else 0,
            window_capacity=self.config.train.replay_window,
            best=version_id(self.best_version), promotions=self.promotions, last_gating=self.last_gating,
            bad_entries=learner.get("bad_entries", 0) if learner is not None else 0,
            duplicate_games=learner.get("duplicate_games", 0) if learner is not None else 0,
            trimmed_unread=learner.get("trimmed_unread", 0) if learner is not None else 0,
            disk_outage_s=round(self.disk.seconds(), 1),
            error=self.error, final=final,
            reported_games=dict(list(self.reported_games.items())[-200:]),
            wiring=wiring,
        )
        if self._best_unsaved:  # a promotion whose best/ the disk refused
            self._best_unsaved = not self.on_disk(self.save_best, stop=not final)
        history_bytes = int(self.config.run.status_history_mb * 2**20)
        self.on_disk(lambda: write_status(self.files, line, history_bytes=history_bytes), stop=not final)
        self.log(progress_text(line, self.config, minutes=self.minutes))
        return line

    def summary(self) -> dict:
        summary = {"best": version_id(self.best_version), "promotions": self.promotions,
                   "steps": self.learner_step, "games": self.totals["games"],
                   "minutes": (time.monotonic() - self.started) / 60, "error": self.error}
        self.log("done: " + json.dumps(summary))
        return summary

    @property
    def learner_step(self) -> int:
        """The learner's step as it last reported (0 before its first report)."""
        return self.learner_stats.get("step", 0) if self.learner_stats is not None else 0

    def _set_metric(self, name: str, value: float, **tags: str) -> None:
        if self.metrics is not None:
            self.metrics.set(name, value, **tags)


def stop_on_sigterm(stop: Callable[[str], None]) -> Callable[[], None]:
    """SIGTERM (what Kubernetes and ``ray stop`` send) calls ``stop("SIGTERM")``, and the
    run stops at its loop's next pass as cleanly as on Ctrl-C; returns what puts the
    old handler back. The handler only sets a flag: an exception raised from it would
    surface inside whatever C code the main thread is in (Ray's ``wait`` turns it into
    a SystemError). Only the main thread gets signals."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_sigterm(signum: int, frame: Any) -> None:
        stop("SIGTERM")

    previous = signal.signal(signal.SIGTERM, on_sigterm)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def progress_text(line: StatusLine, config: TengenConfig, *, minutes: float | None) -> str:
    """The progress line the run prints every few seconds: what the learner waits for
    until it trains (``train.min_positions``), how far the run is from its stop
    (``minutes``, ``stop.steps``), plurals right."""
    parts = [f"{line.elapsed_s:6.0f}s games {line.games:,} ({line.games_per_s:.1f}/s)",
             f"pos/s {line.positions_per_s:,.0f}", f"eval/s {line.evaluations_per_s:,}",
             f"cached {line.cache_hit_share:.0%}", f"batch {line.wiring.get('mean_batch', '-')}"]
    if line.loss is None:
        parts.append(f"learner waits for {min(line.window, config.train.min_positions):,}/"
                     f"{config.train.min_positions:,} positions (train.min_positions)")
    else:
        steps = config.stop.steps
        parts.append(f"step {line.learner_step:,}" + (f"/{steps:,}" if steps is not None else "")
                     + f" loss {line.loss:.3f}")
    parts.append(f"window {line.window:,}/{line.window_capacity:,}")
    gating = line.last_gating
    parts.append(f"best {line.best}" + (f" gate {gating['wins']}-{gating['draws']}-{gating['losses']} "
                                        f"{gating['decision']}" if gating else ""))
    if minutes is not None and not line.final:
        left = max(0.0, minutes * 60 - line.elapsed_s)
        parts.append(f"{left / 60:.0f} min left" if left >= 90 else f"{left:.0f} s left")
    return " ".join(parts)
