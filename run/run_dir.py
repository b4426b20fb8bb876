"""A run directory: the one place that names the files of a run, and the run's identity
(what status.json, status.jsonl, ladder.json, gating.jsonl and evaluations.jsonl hold, and in which
format, is run/records.py's).

    run.json                the run's id (unique, made when the run is created), format version
    config.yaml             the config used, every default spelled out
    log.txt                 what the driver said (log.1.txt ... the older ones, rotated: run/run_log.py)
    status.json             the last status line
    status.jsonl            every status line, one JSON object a line (what a finished run shows)
    ladder.json             every promotion with its gating result and Elo
    gating.jsonl            every gating match's result, promoted or not, one JSON object a line
    evaluations.jsonl       every strength evaluation of a best model against fixed references, a line each
    best/                   the best model (model.safetensors, config.yaml: a checkpoint directory)
    models/                 every promoted model, by version (000042.safetensors)
    learner/                the learner's checkpoint, unless ``storage`` names another place
    games/                  a sample of finished self-play games (``run.keep_game_every``): each
                            as its stream entry (<id>.game, run/codec.py) and as SGF (Go) or
                            a plain line (<id>.sgf, <id>.txt: play/game_records.py);
                            games/gating/<candidate>-<best>/ holds matches' games the same way;
                            games/scanned.json, how far the sample has looked (for --resume)
    redis/                  the embedded Redis: its AOF, config, log, and connection.json

The run id names the run's keys in Redis and labels its metrics. It used to be the
directory's name, so ``runs/c4`` on two machines sharing one Redis were one run; now
it is the name plus a random suffix, written once. A directory from before run.json
keeps its name as its id (its Redis keys are under it).
"""

from __future__ import annotations

import json
import operator
import os
import re
import secrets
from pathlib import Path

__all__ = ["RunDir", "RunDirError", "write_atomically", "RUN_FORMAT", "MODEL_FILE", "CONFIG_FILE", "check_run_id",
           "game_file_name", "version_id"]

#: run.json's format version
RUN_FORMAT = 1
#: a checkpoint directory's files (a run's best/, and the copies tools make of it):
#: the weights, and the config they were trained with (also the run's own config.yaml)
MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.yaml"
#: what a run id may be: it names the run's keys in Redis and labels its metrics
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


def check_run_id(run_id: str) -> str:
    """``run_id`` if it can name a run (its Redis keys, its metrics), else ValueError."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be 1-128 characters of letters, digits, '_', '.', '-', got {run_id!r}")
    return run_id


def write_atomically(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write ``path`` so that a reader, or a run resumed after a crash or a full disk,
    sees the file as it was before or after, never half of one or an empty one: the
    bytes reach the disk before the rename, and a write that fails leaves the old file
    and no other. ``private``: readable by the owner alone from its first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class RunDirError(ValueError):
    """The run directory does not fit the request: a run is there without ``--resume``,
    or none is there with it, or it is not one tengen can read."""


def _id_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "run"


def game_file_name(game_id: str, suffix: str) -> str:
    """A game's file name, its id made safe for any file system (``w003.1f2e:17`` ->
    ``w003.1f2e-17.sgf``)."""
    return f"{_id_part(game_id.replace(':', '-'))}{suffix}"


class RunDir:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    # -- the files ------------------------------------------------------------------------
    @property
    def identity(self) -> Path:
        return self.path / "run.json"

    @property
    def config(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def log(self) -> Path:
        return self.path / "log.txt"

    def old_log(self, n: int) -> Path:
        """The ``n``-th newest rotated log (``log.1.txt``: the one before log.txt)."""
        return self.path / f"log.{n}.txt"

    @property
    def status(self) -> Path:
        return self.path / "status.json"

    @property
    def status_history(self) -> Path:
        return self.path / "status.jsonl"

    @property
    def ladder(self) -> Path:
        return self.path / "ladder.json"

    @property
    def gating_history(self) -> Path:
        return self.path / "gating.jsonl"

    @property
    def evaluations(self) -> Path:
        return self.path / "evaluations.jsonl"

    @property
    def best(self) -> Path:
        """The best model as a checkpoint directory (``best_model``, ``best_config``)."""
        return self.path / "best"

    @property
    def best_model(self) -> Path:
        return self.best / MODEL_FILE

    @property
    def best_config(self) -> Path:
        return self.best / CONFIG_FILE

    @property
    def old_checkpoint(self) -> Path:
        """The checkpoint of tengen 0.1.0's single-process run, whose directories
        ``--resume`` refuses (another format, no run.json)."""
        return self.path / "checkpoint.safetensors"

    @property
    def models(self) -> Path:
        return self.path / "models"

    @property
    def learner(self) -> Path:
        return self.path / "learner"

    @property
    def games(self) -> Path:
        return self.path / "games"

    @property
    def games_scanned(self) -> Path:
        return self.games / "scanned.json"

    def game_file(self, game_id: str, suffix: str) -> Path:
        """A kept game's file: ``games/<id><suffix>`` (``game_file_name``)."""
        return self.games / game_file_name(game_id, suffix)

    @property
    def gating_matches(self) -> Path:
        """The folders of the kept gating matches' games (``gating_games``)."""
        return self.games / "gating"

    def gating_games(self, candidate: int, best: int) -> Path:
        """The folder of one match's games."""
        return self.gating_matches / f"{version_id(candidate)}-{version_id(best)}"

    @property
    def redis(self) -> Path:
        return self.path / "redis"

    @property
    def connection(self) -> Path:
        """How ``tengen status`` reaches the live run's Redis (owner-readable only)."""
        return self.redis / "connection.json"

    def model(self, version: int) -> Path:
        return self.models / f"{version_id(version)}.safetensors"

    # -- the run's identity -------------------------------------------------------------------
    def holds_run(self) -> bool:
        return self.config.exists()

    def check(self, *, resume: bool) -> None:
        """A new run needs a directory that holds none (two runs must never mix their
        checkpoints and streams); ``resume`` needs one that holds one."""
        exists = self.holds_run()
        if exists and not resume:
            raise RunDirError(f"{self.path} already holds a run: pass --resume to continue it, "
                              "or choose another --run-dir")
        if resume and not exists:
            raise RunDirError(f"{self.path} holds no run to resume (no config.yaml)")

    def run_id(self) -> str:
        """The run's id: from run.json, or the directory's name for a run made before it."""
        try:
            data = json.loads(self.identity.read_text())
        except FileNotFoundError:
            return _id_part(self.path.resolve().name)
        except (OSError, ValueError) as e:
            raise RunDirError(f"{self.identity} cannot be read: {e}") from None
        if not isinstance(data, dict) or data.get("format") != RUN_FORMAT or not isinstance(data.get("run_id"), str):
            raise RunDirError(f"{self.identity} is not a run identity this tengen knows (format {RUN_FORMAT})")
        return data["run_id"]

    def create_identity(self) -> str:
        """Write run.json for a new run (an older run keeps its name as its id)."""
        if self.identity.exists():
            return self.run_id()
        run_id = self.run_id() if self.holds_run() else f"{_id_part(self.path.resolve().name)}-{secrets.token_hex(4)}"
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.identity, (json.dumps({"format": RUN_FORMAT, "run_id": run_id}) + "\n").encode())
        return run_id

    def write(self, path: Path, data: bytes) -> None:
        """Write a file of the run atomically (``write_atomically``)."""
        write_atomically(path, data)

    def write_private(self, path: Path, data: bytes) -> None:
        """Write a file readable by the owner alone, from its first byte (never briefly
        world-readable), atomically."""
        write_atomically(path, data, private=True)
