"""Reading and steering a run from outside it: `tengen status`, `tengen scale` and
`tengen games`.

``tengen status`` says how many self-play workers and inference servers run (a worker
runs once its first chunk of games came back), how many were started and do not run
yet, and which parts have waited past ``cluster.start_timeout_s`` for a node with room,
each with Ray's state, what it asks for and what the nodes have free (and, while the
learner or a server waits, that no worker starts for it: ``held_for``).

A live run is reached through its Redis (cluster/live_run.py); none of these commands
imports TensorFlow or Ray. ``tengen status`` waits a few seconds at most for Redis and
then reports from the run directory (a stopped run, or Redis away); ``tengen scale``
waits through an outage as the run's own clients do (``redis.outage_s``), since its
request must reach the run.

``tengen games`` lists a run's finished self-play games or writes them as files.
While the run lives, they come from its Redis stream; once it has stopped, or when
its Redis does not answer within a few seconds, from the sample it kept on disk
(``games/<id>.game``, run/game_sample.py). The single-process run has no Redis, so its
games are always read from disk. Each game is decoded with the run's own config
(run/codec.py) and written as SGF (Go) or a plain line (the others,
play/game_records.py), named by its game id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tengen.cluster.live_run import live_client, outage_s, recorded_server
from tengen.cluster.redis_client import RedisUnavailable
from tengen.run import records
from tengen.run.run_dir import RunDir, game_file_name, version_id

# The registry and stream modules, the codec and the game records are imported where
# they are needed: they load the engine (numba, for GameRecord), which a run
# directory's status does not need.

__all__ = ["ExportedGame", "export_games", "read_run_games", "read_status", "request_workers", "STATUS_WAIT_S"]

#: how long `tengen status` waits for a live run's Redis before it reads the directory
STATUS_WAIT_S = 3.0


def read_status(run_dir: Path) -> dict:
    """What a run is doing or did: live from Redis, else from ``status.json`` and
    ``ladder.json`` (run/records.py's; ``RecordError`` for one this tengen does not
    read)."""
    files = RunDir(run_dir)
    if not files.holds_run():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    status: dict = {"run_dir": str(run_dir), "run_id": files.run_id(), "live": False}
    try:
        last = records.read_status(files)
    except FileNotFoundError:
        pass  # stopped before its first report
    else:
        # the parts' restarts and errors once, in "components"; each worker's count is the run's own
        status["last_report"] = {key: value for key, value in last.to_json().items()
                                 if key not in ("components", "reported_games")}
        wiring = last.wiring
        status["components"] = wiring.get("components", {})
        # What runs, and what the run started that does not run yet (with the reason for
        # each part that waited past cluster.start_timeout_s).
        status["workers"] = {"running": wiring.get("workers"), "starting": wiring.get("workers_starting", 0),
                             "target": wiring.get("target_workers")}
        status["inference_servers"] = {"running": wiring.get("inference_servers"),
                                       "starting": wiring.get("inference_servers_starting", 0)}
        status["not_started"] = wiring.get("not_started", [])
        status["held_for"] = wiring.get("held_for")  # what no worker starts for, while it waits for room
    try:
        status["ladder"] = list(records.read_ladder(files).entries)
    except FileNotFoundError:
        pass
    try:  # the newest strength evaluation, None before the first
        evaluations = records.read_evaluations(files)
    except FileNotFoundError:
        evaluations = []
    status["strength"] = evaluations[-1].to_json() if evaluations else None
    # the same keys for both wirings: None where the run has no embedded Redis
    status["redis_server"] = recorded_server(files)
    client = live_client(files, wait_s=STATUS_WAIT_S)
    if client is not None:
        from tengen.cluster.lease import DriverLease
        from tengen.cluster.registry import ModelRegistry
        from tengen.cluster.status_board import StatusBoard, memory_by_part
        from tengen.cluster.stream import SampleStream

        run_id = files.run_id()
        try:
            board = StatusBoard(client, run_id).get_status()
            registry = ModelRegistry(client, run_id)
            status.update({
                "live": True,
                "driver": _holder(DriverLease(client, run_id).current()),
                "best_version": registry.best_version(),
                "ladder": registry.ladder(),
                "stream_length": SampleStream(client, run_id, maxlen=1).length(),
                "workers_alive": sorted(k.split(":", 1)[1] for k in board if k.startswith("worker:")),
                "redis_memory": memory_by_part(client, run_id),
                "components": {**status.get("components", {}), **board},
            })
        except RedisUnavailable:
            status["live"] = False  # it went away while we read: what the directory says stands
    return status


def _holder(record: dict | None) -> dict | None:
    """The live driver's host, pid and start (not the lease's token)."""
    return None if record is None else {key: value for key, value in record.items() if key != "token"}


def request_workers(run_dir: Path, workers: int) -> None:
    """Ask a live run's driver for ``workers`` self-play workers."""
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    files = RunDir(run_dir)
    if not files.holds_run():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    client = live_client(files, wait_s=outage_s(files))
    if client is None:
        raise ConnectionError(f"the run in {run_dir} is not running (its Redis does not answer)")
    from tengen.cluster.status_board import StatusBoard

    StatusBoard(client, files.run_id()).request_workers(workers)


@dataclass(frozen=True)
class ExportedGame:
    game_id: str
    model: str  # the model version id that played it
    moves: int
    result: str
    text: str  # SGF or the plain line
    path: Path | None  # where it was written (None: only listed)


def read_run_games(run_dir: Path, *, last: int) -> tuple[str, list[bytes]]:
    """``(where, blobs)``: the newest ``last`` games' stream entries, oldest first, and
    where they came from in words."""
    if last < 1:
        raise ValueError("--last must be at least 1")
    files = RunDir(run_dir)
    if not files.holds_run():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    client = live_client(files, wait_s=STATUS_WAIT_S)
    if client is not None:
        from tengen.cluster.stream import SampleStream

        try:
            entries = SampleStream(client, files.run_id(), maxlen=1).newest_entries(count=last)
            return "the live run's stream", [blob for _, blob in reversed(entries)]
        except RedisUnavailable:
            pass  # it went away while we read: the directory's sample stands
    kept = sorted(files.games.glob("*.game"), key=lambda p: (p.stat().st_mtime, p.name))[-last:]
    return f"{files.games}", [p.read_bytes() for p in kept]


def export_games(run_dir: Path, *, last: int, export: Path | None,
                 say: Callable[[str], None] = print) -> list[ExportedGame]:
    """Read the newest ``last`` games of the run and write each into ``export`` (None:
    list them only), saying what was read and written."""
    from tengen.play.game_records import FinishedGame, GameTextError, file_suffix, result_text, write_game
    from tengen.run.codec import SampleFormatError, decode_game_meta
    from tengen.run.config import load_config

    files = RunDir(run_dir)
    where, blobs = read_run_games(run_dir, last=last)
    game = load_config(files.config).game.make()
    say(f"{len(blobs)} game(s) from {where}")
    out = []
    for i, blob in enumerate(blobs):
        try:
            record, meta = decode_game_meta(blob, planes_shape=game.planes_shape, num_actions=game.num_actions,
                                            game_name=game.name)
            model = version_id(record.model_version)
            finished = FinishedGame.from_record(record, players=(model, model), when=meta.created)
            text = write_game(game, finished)
            result = result_text(game, finished)
        except (SampleFormatError, GameTextError) as e:
            say(f"skipped game {i + 1}: {e}")
            continue
        game_id = record.game_id or f"game-{i:04d}"
        path = None
        if export is not None:
            path = export / game_file_name(game_id, file_suffix(game))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        exported = ExportedGame(game_id, model, record.length, result, text, path)
        out.append(exported)
        say(f"wrote {path} ({record.length} moves, {result}, model {model})" if path else
            f"{game_id}  model {model}  {record.length} moves  {result}")
    return out
